//! The filter's verdicts in `Db::stats` when a key's versions cross data
//! blocks (sstable FORMAT.md, "Index block": a block's separator is the
//! shortest key after it, or its last internal key where the key's
//! versions go on). A snapshot older than a table's versions of a key
//! probes that table, whose filter rightly says "maybe": the key is there,
//! only invisible, so the probe is a true positive, never a false one,
//! wherever its versions start and end among the blocks. Stores with no
//! background work, so each table stays as written.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm::{Db, Options};

#[test]
fn a_table_holding_only_newer_versions_is_a_true_positive() {
    for versions in [1u64, 2, 3, 5, 8, 13] {
        for pad in [0usize, 9, 30, 70] {
            let dir = tempfile::tempdir().unwrap();
            let options = Options {
                block_size: 64,
                background_work: false,
                ..Options::default()
            };
            let db = Db::open(dir.path(), options).unwrap();
            // Neighbours that are prefixes of the key, extend it, or
            // differ in its last byte, so separators fall next to it.
            let key = b"key\x7f".to_vec();
            let neighbours: [&[u8]; 4] = [b"key", b"key\x7e\xff", b"key\x7f\x00", b"key\x80"];
            for n in neighbours {
                db.put(n, b"n").unwrap();
            }
            db.put(&key, b"old").unwrap();
            db.flush().unwrap();
            let snap = db.snapshot();
            for v in 0..versions {
                let mut value = format!("new{v}").into_bytes();
                value.resize(value.len() + pad, b'.');
                db.put(&key, &value).unwrap();
            }
            for n in neighbours {
                db.put(n, &vec![b'm'; pad]).unwrap();
            }
            db.flush().unwrap();
            let before = db.stats();
            assert_eq!(snap.get(&key).unwrap().as_deref(), Some(&b"old"[..]));
            for n in neighbours {
                assert_eq!(snap.get(n).unwrap().as_deref(), Some(&b"n"[..]));
            }
            let after = db.stats();
            let fp = |s: &bloomlsm::Stats| {
                s.levels
                    .iter()
                    .map(|l| l.filter_false_positives)
                    .sum::<u64>()
            };
            let tp = |s: &bloomlsm::Stats| {
                s.levels
                    .iter()
                    .map(|l| l.filter_true_positives)
                    .sum::<u64>()
            };
            assert_eq!(
                fp(&after) - fp(&before),
                0,
                "{versions} versions, pad {pad}: a probe of a table holding the key counted as a false positive"
            );
            // Each of the five keys: the newer table (only newer versions)
            // and the older (the visible one).
            assert_eq!(
                tp(&after) - tp(&before),
                10,
                "{versions} versions, pad {pad}"
            );
            db.close().unwrap();
        }
    }
}
