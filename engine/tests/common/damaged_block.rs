//! A store of one table with one byte flipped in the middle of its data: a
//! damaged data block between intact ones, for tests of which blocks a read
//! reaches. Opened with [`options`] (512-byte blocks, work inline).

use bloomlsm::{Db, Options};

/// Small blocks, so a few hundred keys span many; no background threads.
pub fn options() -> Options {
    Options {
        block_size: 512,
        background_work: false,
        ..Options::default()
    }
}

/// `pairs` flushed into one table, in L0 or (`deeper`) moved below it,
/// with one byte flipped in the middle of the table's data.
pub fn damaged_store(
    pairs: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
    deeper: bool,
) -> tempfile::TempDir {
    let dir = super::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    for (k, v) in pairs {
        db.put(&k, &v).unwrap();
    }
    db.flush().unwrap();
    if deeper {
        // Only to place the one table below L0: nothing is shadowed.
        db.compact().unwrap();
        assert_eq!(db.stats().levels[0].tables, 0);
    }
    db.close().unwrap();
    let table = super::only_table(dir.path());
    let data_bytes = bloomlsm_sstable::Table::open_path(&table, 1, None)
        .unwrap()
        .properties()
        .data_bytes;
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[data_bytes as usize / 2] ^= 0x04;
    std::fs::write(&table, bytes).unwrap();
    dir
}

/// Keys read before the first error, and whether one came.
pub fn read(it: bloomlsm::DbIter) -> (Vec<Vec<u8>>, bool) {
    let mut keys = Vec::new();
    for item in it {
        match item {
            Ok((k, _)) => keys.push(k),
            Err(_) => return (keys, true),
        }
    }
    (keys, false)
}
