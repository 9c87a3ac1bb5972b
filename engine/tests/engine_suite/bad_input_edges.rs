//! Public entry points at and past their limits: each refuses with a typed
//! error or works, never panics, and a refusal changes nothing stored.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::ops::Bound;

use bloomlsm::{Db, Error, FilterPolicy, Options, WriteBatch};
use common::scratch_dir;

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn extreme_but_valid_options_open_write_read_and_reopen() {
    let shapes: Vec<(&str, Options)> = vec![
        (
            "huge memtable",
            Options {
                memtable_bytes: usize::MAX,
                ..Options::default()
            },
        ),
        (
            "huge immutables",
            Options {
                max_immutable_memtables: usize::MAX,
                ..Options::default()
            },
        ),
        (
            "huge file",
            Options {
                target_file_bytes: u64::MAX,
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
        (
            "huge l1",
            Options {
                l1_bytes: u64::MAX,
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
        (
            "huge ratio",
            Options {
                level_size_ratio: u64::MAX,
                memtable_bytes: 4096,
                l1_bytes: 4096,
                num_levels: 64,
                filter_policy: FilterPolicy::Optimized {
                    bits_per_key: 100.0,
                },
                ..Options::default()
            },
        ),
        (
            "huge triggers",
            Options {
                l0_compaction_trigger: usize::MAX,
                l0_slowdown_trigger: usize::MAX,
                l0_stop_trigger: usize::MAX,
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
        (
            "64 levels tiny",
            Options {
                num_levels: 64,
                memtable_bytes: 1,
                l1_bytes: 1,
                target_file_bytes: 1,
                level_size_ratio: 2,
                l0_compaction_trigger: 1,
                l0_slowdown_trigger: 1,
                l0_stop_trigger: 1,
                block_size: 64,
                filter_policy: FilterPolicy::Optimized { bits_per_key: 0.0 },
                ..Options::default()
            },
        ),
        (
            "max block",
            Options {
                block_size: 64 << 20,
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
        (
            "zero values",
            Options {
                max_value_bytes: 0,
                max_key_bytes: 1,
                ..Options::default()
            },
        ),
        (
            "per level long",
            Options {
                filter_policy: FilterPolicy::PerLevel(vec![100.0; 200]),
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
        (
            "per level odd",
            Options {
                filter_policy: FilterPolicy::PerLevel(vec![0.5, 1.0, 0.999, 100.0]),
                memtable_bytes: 4096,
                num_levels: 2,
                ..Options::default()
            },
        ),
        (
            "deletion ratio tiny",
            Options {
                deletion_compaction_ratio: Some(f64::MIN_POSITIVE),
                memtable_bytes: 4096,
                ..Options::default()
            },
        ),
    ];
    for (what, options) in shapes {
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let klen = options.max_key_bytes.min(3);
        for i in 0..300u32 {
            let mut k = i.to_be_bytes().to_vec();
            k.truncate(klen);
            if k.iter().all(|&b| b == 0) {
                k = vec![1; klen];
            }
            let v = vec![i as u8; options.max_value_bytes.min(i as usize % 50)];
            db.put(&k, &v)
                .unwrap_or_else(|e| panic!("{what}: put: {e}"));
            if i % 3 == 0 {
                db.delete(&k).unwrap();
            }
        }
        db.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
        db.wait_for_background_work()
            .unwrap_or_else(|e| panic!("{what}: settle: {e}"));
        let before = contents(&db);
        db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 3.5 })
            .unwrap();
        assert_eq!(contents(&db), before, "{what}");
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(contents(&db), before, "{what}: after reopen");
        db.close().unwrap();
    }
}

#[test]
fn invalid_options_are_refused_and_create_nothing() {
    let bads: Vec<Options> = vec![
        Options {
            deletion_compaction_ratio: Some(f64::NAN),
            ..Options::default()
        },
        Options {
            deletion_compaction_ratio: Some(0.0),
            ..Options::default()
        },
        Options {
            deletion_compaction_ratio: Some(f64::INFINITY),
            ..Options::default()
        },
        Options {
            filter_policy: FilterPolicy::PerLevel(vec![]),
            ..Options::default()
        },
        Options {
            filter_policy: FilterPolicy::PerLevel(vec![1.0, f64::NAN]),
            ..Options::default()
        },
        Options {
            filter_policy: FilterPolicy::Uniform { bits_per_key: -0.5 },
            ..Options::default()
        },
        Options {
            filter_policy: FilterPolicy::Optimized {
                bits_per_key: 100.5,
            },
            ..Options::default()
        },
        Options {
            filter_policy: FilterPolicy::Optimized {
                bits_per_key: f64::NEG_INFINITY,
            },
            ..Options::default()
        },
        Options {
            max_key_bytes: (64 << 10) + 1,
            ..Options::default()
        },
        Options {
            max_value_bytes: (64 << 20) + 1,
            ..Options::default()
        },
        Options {
            block_size: 63,
            ..Options::default()
        },
        Options {
            num_levels: 65,
            ..Options::default()
        },
        Options {
            num_levels: 1,
            ..Options::default()
        },
        Options {
            l0_slowdown_trigger: 3,
            ..Options::default()
        },
    ];
    for o in bads {
        let dir = scratch_dir();
        let store = dir.path().join("s");
        match Db::open(&store, o.clone()) {
            Err(Error::InvalidOptions(_)) => {}
            other => panic!("{o:?}: {other:?}"),
        }
        assert!(!store.exists(), "{o:?}: a refused open created the store");
    }
}

#[test]
fn refused_filter_rebuilds_change_nothing() {
    let dir = scratch_dir();
    let options = Options {
        memtable_bytes: 4096,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..500u32 {
        db.put(&i.to_be_bytes(), &[7; 20]).unwrap();
    }
    db.flush().unwrap();
    let before = contents(&db);
    let policy = db.options().filter_policy;
    for bad in [
        FilterPolicy::Uniform {
            bits_per_key: f64::NAN,
        },
        FilterPolicy::Uniform { bits_per_key: -1.0 },
        FilterPolicy::Uniform {
            bits_per_key: 1e300,
        },
        FilterPolicy::Optimized {
            bits_per_key: f64::INFINITY,
        },
        FilterPolicy::Optimized {
            bits_per_key: -0.0 - 1e-300,
        },
        FilterPolicy::PerLevel(vec![]),
        FilterPolicy::PerLevel(vec![3.0, -3.0]),
        FilterPolicy::PerLevel(vec![f64::NAN; 9]),
    ] {
        match db.rebuild_filters(bad.clone()) {
            Err(Error::InvalidOptions(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
        assert_eq!(db.options().filter_policy, policy, "{bad:?}");
    }
    for good in [
        FilterPolicy::Uniform { bits_per_key: -0.0 },
        FilterPolicy::PerLevel(vec![100.0; 1]),
        FilterPolicy::PerLevel(vec![
            0.0, 100.0, 0.999_999, 1.0, 50.0, 0.0, 7.0, 7.0, 9.0, 1.0,
        ]),
        FilterPolicy::Optimized {
            bits_per_key: 100.0,
        },
        FilterPolicy::Optimized { bits_per_key: 0.0 },
    ] {
        db.rebuild_filters(good.clone())
            .unwrap_or_else(|e| panic!("{good:?}: {e}"));
        assert_eq!(contents(&db), before, "{good:?}");
        for i in 0..500u32 {
            assert_eq!(
                db.get(&i.to_be_bytes()).unwrap(),
                Some(vec![7; 20]),
                "{good:?} {i}"
            );
        }
    }
}

#[test]
fn writes_at_and_past_the_limits() {
    let dir = scratch_dir();
    let options = Options {
        max_key_bytes: 16,
        max_value_bytes: 32,
        memtable_bytes: 4096,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    db.put(&[1; 16], &[2; 32]).unwrap();
    db.put(&[3; 1], &[]).unwrap();
    let before = contents(&db);
    assert!(matches!(
        db.put(&[1; 17], b""),
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        db.put(&[1; 16], &[0; 33]),
        Err(Error::ValueTooLarge { .. })
    ));
    assert!(db.delete(b"").is_err());
    assert!(db.delete(&vec![1; (64 << 10) + 1]).is_err());
    // Deleting a key longer than the put limit (a table holds up to 64 KiB) works.
    db.delete(&[9; 17]).unwrap();
    let mut b = WriteBatch::new();
    b.put(&[5; 16], &[5; 32])
        .delete(&[1; 16])
        .put(&[6; 2], &[0; 33]);
    assert!(db.write(b).is_err());
    let mut b = WriteBatch::new();
    b.delete(&[1; 16]).put(&[6; 17], b"");
    assert!(db.write(b).is_err());
    db.write(WriteBatch::new()).unwrap();
    assert_eq!(contents(&db), before);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(contents(&db), before, "after reopen");
}

#[test]
fn scans_with_odd_bounds() {
    let dir = scratch_dir();
    let db = Db::open(
        dir.path(),
        Options {
            memtable_bytes: 4096,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..200u8 {
        db.put(&[i], &[i]).unwrap();
        db.put(&[i, 0], &[i]).unwrap();
    }
    db.flush().unwrap();
    let all = contents(&db);
    let pick = |lo: Bound<&[u8]>, hi: Bound<&[u8]>| -> Vec<(Vec<u8>, Vec<u8>)> {
        all.iter()
            .filter(|(k, _)| {
                let k = k.as_slice();
                (match lo {
                    Bound::Included(l) => k >= l,
                    Bound::Excluded(l) => k > l,
                    Bound::Unbounded => true,
                }) && (match hi {
                    Bound::Included(h) => k <= h,
                    Bound::Excluded(h) => k < h,
                    Bound::Unbounded => true,
                })
            })
            .cloned()
            .collect()
    };
    let keys: Vec<&[u8]> = vec![
        b"",
        &[0],
        &[0, 0],
        &[5],
        &[5, 0],
        &[5, 0, 0],
        &[199, 0],
        &[255],
        &[255; 70000],
    ];
    for &a in &keys {
        for &b in &keys {
            for lo in [Bound::Included(a), Bound::Excluded(a), Bound::Unbounded] {
                for hi in [Bound::Included(b), Bound::Excluded(b), Bound::Unbounded] {
                    let got: Vec<_> = db
                        .scan::<&[u8], _>((lo, hi))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert_eq!(got, pick(lo, hi), "{lo:?}..{hi:?}");
                    let s = db.snapshot();
                    let got: Vec<_> = s
                        .scan::<&[u8], _>((lo, hi))
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    assert_eq!(got, pick(lo, hi), "snapshot {lo:?}..{hi:?}");
                }
            }
        }
    }
    assert_eq!(db.get(b"").unwrap(), None);
    assert_eq!(db.get(&[0; 70000]).unwrap(), None);
}

#[test]
fn huge_block_cache_budgets_open() {
    for bytes in [u64::MAX, 1 << 50, 1 << 40] {
        let dir = scratch_dir();
        let options = Options {
            block_cache_bytes: bytes,
            memtable_bytes: 4096,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..300u32 {
            db.put(&i.to_be_bytes(), &[1; 30]).unwrap();
        }
        db.flush().unwrap();
        assert_eq!(db.get(&7u32.to_be_bytes()).unwrap(), Some(vec![1; 30]));
        db.close().unwrap();
    }
}

/// `WriteBatch::with_capacity` takes a hint: one past what `Vec` can hold
/// (or than any batch may hold) is no reason to panic.
#[test]
fn batch_capacity_hints_past_any_batch_work() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for hint in [usize::MAX, isize::MAX as usize, isize::MAX as usize - 11] {
        let mut b = WriteBatch::with_capacity(hint);
        b.put(b"k", b"v").delete(b"gone");
        db.write(b).unwrap();
    }
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// The largest key and value `Db::open` accepts, in the smallest memtable
/// and blocks: stored, flushed, compacted with neighbours and reopened.
#[test]
fn largest_key_and_value_in_the_smallest_shapes() {
    let dir = scratch_dir();
    let options = Options {
        max_key_bytes: 64 << 10,
        max_value_bytes: 64 << 20,
        memtable_bytes: 1,
        block_size: 64,
        target_file_bytes: 1,
        l1_bytes: 1,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let big_key = vec![0xab; 64 << 10];
    let big_value: Vec<u8> = (0..64u32 << 20).map(|i| (i % 251) as u8).collect();
    db.put(&big_key, &big_value).unwrap();
    db.put(b"a", b"small").unwrap();
    db.put(&[0xab; 100], &big_value[..1000]).unwrap();
    assert!(matches!(
        db.put(&vec![1; (64 << 10) + 1], b""),
        Err(Error::InvalidKey { .. })
    ));
    assert!(matches!(
        db.put(b"b", &vec![0; (64 << 20) + 1]),
        Err(Error::ValueTooLarge { .. })
    ));
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.get(&big_key).unwrap().as_ref(), Some(&big_value));
    db.delete(&[0xab; 100]).unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let want = vec![
        (b"a".to_vec(), b"small".to_vec()),
        (big_key.clone(), big_value.clone()),
    ];
    assert_eq!(contents(&db), want);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(contents(&db), want, "after reopen");
}

/// A scan read to its end, then the store closed: the scan stays ended
/// (`None`, as an iterator that has ended must), where it gave
/// `Err(Closed)` once more after its `None` before.
#[test]
fn a_scan_read_to_its_end_stays_ended_after_close() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    let mut it = db.scan::<&[u8], _>(..).unwrap();
    assert_eq!(it.next().unwrap().unwrap(), (b"a".to_vec(), b"1".to_vec()));
    assert!(it.next().is_none());
    db.close().unwrap();
    assert!(it.next().is_none(), "an ended scan answered after close");
}

/// A scan and a snapshot held past `close`: the scan yields what it saw
/// (or a typed error), never a panic; the snapshot answers `Closed`; the
/// store reopens (while the scan is still held) with everything in it.
#[test]
fn reads_held_past_close() {
    let dir = scratch_dir();
    let options = Options {
        memtable_bytes: 4096,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..400u32 {
        db.put(&i.to_be_bytes(), &[i as u8; 40]).unwrap();
    }
    db.flush().unwrap();
    let before = contents(&db);
    let mut it = db.scan::<&[u8], _>(..).unwrap();
    let first = it.next().unwrap().unwrap();
    let snap = db.snapshot();
    for i in 0..400u32 {
        db.delete(&i.to_be_bytes()).unwrap();
    }
    db.close().unwrap();
    assert!(matches!(snap.get(b"x"), Err(Error::Closed)));
    let mut got = vec![first];
    for r in it.by_ref() {
        match r {
            Ok(p) => got.push(p),
            Err(e) => {
                assert!(matches!(e, Error::Closed), "{e}");
                break;
            }
        }
    }
    assert!(before.starts_with(&got), "a held scan changed after close");
    assert!(it.next().is_none(), "a held scan went on after its end");
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(contents(&db), vec![]);
    drop(it);
    drop(snap);
    db.close().unwrap();
}

/// A bad policy is the caller's mistake whatever the store's state: after a
/// failed WAL append has stopped writes, `rebuild_filters` with an invalid
/// policy still says the policy is invalid (as `write` reports an oversized
/// key before a stop), and a valid one reports the stop.
#[test]
fn rebuild_filters_names_a_bad_policy_on_a_store_whose_writes_stopped() {
    use bloomlsm::fs::fault::FaultFs;
    use std::sync::Arc;

    let dir = scratch_dir();
    let fs = FaultFs::new();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    let db = Db::open_with_fs(dir.path(), options, Arc::new(fs.clone())).unwrap();
    db.put(b"kept", b"v").unwrap();
    fs.fail_from_op(0);
    assert!(db.put(b"lost", b"v").is_err());
    assert!(matches!(
        db.put(b"again", b"v"),
        Err(Error::WritesStopped(_))
    ));
    match db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: -1.0 }) {
        Err(Error::InvalidOptions(_)) => {}
        other => panic!("an invalid policy on a stopped store: {other:?}"),
    }
    match db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 8.0 }) {
        Err(Error::WritesStopped(_)) => {}
        other => panic!("a valid policy on a stopped store: {other:?}"),
    }
    assert_eq!(db.get(b"kept").unwrap(), Some(b"v".to_vec()));
}
