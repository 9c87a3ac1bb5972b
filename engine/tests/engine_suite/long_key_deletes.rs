//! Deletes of keys at the 64 KiB table limit under a tiny `max_key_bytes`:
//! the extreme the write check allows (65,536 and 65,535 bytes, the latter
//! a prefix of the former) through the WAL and its replay, the memtable,
//! flush, compaction over older overlapping versions, a held snapshot,
//! filter rebuilds, read-only open and reopens under either limit.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Error, FilterPolicy, Options, WriteBatch};
use common::scratch_dir;

const TABLE_MAX: usize = 64 << 10;

fn tiny() -> Options {
    Options {
        max_key_bytes: 16,
        ..Options::default()
    }
}

fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

/// What is left once both long keys are deleted: the short neighbours,
/// which sort before, between (none) and after them.
fn survivors() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        (b"l".to_vec(), b"L".to_vec()),
        (b"m".to_vec(), b"M".to_vec()),
        (b"n".to_vec(), b"N".to_vec()),
    ]
}

#[test]
fn deletes_of_64_kib_keys_under_a_16_byte_limit_survive_every_path() {
    let dir = scratch_dir();
    let max = vec![b'm'; TABLE_MAX];
    let one_less = vec![b'm'; TABLE_MAX - 1];
    // Two overlapping L0 tables holding the long keys, written under the
    // default limit.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for k in [&b"l"[..], b"m", b"n"] {
        db.put(k, &k.to_ascii_uppercase()).unwrap();
    }
    db.put(&max, b"old").unwrap();
    db.put(&one_less, b"old").unwrap();
    db.flush().unwrap();
    db.put(&max, b"v1").unwrap();
    db.put(&one_less, b"v1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();

    // Under max_key_bytes = 16: deletes in the WAL only, then a crash-free
    // close without a flush, so the next open replays them.
    let db = Db::open(dir.path(), tiny()).unwrap();
    assert!(matches!(
        db.put(&max, b"x"),
        Err(Error::InvalidKey { max: 16, .. })
    ));
    assert!(matches!(
        db.delete(&vec![b'm'; TABLE_MAX + 1]),
        Err(Error::InvalidKey { max: TABLE_MAX, .. })
    ));
    let mut batch = WriteBatch::new();
    batch.delete(&max);
    batch.put(b"o", b"O");
    db.write(batch).unwrap();
    db.delete(&one_less).unwrap();
    // A never-stored key at the limit: a tombstone as the largest key.
    db.delete(&vec![0xff; TABLE_MAX]).unwrap();
    db.delete(b"o").unwrap();
    assert_eq!(db.get(&max).unwrap(), None);
    assert_eq!(db.get(&one_less).unwrap(), None);
    assert_eq!(all(&db), survivors());
    db.close().unwrap();

    // Read-only open replays the WAL without writing.
    let ro = Db::open_read_only(dir.path(), tiny()).unwrap();
    assert_eq!(ro.get(&max).unwrap(), None);
    assert_eq!(ro.get(&one_less).unwrap(), None);
    assert_eq!(all(&ro), survivors());
    ro.close().unwrap();

    // Replay, then a snapshot that must keep seeing v1 through a flush of
    // the tombstones and a compaction over the overlapping older tables.
    let db = Db::open(dir.path(), tiny()).unwrap();
    assert_eq!(all(&db), survivors());
    db.put(&b"m"[..], b"M").unwrap();
    let snap = db.snapshot();
    db.put(&max[..16], b"short16").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.get(&max).unwrap(), None);
    assert_eq!(db.get(&one_less).unwrap(), None);
    assert_eq!(db.get(&max[..16]).unwrap(), Some(b"short16".to_vec()));
    let mut expect = survivors();
    expect.insert(2, (max[..16].to_vec(), b"short16".to_vec()));
    assert_eq!(all(&db), expect);
    drop(snap);
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 3.0 })
        .unwrap();
    assert_eq!(db.get(&max).unwrap(), None);
    assert_eq!(all(&db), expect);
    // The deletes again, now over a compacted tree, then compaction again.
    db.delete(&max).unwrap();
    db.delete(&one_less).unwrap();
    db.compact().unwrap();
    assert_eq!(all(&db), expect);
    db.close().unwrap();

    for options in [tiny(), Options::default()] {
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.get(&max).unwrap(), None);
        assert_eq!(db.get(&one_less).unwrap(), None);
        assert_eq!(all(&db), expect);
        db.close().unwrap();
    }
}

/// A snapshot taken before the long-key deletes keeps its values through
/// flush and compaction of the tombstones.
#[test]
fn a_snapshot_keeps_64_kib_keys_deleted_under_a_16_byte_limit() {
    let dir = scratch_dir();
    let max = vec![b'm'; TABLE_MAX];
    let one_less = vec![b'm'; TABLE_MAX - 1];
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(&max, b"v").unwrap();
    db.put(&one_less, b"w").unwrap();
    db.flush().unwrap();
    db.close().unwrap();

    let db = Db::open(dir.path(), tiny()).unwrap();
    let snap = db.snapshot();
    db.delete(&max).unwrap();
    db.delete(&one_less).unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(snap.get(&max).unwrap(), Some(b"v".to_vec()));
    assert_eq!(snap.get(&one_less).unwrap(), Some(b"w".to_vec()));
    let seen: Vec<Vec<u8>> = snap
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(seen, vec![one_less.clone(), max.clone()]);
    assert_eq!(all(&db), Vec::<(Vec<u8>, Vec<u8>)>::new());
    drop(snap);
    db.compact().unwrap();
    assert_eq!(all(&db), Vec::<(Vec<u8>, Vec<u8>)>::new());
    db.close().unwrap();
    let db = Db::open(dir.path(), tiny()).unwrap();
    assert_eq!(db.get(&max).unwrap(), None);
    assert_eq!(all(&db), Vec::<(Vec<u8>, Vec<u8>)>::new());
    db.close().unwrap();
}
