//! Bounded scans against a model, on stores where a table's cursor often
//! stops before a block (`TableIter::with_upper_bound`): a deep tree of
//! narrow tables of 64-byte blocks, keys over a four-symbol alphabet with
//! 0x00 and 0xFF (keys prefixes of one another, keys longer
//! than a block), a few hot keys rewritten and deleted under held
//! snapshots (their versions span blocks and tables), heavy deletes,
//! reopens, filters rebuilt, bounded iterators held across flushes and
//! compactions, and the same store rewritten as table format version 1.
//! Invariant checked: every scan, of the store and of each snapshot, with
//! every kind of bound at each end (keys written or not, the empty key, each also with
//! 0x00 appended: an inclusive end's exclusive form), yields exactly the
//! model's pairs in that range.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::ops::Bound;

use bloomlsm::{Db, FilterPolicy, Options, Snapshot};
use common::{Model, Rng, model_run::deep_narrow_options, scratch_dir};

const SYMBOLS: [u8; 4] = [0x00, 0x01, b'a', 0xFF];

/// Keys of one to four symbols (the store refuses the empty key; bounds
/// take it too), now and then longer than a block.
fn random_key(rng: &mut Rng) -> Vec<u8> {
    let len = 1 + rng.below(4) as usize;
    let mut k: Vec<u8> = (0..len).map(|_| *rng.pick(&SYMBOLS)).collect();
    if rng.below(16) == 0 {
        // Longer than a block: its entry is a block of its own.
        k.extend(std::iter::repeat_n(*rng.pick(&SYMBOLS), 100));
    }
    k
}

fn options() -> Options {
    Options {
        block_size: 64,
        ..deep_narrow_options(true)
    }
}

fn in_range(k: &[u8], (start, end): &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> bool {
    let above = match start {
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match end {
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

fn expected_in(model: &Model, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Model {
    model
        .iter()
        .filter(|(k, _)| in_range(k, range))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn random_bound(rng: &mut Rng, model: &Model) -> Bound<Vec<u8>> {
    let mut k = if !model.is_empty() && rng.below(2) == 0 {
        model
            .keys()
            .nth(rng.below(model.len() as u64) as usize)
            .unwrap()
            .clone()
    } else if rng.below(8) == 0 {
        Vec::new()
    } else {
        random_key(rng)
    };
    if rng.below(4) == 0 {
        k.push(0);
    }
    match rng.below(5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn check(
    label: &str,
    rng: &mut Rng,
    scan: impl Fn(&(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Model,
    model: &Model,
) {
    for _ in 0..40 {
        let start = random_bound(rng, model);
        let end = if rng.below(3) == 0 {
            // Near the start: short ranges end inside the block they start in.
            match &start {
                Bound::Included(k) | Bound::Excluded(k) => {
                    let mut e = k.clone();
                    e.push(*rng.pick(&SYMBOLS));
                    Bound::Included(e)
                }
                Bound::Unbounded => random_bound(rng, model),
            }
        } else {
            random_bound(rng, model)
        };
        let range = (start, end);
        let expected = expected_in(model, &range);
        assert_eq!(scan(&range), expected, "{label}: scan of {range:?}");
    }
}

fn scan_db(db: &Db, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Model {
    db.scan(range.clone())
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn scan_snapshot(s: &Snapshot, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> Model {
    s.scan(range.clone()).unwrap().map(|r| r.unwrap()).collect()
}

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let dir = scratch_dir();
    let mut db = Db::open(dir.path(), options()).unwrap();
    let mut model = Model::new();
    let hot: Vec<Vec<u8>> = (0..3).map(|_| random_key(&mut rng)).collect();
    let mut writes = 0u64;
    for round in 0..12 {
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        // Bounded iterators made now and read after the round's flushes
        // and compactions: they answer as of now.
        let held: Vec<_> = (0..4)
            .map(|_| {
                let range = (
                    random_bound(&mut rng, &model),
                    random_bound(&mut rng, &model),
                );
                let expected = expected_in(&model, &range);
                (db.scan(range.clone()).unwrap(), range, expected)
            })
            .collect();
        for step in 0..400 {
            writes += 1;
            let k = if rng.below(3) == 0 {
                rng.pick(&hot).clone()
            } else {
                random_key(&mut rng)
            };
            if rng.below(3) == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{writes}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            if step % 80 == 0 && snapshots.len() < 4 {
                snapshots.push((db.snapshot(), model.clone()));
            }
        }
        db.wait_for_background_work().unwrap();
        let label = format!("seed {seed} round {round}");
        for (it, range, expected) in held {
            let got: Model = it.map(|r| r.unwrap()).collect();
            assert_eq!(got, expected, "{label}: held across the round: {range:?}");
        }
        if round == 5 {
            // Filters rebuilt in place: the tables' indexes stay.
            db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 3.0 })
                .unwrap();
            check(
                &format!("{label} rebuilt"),
                &mut rng,
                |r| scan_db(&db, r),
                &model,
            );
        }
        check(&label, &mut rng, |r| scan_db(&db, r), &model);
        for (i, (s, seen)) in snapshots.iter().enumerate() {
            check(
                &format!("{label} snapshot {i}"),
                &mut rng,
                |r| scan_snapshot(s, r),
                seen,
            );
        }
        drop(snapshots);
        if round % 4 == 3 {
            db.close().unwrap();
            if round == 7 {
                common::format_v1::make_version_4_store(dir.path(), 64);
            }
            db = Db::open(dir.path(), options()).unwrap();
            check(
                &format!("{label} reopened"),
                &mut rng,
                |r| scan_db(&db, r),
                &model,
            );
        }
    }
    let levels = db.stats().levels.iter().filter(|l| l.tables > 0).count();
    assert!(
        levels >= 3,
        "seed {seed}: a deep tree ({levels} levels hold tables)"
    );
    db.close().unwrap();
}

#[test]
fn bounded_scans_answer_as_the_model_does() {
    for seed in 0..4 {
        run(seed);
    }
}
