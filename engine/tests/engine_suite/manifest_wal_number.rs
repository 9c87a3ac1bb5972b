//! A manifest whose oldest live WAL number is at or past its next file
//! number (checksummed, so only a bug or a hand edit makes one: every WAL
//! number was handed out below it) is refused at open. Opened, every WAL
//! on disk is below it: none is replayed, and all are removed as flushed,
//! the writes they held lost without a word.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Damage, Db, Error, ManifestDamage, Options};
use common::{key, listing, read_manifest, value, write_manifest};

fn options() -> Options {
    Options {
        num_levels: 7,
        memtable_bytes: 8192,
        target_file_bytes: 1024,
        block_size: 128,
        background_work: false,
        ..Options::default()
    }
}

#[test]
fn a_wal_number_past_the_next_file_number_is_refused() {
    let dir = common::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..20 {
        db.put(&key(i), &value(i)).unwrap();
    }
    // Closed unflushed: the writes are in the WAL only.
    db.close().unwrap();
    let wals = || -> Vec<String> {
        listing(dir.path())
            .into_iter()
            .filter(|n| n.ends_with(".wal"))
            .collect()
    };
    let before = wals();
    assert_eq!(before.len(), 1);
    let mut m = read_manifest(dir.path());
    let [next, _, wal] = m.counters;
    assert!(wal < next, "a written manifest: WAL {wal}, next {next}");
    m.counters[2] = next + 3;
    write_manifest(dir.path(), &m);
    match Db::open(dir.path(), options()) {
        Err(Error::Corruption {
            reason: Damage::Manifest(ManifestDamage::WalNumber { wal, next: named }),
            path,
            ..
        }) => {
            assert_eq!((wal, named), (next + 3, next));
            assert!(path.ends_with("MANIFEST"), "{}", path.display());
        }
        Err(other) => panic!("expected the WAL number refused, got {other}"),
        Ok(db) => {
            let read = db.get(&key(0)).unwrap();
            db.close().unwrap();
            panic!(
                "opened: get of an acknowledged write: {read:?}; WALs before {before:?}, \
                 after {:?}",
                wals()
            );
        }
    }
    // Refused before anything was written: the WAL is still there.
    assert_eq!(wals(), before);
}
