#![no_main]
//! Drives a `Db` with arbitrary operations, reopen steps included, and
//! checks every read against a BTreeMap.
use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use bloomlsm::{Db, FilterPolicy, Options};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Get(u8),
    Flush,
    Compact,
    Reopen,
    /// Every filter rebuilt at `bits % 24` bits per key (0: none): in
    /// place (appended to each table's file) or as copies.
    RebuildFilters(u8),
    /// An iterator opened before such a rebuild and a compaction over the
    /// rebuilt tables reads the store as it was when opened.
    IterAcrossRebuild(u8),
}

/// The operations, and whether the store runs deletion-triggered
/// compactions (at a quarter of a table's entries).
#[derive(Arbitrary, Debug)]
struct Input {
    deletion_compaction: bool,
    ops: Vec<Op>,
}

fn opts(deletion_compaction: bool) -> Options {
    Options {
        memtable_bytes: 512,
        block_size: 128,
        target_file_bytes: 512,
        l1_bytes: 2048,
        background_work: false,
        deletion_compaction_ratio: deletion_compaction.then_some(0.25),
        ..Options::default()
    }
}

fuzz_target!(|input: Input| {
    let Input {
        deletion_compaction,
        ops,
    } = input;
    let opts = || opts(deletion_compaction);
    let dir = std::env::temp_dir().join(format!("bloomlsm-fuzz-db-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(mut db) = Db::open(&dir, opts()) else {
        return;
    };
    let mut model = BTreeMap::new();
    for op in ops.into_iter().take(200) {
        match op {
            Op::Put(k, v) => {
                if db.put(&[k], &[v]).is_ok() {
                    model.insert(vec![k], vec![v]);
                }
            }
            Op::Delete(k) => {
                if db.delete(&[k]).is_ok() {
                    model.remove(&vec![k]);
                }
            }
            Op::Get(k) => assert_eq!(db.get(&[k]).ok().flatten(), model.get(&vec![k]).cloned()),
            Op::Flush => {
                let _ = db.flush();
            }
            Op::Compact => {
                let _ = db.compact();
            }
            Op::RebuildFilters(bits) => {
                let bits_per_key = f64::from(bits % 24);
                let _ = db.rebuild_filters(FilterPolicy::Uniform { bits_per_key });
            }
            Op::IterAcrossRebuild(bits) => {
                let Ok(iter) = db.scan::<&[u8], _>(..) else {
                    continue;
                };
                let bits_per_key = f64::from(bits % 24);
                let _ = db.rebuild_filters(FilterPolicy::Uniform { bits_per_key });
                let _ = db.compact();
                let seen: Vec<(Vec<u8>, Vec<u8>)> =
                    iter.map(|r| r.expect("the old view reads")).collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(seen, want);
            }
            Op::Reopen => {
                drop(db);
                db = Db::open(&dir, opts()).expect("reopen");
            }
        }
    }
});
