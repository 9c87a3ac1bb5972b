//! Reads as an application makes them: scans at every kind of bound,
//! snapshots and iterators that outlive the store or the tables under
//! them, readers on other threads beside writers.

use super::*;

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
