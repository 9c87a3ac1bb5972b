//! The calls a first program makes: the README snippet, batches, limits
//! at and past their edges, options at the smallest and largest accepted
//! values, and the defaults the README states.

use super::*;

/// The README's snippet, as written there, run against a temporary
/// directory instead of /tmp/my-store.
#[test]
fn readme_using_it_snippet_runs() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"key", b"value")?;
    assert_eq!(db.get(b"key")?, Some(b"value".to_vec()));
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1").delete(b"key");
    db.write(batch)?; // atomic
    let mut seen = Vec::new();
    for pair in db.scan(b"a".as_slice()..)? {
        let (k, v) = pair?;
        seen.push((k, v));
    }
    assert_eq!(seen, vec![(b"a".to_vec(), b"1".to_vec())]);
    let snap = db.snapshot(); // consistent view
    let (value, trace) = db.get_traced(b"zz")?; // every table consulted, each filter's verdict
    assert_eq!(value, None);
    let _ = trace.reads_saved();
    let stats = db.stats(); // reads saved, observed FPR, per level
    assert!(stats.gets >= 2);
    assert_eq!(snap.get(b"a")?, Some(b"1".to_vec()));
    db.close()?;
    Ok(())
}

#[test]
fn public_types_are_send_sync_and_errors_are_boxable() {
    fn send_sync<T: Send + Sync>() {}
    fn error<T: std::error::Error + Send + Sync + 'static>() {}
    send_sync::<Db>();
    send_sync::<Snapshot>();
    send_sync::<WriteBatch>();
    error::<Error>();
    fn send<T: Send>() {}
    send::<bloomlsm::DbIter>();
}

#[test]
fn batches_apply_in_order_and_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"x", b"1")
        .delete(b"x")
        .put(b"y", b"1")
        .put(b"y", b"2");
    db.write(b).unwrap();
    assert_eq!(db.get(b"x").unwrap(), None);
    assert_eq!(db.get(b"y").unwrap(), Some(b"2".to_vec()));
    // A batch with one bad key is refused whole.
    let mut b = WriteBatch::new();
    b.put(b"z", b"1").put(b"", b"empty key");
    assert!(matches!(db.write(b), Err(Error::InvalidKey { len: 0, .. })));
    assert_eq!(db.get(b"z").unwrap(), None);
    // An empty batch is fine.
    db.write(WriteBatch::new()).unwrap();
    db.close().unwrap();
}

#[test]
fn key_and_value_limits_are_exact_and_refusals_do_not_stop_writes() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        max_key_bytes: 100,
        max_value_bytes: 1000,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let at_limit = vec![b'k'; 100];
    db.put(&at_limit, &[7; 1000]).unwrap();
    assert_eq!(db.get(&at_limit).unwrap(), Some(vec![7; 1000]));
    match db.put(&[b'k'; 101], b"v") {
        Err(Error::InvalidKey { len: 101, max: 100 }) => {}
        other => panic!("{other:?}"),
    }
    match db.put(b"k", &[0; 1001]) {
        Err(
            e @ Error::ValueTooLarge {
                len: 1001,
                max: 1000,
            },
        ) => {
            assert!(e.to_string().contains("1001"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(db.put(b"", b"v"), Err(Error::InvalidKey { .. })));
    assert!(matches!(db.delete(b""), Err(Error::InvalidKey { .. })));
    // A get of an empty or oversized key is just absent, no panic.
    assert_eq!(db.get(b"").unwrap(), None);
    assert_eq!(db.get(&[b'k'; 70_000]).unwrap(), None);
    // Refusals are the caller's mistake, not a failure: writes go on.
    db.put(b"after", b"ok").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(&at_limit).unwrap(), Some(vec![7; 1000]));
    db.close().unwrap();
}

#[test]
fn invalid_options_are_refused_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let bad = [
        Options {
            memtable_bytes: 0,
            ..Options::default()
        },
        Options {
            num_levels: 1,
            ..Options::default()
        },
        Options {
            level_size_ratio: 1,
            ..Options::default()
        },
        Options {
            block_size: 0,
            ..Options::default()
        },
        Options {
            filter_kind: FilterKind::Counting,
            ..Options::default()
        },
        Options {
            deletion_compaction_ratio: Some(0.0),
            ..Options::default()
        },
        Options::default().with_bits_per_key(f64::NAN),
        Options {
            filter_policy: FilterPolicy::PerLevel(vec![]),
            ..Options::default()
        },
    ];
    for options in bad {
        match Db::open(dir.path(), options.clone()) {
            Err(Error::InvalidOptions(_)) => {}
            other => panic!("{options:?}: {:?}", other.map(|_| ())),
        }
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: -1.0 }),
        Err(Error::InvalidOptions(_))
    ));
    db.put(b"still", b"writable").unwrap();
    db.close().unwrap();
}

/// The smallest sizes `Db::open` accepts, with keys and values at their
/// limits: every write must still land, nothing may hang or panic.
#[test]
fn the_smallest_accepted_sizes_still_work() {
    for background_work in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: 1,
            max_immutable_memtables: 1,
            l0_compaction_trigger: 1,
            l0_slowdown_trigger: 1,
            l0_stop_trigger: 1,
            l1_bytes: 1,
            level_size_ratio: 2,
            num_levels: bloomlsm::MAX_LEVELS,
            target_file_bytes: 1,
            block_size: 64,
            background_work,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let mut model = Model::new();
        let mut rng = Rng(42);
        let big_key = |i: u64| {
            let mut k = vec![b'b'; 65_536 - 8];
            k.extend_from_slice(&i.to_be_bytes());
            k
        };
        for step in 0..150u64 {
            let i = rng.below(60);
            let k = if i.is_multiple_of(20) {
                big_key(i)
            } else {
                format!("k{i:03}").into_bytes()
            };
            if rng.below(3) == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = vec![step as u8; (rng.below(3) * 3000) as usize];
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if background_work {
            db.wait_for_background_work().unwrap();
        }
        assert_eq!(
            all(&db),
            in_range(&model, (Bound::Unbounded, Bound::Unbounded))
        );
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(
            all(&db),
            in_range(&model, (Bound::Unbounded, Bound::Unbounded))
        );
        let stats = db.stats();
        assert!(
            stats.levels.iter().filter(|l| l.tables > 0).count() >= 2,
            "{stats:?}"
        );
        db.close().unwrap();
    }
}

/// A value at the default 16 MiB limit, twice the default memtable.
#[test]
fn a_value_at_the_default_limit_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let v: Vec<u8> = (0..16usize << 20).map(|i| (i % 251) as u8).collect();
    db.put(b"big", &v).unwrap();
    db.put(b"small", b"s").unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(v.as_slice()));
    db.flush().unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(v.as_slice()));
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(v.as_slice()));
    assert_eq!(db.get(b"small").unwrap(), Some(b"s".to_vec()));
    db.close().unwrap();
}

/// The largest values `Db::open` accepts: nothing overflows.
#[test]
fn the_largest_accepted_sizes_still_work() {
    for dynamic_level_bytes in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: usize::MAX,
            max_immutable_memtables: usize::MAX,
            l0_compaction_trigger: usize::MAX,
            l0_slowdown_trigger: usize::MAX,
            l0_stop_trigger: usize::MAX,
            l1_bytes: u64::MAX,
            level_size_ratio: u64::MAX,
            num_levels: bloomlsm::MAX_LEVELS,
            target_file_bytes: u64::MAX,
            block_size: bloomlsm::MAX_BLOCK_SIZE,
            block_cache_bytes: u64::MAX,
            filter_policy: FilterPolicy::Optimized {
                bits_per_key: 100.0,
            },
            dynamic_level_bytes,
            deletion_compaction_ratio: Some(1.0),
            ..Options::default()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for round in 0..3u32 {
            for i in 0..500u32 {
                db.put(format!("k{i:04}").as_bytes(), &round.to_le_bytes())
                    .unwrap();
            }
            db.flush().unwrap();
        }
        db.wait_for_background_work().unwrap();
        assert_eq!(all(&db).len(), 500);
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.get(b"k0001").unwrap(), Some(2u32.to_le_bytes().to_vec()));
        db.close().unwrap();
    }
}

/// One batch far larger than the memtable: applied whole, replayed whole.
#[test]
fn a_batch_much_larger_than_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 4 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut b = WriteBatch::new();
    for i in 0..100_000u32 {
        b.put(format!("k{i:06}").as_bytes(), &i.to_le_bytes());
    }
    for i in (0..100_000u32).step_by(3) {
        b.delete(format!("k{i:06}").as_bytes());
    }
    db.write(b).unwrap();
    let expect = |db: &Db| {
        let got = all(db);
        assert_eq!(got.len(), 66_666);
        assert_eq!(
            db.get(b"k000001").unwrap(),
            Some(1u32.to_le_bytes().to_vec())
        );
        assert_eq!(db.get(b"k000003").unwrap(), None);
    };
    expect(&db);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    expect(&db);
    db.close().unwrap();
}

/// An empty value is a value, not a delete: `Some(vec![])` from the
/// memtable, from a table, through a scan and after a reopen.
#[test]
fn an_empty_value_is_present() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"empty", b"").unwrap();
    db.put(b"full", b"x").unwrap();
    assert_eq!(db.get(b"empty").unwrap(), Some(vec![]));
    db.flush().unwrap();
    assert_eq!(db.get(b"empty").unwrap(), Some(vec![]));
    assert_eq!(
        all(&db),
        vec![
            (b"empty".to_vec(), vec![]),
            (b"full".to_vec(), b"x".to_vec())
        ]
    );
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"empty").unwrap(), Some(vec![]));
    db.close().unwrap();
}

/// The defaults README.md's "Using it" states.
#[test]
fn the_readme_defaults_are_the_defaults() {
    let o = Options::default();
    assert_eq!(
        o.filter_policy,
        FilterPolicy::Uniform { bits_per_key: 10.0 }
    );
    assert_eq!(o.filter_kind, FilterKind::Blocked);
    assert_eq!(o.block_size, 4096);
    assert_eq!(o.memtable_bytes, 8 << 20);
    assert_eq!(o.block_cache_bytes, 8 << 20);
    assert_eq!(o.sync, SyncMode::Never);
    assert_eq!(
        (
            o.l0_compaction_trigger,
            o.l0_slowdown_trigger,
            o.l0_stop_trigger
        ),
        (4, 8, 12)
    );
    assert_eq!(o.l1_bytes, 64 << 20);
    assert_eq!(o.level_size_ratio, 10);
    assert_eq!(o.target_file_bytes, 8 << 20);
    assert_eq!((o.max_key_bytes, o.max_value_bytes), (64 << 10, 16 << 20));
    assert!(!o.use_direct_reads);
    assert_eq!(o.deletion_compaction_ratio, None);
    assert_eq!(bloomlsm::MAX_BATCH_BYTES, (4usize << 30) - 1);
}
