//! Crafted counts within the properties' rule (every checksum valid):
//! entries, distinct keys and tombstones at most the data bytes, as the
//! open checks (`PropertiesError::Counts`), but the data bytes themselves
//! near 2^63. A version 2 index names each block by its size alone, and
//! its last block may end anywhere before the footer; a sparse file
//! (tmpfs, XFS, btrfs) puts the footer at 2^63 - 1 for a few pages. Each
//! table below is a flushed table whose index gains one block of 2^63 -
//! 2^20 bytes (past every key, never read), its properties claiming that
//! many entries, tombstones and distinct keys, the manifest its entries
//! and size. Three such tables claim more than 2^64 in sum: `stats` must
//! not panic (debug) or wrap (release) on the sums; nor may the
//! compactions' plans and the filter budget.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io::{ErrorKind, Seek, SeekFrom, Write};
use std::path::Path;

use bloomlsm::sstable::TableProperties;
use bloomlsm::sstable::format::{BlockHandle, BlockKind, Footer, TRAILER_LEN};
use bloomlsm::sstable::fuzzing::reseal;
use bloomlsm::{Db, Error, Options};
use common::crafted_manifest::record_tables;
use common::scratch_dir;

/// The largest size a sparse file may have on Linux (`MAX_LFS_FILESIZE`).
const HUGE: u64 = i64::MAX as u64;
const FOOTER_LEN: usize = 64;
const FAKE_BLOCK: u64 = (1 << 63) - (1 << 20);

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Rewrites the table at `path` as described above; returns its claimed
/// entries; `None` if the file system refuses so large a file.
fn inflate(path: &Path) -> Option<u64> {
    let table = std::fs::read(path).unwrap();
    let footer_at = table.len() - FOOTER_LEN;
    let mut footer = Footer::decode(&table[footer_at..]).unwrap();
    assert_eq!(footer.version, 2);
    let at = |h: BlockHandle| h.offset as usize..(h.offset + h.size) as usize;
    let mut index = table[at(footer.index)].to_vec();
    let mut props = TableProperties::decode(&table[at(footer.properties)]).unwrap();
    // One more block, past every key: shared 0, "zzzz", sequence 0, size.
    index.extend_from_slice(&[0, 4]);
    index.extend_from_slice(b"zzzz");
    index.push(0);
    varint(FAKE_BLOCK, &mut index);
    let data_bytes = props.data_bytes + FAKE_BLOCK + TRAILER_LEN as u64;
    props.data_blocks += 1;
    props.data_bytes = data_bytes;
    props.entries = data_bytes;
    props.distinct_keys = data_bytes;
    props.tombstones = data_bytes;
    let props = props.encode();

    // The table as written, then the new index and properties blocks.
    let mut buf = table[..footer_at].to_vec();
    footer.index = BlockHandle {
        offset: buf.len() as u64,
        size: index.len() as u64,
    };
    buf.extend_from_slice(&index);
    buf.extend_from_slice(&[0; TRAILER_LEN]);
    footer.properties = BlockHandle {
        offset: buf.len() as u64,
        size: props.len() as u64,
    };
    buf.extend_from_slice(&props);
    buf.extend_from_slice(&[0; TRAILER_LEN]);
    let body = buf.len();
    buf.extend_from_slice(&footer.encode());
    reseal(
        &mut buf,
        &[
            (BlockKind::Index, footer.index),
            (BlockKind::Properties, footer.properties),
        ],
        &[],
    );
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&buf[..body]).unwrap();
    file.seek(SeekFrom::Start(HUGE - FOOTER_LEN as u64))
        .unwrap();
    file.write_all(&buf[body..]).ok()?;
    Some(data_bytes)
}

/// Three flushed tables inflated as above, the manifest naming them;
/// the store opened.
fn inflated_store(dir: &Path, options: &Options) -> Option<Db> {
    {
        let db = Db::open(dir, options.clone()).unwrap();
        for t in 0..3u32 {
            for i in 0..100u32 {
                db.put(format!("k{t}-{i:03}").as_bytes(), b"v").unwrap();
            }
            db.flush().unwrap();
        }
        db.close().unwrap();
    }
    let mut claimed = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            let Some(entries) = inflate(&path) else {
                eprintln!("skipped: the file system refuses a file of {HUGE} bytes");
                return None;
            };
            claimed.push(entries);
        }
    }
    assert_eq!(claimed.len(), 3);
    // Same-sized tables: every table claims the same count.
    assert!(claimed.iter().all(|&c| c == claimed[0]), "{claimed:?}");
    record_tables(dir, HUGE, Some(claimed[0]));
    let db = Db::open(dir, options.clone()).unwrap();
    assert_eq!(db.get(b"k1-007").unwrap(), Some(b"v".to_vec()));
    Some(db)
}

fn options() -> Options {
    Options {
        background_work: false,
        ..Options::default()
    }
}

/// `stats` summed the entries in a u64 and panicked (stats.rs).
#[test]
fn counts_within_sparse_data_bytes_saturate_in_stats() {
    let dir = scratch_dir();
    let Some(db) = inflated_store(dir.path(), &options()) else {
        return;
    };
    let stats = db.stats();
    assert_eq!(stats.total.tables, 3);
    assert_eq!(stats.total.entries, u64::MAX, "{:?}", stats.total);
    assert_eq!(stats.total.tombstones, u64::MAX, "{:?}", stats.total);
}

/// The first write's compaction (L0's recorded bytes are past
/// `l1_bytes`) summed its inputs' distinct keys in a u64
/// (`compaction/mod.rs`, `PlannedWrite::keys`) and panicked; the filter
/// budget sums key counts and shares in many more places. The budget now
/// counts at most `MAX_PLANNED_KEYS` (2^36) keys a table, and the plan
/// passes. The compaction then reads the crafted block of 2^63 - 2^20
/// bytes: its buffer's allocation failed and aborted the process. Now the
/// read fails with an `OutOfMemory` I/O error naming the table, the
/// block and its offset; writes stop on it, and reads go on.
#[test]
fn counts_within_sparse_data_bytes_do_not_overflow_the_compactions_plan() {
    let dir = scratch_dir();
    let Some(db) = inflated_store(dir.path(), &options()) else {
        return;
    };
    db.put(b"k9", b"v").unwrap();
    match db.wait_for_background_work() {
        Err(Error::WritesStopped(stop)) => {
            assert_eq!(stop.io_kind(), Some(ErrorKind::OutOfMemory), "{stop}");
            let text = stop.to_string();
            assert!(
                text.contains(".sst") && text.contains("data block at offset"),
                "{text}"
            );
        }
        other => panic!("the compaction of the crafted tables: {other:?}"),
    }
    assert_eq!(db.get(b"k1-007").unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.get(b"k9").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(db.close(), Err(Error::WritesStopped(_))));
}
