//! An application developer's trial of the public API, used only as
//! README.md's "Using it" and the rustdoc describe it: every call a new
//! user would make, each result asserted, including the shapes that
//! break stores (narrow tables on many levels, heavy deletes, snapshots
//! held across flushes and compactions, reopen halfway).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bloomlsm::{Db, Error, FilterKind, FilterPolicy, Options, Snapshot, SyncMode, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn in_range(model: &Model, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Vec<(Vec<u8>, Vec<u8>)> {
    if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
        (&range.0, &range.1)
        && s > e
    {
        return Vec::new(); // BTreeMap::range panics here; the store must not.
    }
    if let (Bound::Excluded(s), Bound::Excluded(e)) = (&range.0, &range.1)
        && s == e
    {
        return Vec::new();
    }
    model
        .range(range)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn scan_range(
    scan: impl FnOnce((Bound<Vec<u8>>, Bound<Vec<u8>>)) -> bloomlsm::Result<bloomlsm::DbIter>,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan(range).unwrap().map(|r| r.unwrap()).collect()
}

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
fn scan_bounds_match_a_model_including_odd_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 4 << 10,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = Model::new();
    for i in 0..300u32 {
        let k = format!("k{:03}", i * 2).into_bytes();
        db.put(&k, &i.to_le_bytes()).unwrap();
        model.insert(k, i.to_le_bytes().to_vec());
    }
    for i in (0..300u32).step_by(7) {
        let k = format!("k{:03}", i * 2).into_bytes();
        db.delete(&k).unwrap();
        model.remove(&k);
    }
    // Some keys that are prefixes of others, and an empty-ish boundary.
    for k in [&b"k"[..], b"k0", b"k00", b"k000\0", b"k\xff"] {
        db.put(k, b"p").unwrap();
        model.insert(k.to_vec(), b"p".to_vec());
    }
    let points: Vec<Vec<u8>> = [
        &b""[..],
        b"\0",
        b"k",
        b"k0",
        b"k000",
        b"k000\0",
        b"k001",
        b"k002",
        b"k014",
        b"k300",
        b"k301",
        b"k598",
        b"k599",
        b"k\xff",
        b"z",
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    let bounds = |p: &Vec<u8>| {
        [
            Bound::Included(p.clone()),
            Bound::Excluded(p.clone()),
            Bound::Unbounded,
        ]
    };
    let check = |db: &Db, model: &Model, what: &str| {
        for s in &points {
            for e in &points {
                for start in bounds(s) {
                    for end in bounds(e) {
                        let range = (start.clone(), end.clone());
                        let got = scan_range(|r| db.scan(r), range.clone());
                        assert_eq!(got, in_range(model, range.clone()), "{what}: {range:?}");
                    }
                }
            }
        }
        assert_eq!(
            all(db),
            in_range(model, (Bound::Unbounded, Bound::Unbounded))
        );
        // std ranges, as a user writes them.
        let r: Vec<_> = db
            .scan(b"k002".as_slice()..b"k010".as_slice())
            .unwrap()
            .map(|p| p.unwrap().0)
            .collect();
        assert_eq!(
            r,
            vec![
                b"k002".to_vec(),
                b"k004".to_vec(),
                b"k006".to_vec(),
                b"k008".to_vec()
            ]
        );
        let r: Vec<_> = db
            .scan(b"k010".as_slice()..=b"k016".as_slice())
            .unwrap()
            .map(|p| p.unwrap().0)
            .collect();
        assert_eq!(
            r,
            vec![b"k010".to_vec(), b"k012".to_vec(), b"k016".to_vec()]
        );
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = db.scan(b"k500".as_slice()..b"k100".as_slice()).unwrap();
        assert_eq!(backwards.count(), 0);
    };
    check(&db, &model, "memtable and L0");
    db.flush().unwrap();
    check(&db, &model, "flushed");
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    check(&db, &model, "reopened");
    db.close().unwrap();
}

#[test]
fn snapshots_and_iterators_outliving_the_db_report_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    let mut iter = db.scan::<&[u8], _>(..).unwrap();
    assert_eq!(iter.next().unwrap().unwrap().0, b"k000");
    let snap_iter = snap.scan::<&[u8], _>(..).unwrap();
    drop(db); // dropped without close
    assert!(matches!(snap.get(b"k001"), Err(Error::Closed)));
    assert!(matches!(snap.scan::<&[u8], _>(..), Err(Error::Closed)));
    assert!(matches!(iter.next(), Some(Err(Error::Closed))));
    assert!(iter.next().is_none());
    let rest: Vec<_> = snap_iter.collect();
    assert!(matches!(rest.as_slice(), [Err(Error::Closed)]), "{rest:?}");
    // The store can be opened again while they live, and has everything.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(all(&db).len(), 100);
    drop(snap);
    db.close().unwrap();
}

#[test]
fn locked_read_only_and_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    for read_only in [false, true] {
        let second = if read_only {
            Db::open_read_only(dir.path(), Options::default())
        } else {
            Db::open(dir.path(), Options::default())
        };
        match second {
            Err(e @ Error::Locked { .. }) => {
                assert!(
                    e.to_string().contains(&*dir.path().to_string_lossy()),
                    "{e}"
                );
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ro.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert!(matches!(ro.put(b"b", b"2"), Err(Error::ReadOnly)));
    assert!(matches!(ro.delete(b"a"), Err(Error::ReadOnly)));
    assert!(matches!(ro.flush(), Err(Error::ReadOnly)));
    assert!(matches!(
        ro.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 5.0 }),
        Err(Error::ReadOnly)
    ));
    let snap = ro.snapshot();
    assert_eq!(snap.get(b"a").unwrap(), Some(b"1".to_vec()));
    drop(snap);
    ro.close().unwrap();
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Db::open_read_only(empty.path(), Options::default()),
        Err(Error::NoManifest { .. })
    ));
    assert!(std::fs::read_dir(empty.path()).unwrap().next().is_none());
}

#[test]
fn corruption_names_the_file_and_offset_and_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        sync: SyncMode::Always,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..50u32 {
        db.put(format!("k{i:03}").as_bytes(), &[i as u8; 100])
            .unwrap();
    }
    drop(db);
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&wal, &bytes).unwrap();
    match Db::open(dir.path(), options.clone()) {
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            let text = e.to_string();
            let name = wal.file_name().unwrap().to_string_lossy().into_owned();
            assert!(text.contains(&name) && text.contains("offset"), "{text}");
            let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(e);
            assert!(boxed.source().is_some(), "a Corruption should say why");
        }
        Ok(_) => panic!("damaged WAL opened"),
    }
    bytes[at] ^= 0x40;
    std::fs::write(&wal, &bytes).unwrap();
    Db::open(dir.path(), options.clone())
        .unwrap()
        .close()
        .unwrap();
    let mut manifest = common::read_manifest(dir.path());
    manifest.version = bloomlsm::STORE_FORMAT_VERSION + 1;
    common::write_manifest(dir.path(), &manifest);
    match Db::open(dir.path(), options) {
        Err(e @ Error::UnsupportedFormat { .. }) => assert!(e.to_string().contains("MANIFEST")),
        other => panic!("{:?}", other.map(|_| ())),
    }
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

#[test]
fn every_filter_kind_and_policy_reads_back_and_rebuild_switches_policy() {
    let kinds = [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ];
    let policies = [
        FilterPolicy::Uniform { bits_per_key: 0.0 },
        FilterPolicy::Uniform { bits_per_key: 7.5 },
        FilterPolicy::PerLevel(vec![14.0, 10.0, 6.0]),
        FilterPolicy::Optimized { bits_per_key: 10.0 },
    ];
    for kind in kinds {
        for policy in &policies {
            let dir = tempfile::tempdir().unwrap();
            let options = Options {
                filter_kind: kind,
                filter_policy: policy.clone(),
                memtable_bytes: 16 << 10,
                l1_bytes: 64 << 10,
                target_file_bytes: 16 << 10,
                sync: SyncMode::Always,
                ..Options::default()
            };
            let db = Db::open(dir.path(), options.clone()).unwrap();
            for i in 0..2000u32 {
                db.put(format!("k{i:05}").as_bytes(), &i.to_le_bytes())
                    .unwrap();
            }
            db.wait_for_background_work().unwrap();
            let check = |db: &Db| {
                for i in 0..2000u32 {
                    let got = db.get(format!("k{i:05}").as_bytes()).unwrap();
                    assert_eq!(
                        got,
                        Some(i.to_le_bytes().to_vec()),
                        "{kind:?} {policy:?} {i}"
                    );
                    assert_eq!(db.get(format!("k{i:05}x").as_bytes()).unwrap(), None);
                }
            };
            check(&db);
            let stats = db.stats();
            assert_eq!(
                stats.total.entries,
                stats.levels.iter().map(|l| l.entries).sum::<u64>()
            );
            let new = FilterPolicy::Uniform { bits_per_key: 12.0 };
            db.rebuild_filters(new.clone()).unwrap();
            assert_eq!(db.options().filter_policy, new);
            check(&db);
            db.close().unwrap();
            let db = Db::open(dir.path(), options).unwrap();
            check(&db);
            db.close().unwrap();
        }
    }
}

#[test]
fn stats_describe_the_same_tables_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 8 << 10,
        l1_bytes: 32 << 10,
        target_file_bytes: 8 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{:05}", (i * 7919) % 3000).as_bytes(), &[1; 40])
            .unwrap();
        if i % 3 == 0 {
            db.delete(format!("k{:05}", (i * 31) % 3000).as_bytes())
                .unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let before = db.stats();
    let scanned_before = all(&db);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let after = db.stats();
    assert_eq!(after.gets, 0);
    assert_eq!(
        before
            .levels
            .iter()
            .map(|l| (l.tables, l.entries, l.tombstones, l.file_bytes))
            .collect::<Vec<_>>(),
        after
            .levels
            .iter()
            .map(|l| (l.tables, l.entries, l.tombstones, l.file_bytes))
            .collect::<Vec<_>>(),
    );
    assert_eq!(before.total.filter_bytes, after.total.filter_bytes);
    assert_eq!(all(&db), scanned_before);
    db.get(b"k00001").unwrap();
    db.get(b"nope").unwrap();
    assert_eq!(db.stats().gets, 2);
    db.close().unwrap();
}

#[test]
fn a_db_shared_across_threads_through_arc() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 16 << 10,
        l1_bytes: 64 << 10,
        target_file_bytes: 16 << 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options.clone()).unwrap());
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..1500u32 {
                    db.put(format!("t{t}-{i:05}").as_bytes(), &i.to_le_bytes())
                        .unwrap();
                    if i % 5 == 0 {
                        db.delete(format!("t{t}-{:05}", i / 2).as_bytes()).unwrap();
                    }
                }
            })
        })
        .collect();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for _ in 0..20 {
                let snap = db.snapshot();
                let a: Vec<_> = snap
                    .scan::<&[u8], _>(..)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let b: Vec<_> = snap
                    .scan::<&[u8], _>(..)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                assert_eq!(a, b, "a snapshot's scans differ");
                assert!(a.windows(2).all(|w| w[0].0 < w[1].0));
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    let mut model = Model::new();
    for t in 0..4u32 {
        for i in 0..1500u32 {
            model.insert(
                format!("t{t}-{i:05}").into_bytes(),
                i.to_le_bytes().to_vec(),
            );
            if i % 5 == 0 {
                model.remove(format!("t{t}-{:05}", i / 2).as_bytes());
            }
        }
    }
    let expected = in_range(&model, (Bound::Unbounded, Bound::Unbounded));
    assert_eq!(all(&db), expected);
    let db = Arc::try_unwrap(db).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(all(&db), expected);
    db.close().unwrap();
}

/// Minimal deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// Narrow tables on many levels, heavy deletes, snapshots held across
/// flushes and compactions, reopen halfway; checked against a model by
/// get and by ranged scans, through the store and through each snapshot.
#[test]
fn deep_narrow_tree_with_snapshots_deletes_and_reopens() {
    for background_work in [false, true] {
        deep_run(0x9E37_79B9_7F4A_7C15, background_work, 0);
    }
}

/// More seeds and shapes of the deep run, for hunting:
/// `EMBED_SEEDS=1..200 cargo test --test embed_trial -- --ignored deep_hunt`.
#[test]
#[ignore]
fn deep_hunt() {
    let seeds = std::env::var("EMBED_SEEDS").unwrap_or_else(|_| "1..4".into());
    let (a, b) = seeds.split_once("..").unwrap();
    for seed in a.parse::<u64>().unwrap()..b.parse::<u64>().unwrap() {
        eprintln!("seed {seed}");
        deep_run(seed, seed % 2 == 1, seed / 2 % 4);
    }
}

/// One deep run; `variant` picks the filter kind and the compaction style.
fn deep_run(seed: u64, background_work: bool, variant: u64) {
    {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: 2 << 10,
            l1_bytes: 4 << 10,
            level_size_ratio: 2,
            target_file_bytes: 2 << 10,
            num_levels: 12,
            block_size: 256,
            l0_compaction_trigger: 2,
            l0_slowdown_trigger: 4,
            l0_stop_trigger: 6,
            filter_kind: [
                FilterKind::Ribbon,
                FilterKind::Blocked,
                FilterKind::Standard,
            ][variant as usize % 3],
            filter_policy: FilterPolicy::Optimized { bits_per_key: 8.0 },
            dynamic_level_bytes: variant != 1,
            deletion_compaction_ratio: (variant >= 2).then_some(0.3),
            background_work,
            ..Options::default()
        };
        let mut db = Db::open(dir.path(), options.clone()).unwrap();
        let mut model = Model::new();
        let mut rng = Rng(seed.max(1));
        let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
        let universe = 1500u64;
        let key = |i: u64| format!("key{i:05}").into_bytes();
        for step in 0..12_000u64 {
            let i = rng.below(universe);
            match rng.below(10) {
                0..=4 => {
                    let v = format!("v{step}-{}", "x".repeat((step % 40) as usize)).into_bytes();
                    db.put(&key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
                5..=7 => {
                    db.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                }
                8 => {
                    // Range delete by batch.
                    let mut b = WriteBatch::new();
                    for j in i..(i + 20).min(universe) {
                        b.delete(&key(j));
                        model.remove(&key(j));
                    }
                    db.write(b).unwrap();
                }
                _ => {
                    let k = key(i);
                    assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "step {step}");
                }
            }
            if step % 1000 == 500 {
                snaps.push((db.snapshot(), model.clone()));
                if snaps.len() > 3 {
                    snaps.remove(0);
                }
            }
            if step % 500 == 499 {
                let a = key(rng.below(universe));
                let b = key(rng.below(universe));
                let bound = |k: Vec<u8>, kind: u64| match kind {
                    0 => Bound::Included(k),
                    1 => Bound::Excluded(k),
                    _ => Bound::Unbounded,
                };
                let range = (bound(a, rng.below(3)), bound(b, rng.below(3)));
                let got = scan_range(|r| db.scan(r), range.clone());
                assert_eq!(
                    got,
                    in_range(&model, range.clone()),
                    "step {step} {range:?}"
                );
                for (snap, m) in &snaps {
                    let got = scan_range(|r| snap.scan(r), range.clone());
                    assert_eq!(got, in_range(m, range.clone()), "snapshot, step {step}");
                    for j in (0..universe).step_by(37) {
                        assert_eq!(snap.get(&key(j)).unwrap(), m.get(&key(j)).cloned());
                    }
                }
            }
            if step == 6000 {
                // Reopen halfway: snapshots die with the store.
                snaps.clear();
                db.close().unwrap();
                db = Db::open(dir.path(), options.clone()).unwrap();
                assert_eq!(
                    all(&db),
                    in_range(&model, (Bound::Unbounded, Bound::Unbounded))
                );
            }
        }
        if background_work {
            db.wait_for_background_work().unwrap();
        }
        let stats = db.stats();
        let deepest = stats.levels.iter().rposition(|l| l.tables > 0).unwrap();
        assert!(
            deepest >= 4,
            "the tree should be deep: {:?}",
            stats.levels.len()
        );
        assert_eq!(
            all(&db),
            in_range(&model, (Bound::Unbounded, Bound::Unbounded))
        );
        for (snap, m) in &snaps {
            let got: Vec<_> = snap
                .scan::<&[u8], _>(..)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(got, in_range(m, (Bound::Unbounded, Bound::Unbounded)));
        }
        for i in 0..universe {
            assert_eq!(
                db.get(&key(i)).unwrap(),
                model.get(&key(i)).cloned(),
                "key {i}"
            );
        }
        snaps.clear();
        drop(db); // without close
        let db = Db::open_read_only(dir.path(), options.clone()).unwrap();
        assert_eq!(
            all(&db),
            in_range(&model, (Bound::Unbounded, Bound::Unbounded))
        );
        db.close().unwrap();
    }
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

/// An iterator (from the store, and from a snapshot dropped right after)
/// read slowly while writes, flushes, compactions, cleanups and a filter
/// rebuild replace every table under it: it yields the view it was made at.
#[test]
fn iterators_keep_their_view_while_every_table_is_replaced() {
    for background_work in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: 4 << 10,
            l1_bytes: 8 << 10,
            level_size_ratio: 2,
            target_file_bytes: 4 << 10,
            num_levels: 10,
            block_size: 256,
            deletion_compaction_ratio: Some(0.2),
            background_work,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let key = |i: u64| format!("key{i:05}").into_bytes();
        let mut model = Model::new();
        for i in 0..3000u64 {
            let k = key((i * 7919) % 3000);
            db.put(&k, &i.to_le_bytes()).unwrap();
            model.insert(k, i.to_le_bytes().to_vec());
        }
        let expected = in_range(&model, (Bound::Unbounded, Bound::Unbounded));
        let mut live = db.scan::<&[u8], _>(..).unwrap();
        let mut from_snapshot = {
            let snap = db.snapshot();
            snap.scan::<&[u8], _>(..).unwrap()
        };
        let mut got_live = Vec::new();
        let mut got_snap = Vec::new();
        let mut rng = Rng(7);
        for round in 0..30u64 {
            for _ in 0..100 {
                got_live.extend(live.next().map(|r| r.unwrap()));
                got_snap.extend(from_snapshot.next().map(|r| r.unwrap()));
            }
            for _ in 0..200 {
                let i = rng.below(3000);
                if rng.below(2) == 0 {
                    db.delete(&key(i)).unwrap();
                } else {
                    db.put(&key(i), &round.to_be_bytes()).unwrap();
                }
            }
            if round == 10 {
                db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 4.0 })
                    .unwrap();
            }
        }
        got_live.extend(live.map(|r| r.unwrap()));
        got_snap.extend(from_snapshot.map(|r| r.unwrap()));
        assert_eq!(got_live, expected, "background {background_work}");
        assert_eq!(got_snap, expected, "background {background_work}");
        db.close().unwrap();
    }
}

/// A flipped byte in a table's data block: reads of it fail with an error
/// that says corruption, names the table and the block's offset, and is
/// boxable; reads elsewhere go on.
#[test]
fn a_damaged_data_block_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[3; 50]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 1; // in the first data block
    std::fs::write(&table, &bytes).unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let err = db.get(b"k00001").unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let text = err.to_string();
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    assert!(text.contains(&name) && text.contains("offset"), "{text}");
    // The scan reads its first block when made, so it fails there.
    let scan_err = db.scan::<&[u8], _>(..).unwrap_err();
    assert!(scan_err.is_corruption(), "{scan_err}");
    // One that starts past the damaged block reads to the end.
    let tail: Vec<_> = db
        .scan(b"k01000".as_slice()..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(tail.len(), 1000);
    assert_eq!(db.get(b"k01999").unwrap(), Some(vec![3; 50]));
    let boxed: Box<dyn std::error::Error + Send + Sync> = err.into();
    assert!(boxed.source().is_some());
    db.close().unwrap();
}

/// Batches are atomic to concurrent readers too: writers keep pairs of
/// keys equal through batches while the tree flushes and compacts under
/// them; every snapshot, every scan and every snapshot get sees each pair
/// equal.
#[test]
fn concurrent_readers_never_see_half_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 4 << 10,
        l1_bytes: 16 << 10,
        level_size_ratio: 2,
        target_file_bytes: 4 << 10,
        num_levels: 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for n in 0..3000u64 {
                    let pair = (n * 13 + t) % 50;
                    let mut b = WriteBatch::new();
                    let v = format!("{t}-{n}").into_bytes();
                    if n % 7 == 0 {
                        b.delete(format!("a{pair:02}").as_bytes());
                        b.delete(format!("b{pair:02}").as_bytes());
                    } else {
                        b.put(format!("a{pair:02}").as_bytes(), &v);
                        b.put(format!("b{pair:02}").as_bytes(), &v);
                    }
                    db.write(b).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = Arc::clone(&db);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut rounds = 0;
                while !done.load(std::sync::atomic::Ordering::Acquire) || rounds < 5 {
                    rounds += 1;
                    let snap = db.snapshot();
                    let scan: BTreeMap<_, _> = db
                        .scan::<&[u8], _>(..)
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect();
                    for pair in 0..50u64 {
                        let a = format!("a{pair:02}").into_bytes();
                        let b = format!("b{pair:02}").into_bytes();
                        assert_eq!(scan.get(&a), scan.get(&b), "scan, pair {pair}");
                        assert_eq!(snap.get(&a).unwrap(), snap.get(&b).unwrap(), "snapshot");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    for r in readers {
        r.join().unwrap();
    }
    assert!(db.stats().compactions > 0);
}

/// After filters rebuilt in place, a reopen (read-write and read-only)
/// describes the same tables: sizes, unused bytes, filter memory, bits per
/// key and the formula's rate, level by level.
#[test]
fn stats_after_rebuild_and_reopen_describe_the_same_filters() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 16 << 10,
        l1_bytes: 64 << 10,
        target_file_bytes: 32 << 10,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..4000u32 {
        db.put(format!("k{:05}", (i * 7919) % 4000).as_bytes(), &[9; 20])
            .unwrap();
    }
    db.flush().unwrap();
    db.rebuild_filters(FilterPolicy::PerLevel(vec![4.0, 6.0, 16.0]))
        .unwrap();
    let figures = |s: &bloomlsm::Stats| {
        s.levels
            .iter()
            .chain([&s.total])
            .map(|l| {
                format!(
                    "t{} e{} x{} f{} u{} fb{} bpk{:.4} fpr{:.6} bad{}",
                    l.tables,
                    l.entries,
                    l.tombstones,
                    l.file_bytes,
                    l.unused_bytes,
                    l.filter_bytes,
                    l.bits_per_key,
                    l.theoretical_fpr,
                    l.tables_without_usable_filter
                )
            })
            .collect::<Vec<_>>()
    };
    let before = figures(&db.stats());
    assert!(db.stats().total.unused_bytes > 0, "{before:?}");
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
    assert_eq!(figures(&ro.stats()), before, "read-only");
    ro.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(figures(&db.stats()), before, "read-write");
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

/// Opens that fail leave nothing behind: bad options on a new directory,
/// a directory of other files, a path that is a file.
#[test]
fn failed_opens_leave_nothing_behind() {
    let parent = tempfile::tempdir().unwrap();
    let fresh = parent.path().join("a").join("b");
    let bad = Options {
        memtable_bytes: 0,
        ..Options::default()
    };
    assert!(matches!(
        Db::open(&fresh, bad),
        Err(Error::InvalidOptions(_))
    ));
    assert!(
        !parent.path().join("a").exists(),
        "a refused open created directories"
    );
    // A nested new path is created by a good open.
    Db::open(&fresh, Options::default())
        .unwrap()
        .close()
        .unwrap();
    assert!(fresh.join("MANIFEST").exists() || std::fs::read_dir(&fresh).unwrap().count() > 0);

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"mine").unwrap();
    match Db::open(other.path(), Options::default()) {
        Err(e @ Error::NotAStore { .. }) => assert!(e.to_string().contains("notes.txt"), "{e}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let names: Vec<_> = std::fs::read_dir(other.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("notes.txt")]);

    let file = other.path().join("notes.txt");
    let err = Db::open(&file, Options::default()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
}

/// `last_sequence` counts writes: one per put or delete, a batch its
/// length, and a reopen (clean, dropped, or after a flush) goes on from
/// where it was.
#[test]
fn last_sequence_counts_writes_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let start = db.last_sequence();
    db.put(b"a", b"1").unwrap();
    db.delete(b"a").unwrap();
    let mut b = WriteBatch::new();
    b.put(b"b", b"1").put(b"c", b"1").delete(b"d");
    db.write(b).unwrap();
    assert_eq!(db.last_sequence(), start + 5);
    let snap = db.snapshot();
    assert_eq!(snap.sequence(), start + 5);
    drop(snap);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 5, "after a clean close");
    db.put(b"e", b"1").unwrap();
    drop(db);
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "read-only, after a drop");
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "after a drop");
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "after a flush");
    db.close().unwrap();
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

/// The read counters add up as their docs define them.
#[test]
fn read_counters_add_up() {
    for bits in [10.0, 0.0] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_bytes: 8 << 10,
            l1_bytes: 16 << 10,
            target_file_bytes: 8 << 10,
            background_work: false,
            ..Options::default().with_bits_per_key(bits)
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for round in 0..2u32 {
            for i in 0..2000u32 {
                db.put(
                    format!("k{:05}", (i * 7919) % 2000).as_bytes(),
                    &round.to_le_bytes(),
                )
                .unwrap();
            }
        }
        db.flush().unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..500u32 {
            assert!(
                db.get(format!("k{:05}", i * 4).as_bytes())
                    .unwrap()
                    .is_some()
            );
            assert!(
                db.get(format!("k{:05}x", i * 4).as_bytes())
                    .unwrap()
                    .is_none()
            );
        }
        let s = db.stats();
        let t = &s.total;
        assert_eq!(s.gets, 1000);
        assert_eq!(s.memtable_hits, 0);
        assert_eq!(
            t.table_probes,
            t.filter_negatives
                + t.filter_true_positives
                + t.filter_false_positives
                + t.probes_without_filter,
            "bits {bits}: {t:?}"
        );
        if bits > 0.0 {
            assert_eq!(t.filter_true_positives, 500, "{t:?}");
            assert_eq!(t.probes_without_filter, 0);
            assert!(t.filter_bytes > 0);
        } else {
            assert_eq!(t.filter_bytes, 0);
            assert_eq!(t.probes_without_filter, t.table_probes);
            assert_eq!(
                t.filter_negatives + t.filter_true_positives + t.filter_false_positives,
                0
            );
        }
        assert!(t.data_blocks_read + t.block_cache_hits >= 500);
        assert!((s.data_blocks_read_per_get - t.data_blocks_read as f64 / 1000.0).abs() < 1e-9);
        let sum = |f: fn(&bloomlsm::LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
        assert_eq!(sum(|l| l.table_probes), t.table_probes);
        assert_eq!(sum(|l| l.data_blocks_read), t.data_blocks_read);
        assert_eq!(sum(|l| l.entries), t.entries);
        db.close().unwrap();
    }
}

/// Every type a public field or variant holds is nameable through
/// `bloomlsm` alone: an application depends on this crate, not on the
/// workspace's inner crates (whose versions it would have to match).
#[test]
fn a_trace_and_a_table_error_are_matched_through_bloomlsm_alone() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..1000u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    let (value, trace) = db.get_traced(b"k0500").unwrap();
    assert_eq!(value, Some(b"v".to_vec()));
    let step = trace.steps.last().unwrap();
    assert_eq!(step.filter, Some(bloomlsm::FilterVerdict::TruePositive));
    assert_eq!(step.block, Some(bloomlsm::BlockSource::File));
    let (_, trace) = db.get_traced(b"k0500x").unwrap();
    assert!(matches!(
        trace.steps.last().unwrap().filter,
        Some(bloomlsm::FilterVerdict::Negative | bloomlsm::FilterVerdict::FalsePositive)
    ));
    db.close().unwrap();

    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&table, &bytes).unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    match db.get(b"k0000") {
        Err(Error::Table(bloomlsm::sstable::Error::Corruption { offset, reason, .. })) => {
            assert_eq!(offset, 0);
            assert!(matches!(
                reason,
                bloomlsm::sstable::CorruptionReason::Block(_)
            ));
        }
        other => panic!("{other:?}"),
    }
    db.close().unwrap();
}

/// An application that opens the store for each request: the directory
/// stays bounded (files and bytes) over many open, write, close cycles.
#[test]
fn many_open_close_cycles_keep_the_directory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let usage = |dir: &std::path::Path| {
        let entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let bytes: u64 = entries.iter().map(|e| e.metadata().unwrap().len()).sum();
        (entries.len(), bytes)
    };
    let mut at_100 = (0, 0);
    for cycle in 0..300u32 {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(
            format!("k{:03}", cycle % 50).as_bytes(),
            &[cycle as u8; 100],
        )
        .unwrap();
        if cycle % 2 == 0 {
            db.close().unwrap();
        } else {
            drop(db);
        }
        if cycle == 100 {
            at_100 = usage(dir.path());
        }
    }
    let (files, bytes) = usage(dir.path());
    assert!(
        files <= at_100.0 + 4 && bytes <= at_100.1 * 2,
        "{at_100:?} then {files} files, {bytes} bytes"
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(all(&db).len(), 50);
    db.close().unwrap();
}

/// A fresh store: every operation works on nothing, and every figure of
/// its stats is a finite number (no 0/0).
#[test]
fn an_empty_store_answers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let finite = |s: &bloomlsm::Stats| {
        assert!(s.data_blocks_read_per_get.is_finite());
        for l in s.levels.iter().chain([&s.total]) {
            assert!(l.bits_per_key.is_finite() && l.observed_fpr.is_finite());
            assert!(l.theoretical_fpr.is_finite(), "{l:?}");
        }
    };
    finite(&db.stats());
    assert_eq!(db.stats().levels.len(), 7);
    assert_eq!(db.get(b"x").unwrap(), None);
    assert_eq!(all(&db), vec![]);
    assert_eq!(db.snapshot().scan::<&[u8], _>(..).unwrap().count(), 0);
    db.flush().unwrap();
    db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 5.0 })
        .unwrap();
    db.wait_for_background_work().unwrap();
    db.compact().unwrap();
    finite(&db.stats());
    // Everything deleted: tables of tombstones only.
    for i in 0..100u32 {
        db.put(&i.to_be_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    for i in 0..100u32 {
        db.delete(&i.to_be_bytes()).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(all(&db), vec![]);
    for i in 0..100u32 {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), None);
    }
    finite(&db.stats());
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(all(&db), vec![]);
    finite(&db.stats());
    db.close().unwrap();
}

/// `Stats::write_stalls` counts writes delayed or stopped: never more than
/// the writes made.
#[test]
fn write_stalls_count_writes_not_waits() {
    assert_eq!(
        write_stalls_of(false),
        0,
        "inline work leaves nothing to wait for"
    );
    // Background work here almost always makes writes wait (L0 stops at
    // one table); a run whose background thread kept up tests nothing, so
    // one of a few runs must have stalled, and every run counts at most
    // one stall a write.
    let stalled = (0..5).map(|_| write_stalls_of(true)).find(|&s| s > 0);
    assert!(stalled.is_some(), "no run of five stalled a write");
}

/// The stalls 400 writes counted (asserted at most one a write).
fn write_stalls_of(background_work: bool) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 512,
        max_immutable_memtables: 1,
        l0_compaction_trigger: 1,
        l0_slowdown_trigger: 1,
        l0_stop_trigger: 1,
        l1_bytes: 1 << 10,
        level_size_ratio: 2,
        target_file_bytes: 1 << 10,
        num_levels: 12,
        sync: SyncMode::Always,
        background_work,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let writes = 400u64;
    for i in 0..writes {
        db.put(format!("k{:05}", (i * 7919) % 1000).as_bytes(), &[1; 200])
            .unwrap();
    }
    let stalls = db.stats().write_stalls;
    eprintln!("background {background_work}: {writes} writes, {stalls} stalls");
    assert!(
        stalls <= writes,
        "background {background_work}: {writes} writes, {stalls} stalls"
    );
    db.close().unwrap();
    stalls
}

/// The store-wide write counters agree with the per-level ones their docs
/// tie them to, on a deep store with cleanups, deletion compactions and
/// rebalanced filters, before and after a reopen.
#[test]
fn write_counters_agree_with_the_levels() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes: 2 << 10,
        l1_bytes: 4 << 10,
        level_size_ratio: 2,
        target_file_bytes: 2 << 10,
        num_levels: 12,
        filter_policy: FilterPolicy::Optimized { bits_per_key: 10.0 },
        deletion_compaction_ratio: Some(0.3),
        ..Options::default()
    };
    let check = |db: &Db, what: &str| {
        db.wait_for_background_work().unwrap();
        let s = db.stats();
        let into =
            |r: std::ops::Range<usize>| s.levels[r].iter().map(|l| l.writes_into).sum::<u64>();
        assert_eq!(s.flushes, s.levels[0].writes_into, "{what}");
        assert_eq!(s.compactions, into(1..s.levels.len()), "{what}");
        assert_eq!(s.bytes_written, s.total.bytes_written, "{what}");
        assert_eq!(
            s.bytes_compacted_read, s.total.bytes_compacted_read,
            "{what}"
        );
        assert!(s.bottom_cleanups <= s.compactions, "{what}");
        assert!(
            s.deletion_compactions <= s.compactions + s.trivial_moves,
            "{what}"
        );
        assert!(
            s.filters_built >= s.flushes + s.compactions,
            "{what}: {s:?}"
        );
        s
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..4000u32 {
        db.put(format!("k{:05}", (i * 7919) % 4000).as_bytes(), &[5; 30])
            .unwrap();
    }
    let mut b = WriteBatch::new();
    for i in 1000..2500u32 {
        b.delete(format!("k{i:05}").as_bytes());
    }
    db.write(b).unwrap();
    let s = check(&db, "loaded");
    assert!(s.compactions > 0 && s.flushes > 0);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    check(&db, "reopened");
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

/// `use_direct_reads`: where the file system serves `O_DIRECT` the store
/// reads the same; where it refuses, `open` fails naming the path.
#[test]
fn direct_reads_work_or_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7; 40]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let options = Options {
        use_direct_reads: true,
        block_cache_bytes: 0,
        ..Options::default()
    };
    match Db::open(dir.path(), options) {
        Ok(db) => {
            for i in (0..3000u32).step_by(97) {
                assert_eq!(
                    db.get(format!("k{i:05}").as_bytes()).unwrap(),
                    Some(vec![7; 40])
                );
            }
            assert_eq!(all(&db).len(), 3000);
            db.close().unwrap();
        }
        Err(e) => {
            eprintln!("refused: {e}");
            assert!(
                e.to_string().contains(&*dir.path().to_string_lossy()),
                "{e}"
            );
        }
    }
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
