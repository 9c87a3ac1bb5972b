//! Filters at the edges of the legal bits-per-key range, for every table
//! filter kind, over tables of 1 to a few hundred keys: a filter must
//! never answer "absent" for a key its table holds (a false negative is a
//! wrong answer: a present key read as missing). Bits just below, at and
//! just above `MIN_FILTER_BITS_PER_KEY`, fractional values, and the
//! 100-bit maximum; uniform, per-level and optimized policies; flushes,
//! background compactions, `rebuild_filters` to another edge, and a
//! reopen with another kind.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};
use common::{Rng, scratch_dir};

const BITS: [f64; 9] = [
    0.0, 0.999_999, 1.0, 1.000_001, 1.5, 2.75, 9.99, 99.999, 100.0,
];
const KINDS: [FilterKind; 3] = [
    FilterKind::Standard,
    FilterKind::Blocked,
    FilterKind::Ribbon,
];

fn random_key(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => 1,
        1 => 200 + rng.below(300) as usize,
        _ => 3 + rng.below(20) as usize,
    };
    (0..len).map(|_| rng.below(256) as u8).collect()
}

fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(3) {
        0 => FilterPolicy::Uniform {
            bits_per_key: *rng.pick(&BITS),
        },
        1 => FilterPolicy::Optimized {
            bits_per_key: *rng.pick(&BITS),
        },
        _ => FilterPolicy::PerLevel((0..1 + rng.below(4)).map(|_| *rng.pick(&BITS)).collect()),
    }
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut Rng, at: &str) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "{at}: present key {k:?}"
        );
    }
    for _ in 0..50 {
        let k = random_key(rng);
        assert_eq!(
            db.get(&k).unwrap().as_ref(),
            model.get(&k),
            "{at}: probe {k:?}"
        );
    }
}

// One test per seed, so the harness runs them side by side.
#[test]
fn filters_at_every_edge_never_hide_a_present_key_seed_0() {
    filters_at_every_edge_never_hide_a_present_key(0);
}

#[test]
fn filters_at_every_edge_never_hide_a_present_key_seed_1() {
    filters_at_every_edge_never_hide_a_present_key(1);
}

#[test]
fn filters_at_every_edge_never_hide_a_present_key_seed_2() {
    filters_at_every_edge_never_hide_a_present_key(2);
}

#[test]
fn filters_at_every_edge_never_hide_a_present_key_seed_3() {
    filters_at_every_edge_never_hide_a_present_key(3);
}

fn filters_at_every_edge_never_hide_a_present_key(seed: u64) {
    let counts = [1u64, 2, 3, 5, 8, 13, 31, 32, 33, 63, 64, 65, 100, 257];
    {
        let mut rng = Rng(seed);
        for kind in KINDS {
            let dir = scratch_dir();
            let opts = Options {
                filter_kind: kind,
                filter_policy: policy(&mut rng),
                memtable_bytes: 64 << 20,
                block_size: *rng.pick(&[64, 4096]),
                target_file_bytes: *rng.pick(&[1, 2000, u64::MAX]),
                l1_bytes: 4096,
                level_size_ratio: 2,
                num_levels: 4,
                background_work: rng.below(2) == 0,
                ..Options::default()
            };
            let at = format!("seed {seed} {opts:?}");
            let db = Db::open(dir.path(), opts.clone()).unwrap();
            let mut model = BTreeMap::new();
            // One flush per count: a table of exactly that many keys.
            for &n in &counts {
                for _ in 0..n {
                    let k = random_key(&mut rng);
                    let v = k.iter().rev().copied().collect::<Vec<u8>>();
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                db.flush().unwrap();
                check(&db, &model, &mut rng, &format!("{at}: after {n}"));
            }
            db.wait_for_background_work().unwrap();
            check(&db, &model, &mut rng, &format!("{at}: settled"));
            let p = policy(&mut rng);
            db.rebuild_filters(p.clone()).unwrap();
            check(&db, &model, &mut rng, &format!("{at}: rebuilt to {p:?}"));
            db.close().unwrap();
            let other = Options {
                filter_kind: *rng.pick(&KINDS),
                filter_policy: policy(&mut rng),
                ..opts
            };
            let db = Db::open(dir.path(), other.clone()).unwrap();
            check(
                &db,
                &model,
                &mut rng,
                &format!("{at}: reopened as {other:?}"),
            );
            // More writes under the new kind, compacted with the old tables.
            for _ in 0..300 {
                let k = random_key(&mut rng);
                db.put(&k, b"x").unwrap();
                model.insert(k, b"x".to_vec());
            }
            db.flush().unwrap();
            db.wait_for_background_work().unwrap();
            check(&db, &model, &mut rng, &format!("{at}: reopened, written"));
            db.close().unwrap();
        }
    }
}
