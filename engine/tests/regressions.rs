//! One test per fault of the correctness review: each failed before its
//! fix, in the shape a user reaches it.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm::{CorruptFilterPolicy, Db, FilterPolicy, Options};

fn no_compaction() -> Options {
    Options {
        background_work: false,
        l0_compaction_trigger: 64,
        l0_slowdown_trigger: 64,
        l0_stop_trigger: 64,
        ..Options::default()
    }
}

/// Three L0 tables, each holding a newer version of the same key.
fn three_versions_in_l0(db: &Db) {
    for v in [b"v1", b"v2", b"v3"] {
        db.put(b"k", v).unwrap();
        db.put(b"other", v).unwrap();
        db.flush().unwrap();
    }
    assert_eq!(db.stats().levels[0].tables, 3);
}

#[test]
fn rebuilt_l0_tables_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), no_compaction()).unwrap();
    three_versions_in_l0(&db);
    for bits in [6.5, 12.0, 3.0] {
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
            .unwrap();
        assert_eq!(
            db.get(b"k").unwrap(),
            Some(b"v3".to_vec()),
            "after rebuild at {bits}"
        );
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), no_compaction()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()), "after reopen");
    let all: Vec<_> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        all,
        vec![
            (b"k".to_vec(), b"v3".to_vec()),
            (b"other".to_vec(), b"v3".to_vec())
        ]
    );
}

#[test]
fn tables_rebuilt_for_a_damaged_filter_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        on_corrupt_filter: CorruptFilterPolicy::Rebuild,
        ..no_compaction()
    };
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        three_versions_in_l0(&db);
        db.close().unwrap();
    }
    // Damage the filter of the OLDEST table: its rebuild gets the highest
    // file number of all.
    let mut tables: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    tables.sort();
    let oldest = &tables[0];
    let table = bloomlsm_sstable::Table::open_path(oldest, 0, None).unwrap();
    let filter = table.footer().filter;
    drop(table);
    let mut bytes = std::fs::read(oldest).unwrap();
    bytes[filter.offset as usize + 3] ^= 0xff;
    std::fs::write(oldest, &bytes).unwrap();

    let db = Db::open(dir.path(), options.clone()).unwrap();
    // Inline background work rebuilds damaged filters on the next write.
    db.put(b"unrelated", b"x").unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()));
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()), "after reopen");
}
