//! The shapes that break stores: narrow tables on many levels, heavy
//! deletes, snapshots held across flushes and compactions, reopen halfway.

use super::*;

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
/// `EMBED_SEEDS=1..200 cargo test --test engine_suite -- --ignored embed_trial::deep::deep_hunt`.
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
