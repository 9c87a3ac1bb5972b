//! Loads that call `rebuild_filters` between writes: a deep tree of
//! narrow tables (keys of very different lengths, so tables of a few to a
//! few dozen keys), heavy deletes and overwrites, snapshots held across
//! rebuilds, the policy switched between `Optimized` and `Uniform` at the
//! same bits and the filter kind changed at reopens. Every install stays
//! within 1.02 x uniform's bytes for the same tables (each in its own
//! filter's kind), and every answer, now and in each held snapshot,
//! matches a model: the newest version wins and deleted keys stay deleted.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::budget_test_shapes::{filters_and_uniform, mix, narrow_options};
use crate::inner::DbInner;
use crate::scratch_dirs::scratch_dir;
use crate::{Db, FilterKind, FilterPolicy, Snapshot, Stats};

const BITS: f64 = 10.0;

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Records every install past 1.02 x uniform.
fn watch(db: &Db, over: &Arc<Mutex<Vec<String>>>, what: String) {
    let over = Arc::clone(over);
    let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
    db.inner
        .install_hook
        .set(Some(Arc::new(move |_: &Stats, _: &[Vec<u64>]| {
            if let Some(inner) = inner.upgrade() {
                let (f, u) = filters_and_uniform(&inner, BITS);
                if f as f64 > 1.02 * u as f64 {
                    over.lock().push(format!(
                        "{what}: {f} over {u} (x{:.4})",
                        f as f64 / u as f64
                    ));
                }
            }
        })));
}

/// A key of 4 to about 300 bytes: its number's digits after a run of
/// filler whose length the number decides.
fn key(i: u64) -> Vec<u8> {
    let pad = match mix(i) % 10 {
        0..=5 => 0,
        6..=8 => 40,
        _ => 280,
    };
    let mut k = format!("{:06}", mix(i ^ 0x5a5a) % 1_000_000).into_bytes();
    k.extend(std::iter::repeat_n(b'.', pad));
    k.extend(format!("{i}").into_bytes());
    k
}

fn check(db: &Db, model: &Model, snapshots: &[(Snapshot, Model)], what: &str) {
    for (k, v) in model {
        assert_eq!(&db.get(k).unwrap(), v, "{what}: key {}", k.escape_ascii());
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    assert!(scanned == want, "{what}: scan differs from the model");
    for (n, (snap, held)) in snapshots.iter().enumerate() {
        for (k, v) in held {
            assert_eq!(
                &snap.get(k).unwrap(),
                v,
                "{what}: snapshot {n}, key {}",
                k.escape_ascii()
            );
        }
    }
}

fn run(seed: u64, kinds: &[FilterKind], background_work: bool) {
    let dir = scratch_dir();
    let over = Arc::new(Mutex::new(Vec::new()));
    let mut model = Model::new();
    let mut rng = seed;
    let mut next = || {
        rng = mix(rng);
        rng
    };
    let mut written = 0u64;
    for (phase, &kind) in kinds.iter().enumerate() {
        let db = Db::open(dir.path(), narrow_options(kind, BITS, background_work)).unwrap();
        let what = format!("seed {seed:x}, phase {phase} ({kind:?})");
        watch(&db, &over, what.clone());
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        for op in 0..2500u64 {
            let r = next() % 100;
            if r < 55 || written < 200 {
                let i = written;
                written += 1;
                let v = format!("v{i}-{op}").into_bytes();
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), Some(v));
            } else if r < 80 {
                let i = next() % written;
                db.delete(&key(i)).unwrap();
                model.insert(key(i), None);
            } else if r < 95 {
                let i = next() % written;
                let v = format!("o{i}-{op}-{phase}").into_bytes();
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), Some(v));
            } else if r < 97 {
                if snapshots.len() >= 3 {
                    snapshots.remove(0);
                }
                snapshots.push((db.snapshot(), model.clone()));
            } else {
                let policy = if next() % 3 == 0 {
                    FilterPolicy::Uniform { bits_per_key: BITS }
                } else {
                    FilterPolicy::Optimized { bits_per_key: BITS }
                };
                db.rebuild_filters(policy).unwrap();
            }
        }
        db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: BITS })
            .unwrap();
        check(&db, &model, &snapshots, &what);
        let over = over.lock();
        assert!(
            over.is_empty(),
            "{} installs over 1.02 x uniform: {:?}",
            over.len(),
            &over[..over.len().min(5)]
        );
        drop(snapshots);
        db.close().unwrap();
    }
}

// One seed per test, so the test threads run them side by side (together
// they were the engine's longest unit test, the last to end).
use FilterKind::{Blocked, Ribbon, Standard};

#[test]
fn rebuilds_between_writes_keep_memory_and_answers_from_blocked() {
    run(1, &[Blocked, Standard, Blocked], false);
}

#[test]
fn rebuilds_between_writes_keep_memory_and_answers_from_standard() {
    run(2, &[Standard, Ribbon, Standard], false);
}

#[test]
fn rebuilds_between_writes_keep_memory_and_answers_from_ribbon() {
    run(3, &[Ribbon, Blocked, Ribbon], false);
}

/// The same on the background threads: flushes and compactions plan and
/// install beside the rebuilds.
#[test]
fn rebuilds_between_writes_on_background_threads_from_blocked() {
    run(4, &[Blocked, Ribbon, Standard], true);
}

/// As above, from the other end of the kinds.
#[test]
fn rebuilds_between_writes_on_background_threads_from_ribbon() {
    run(5, &[Ribbon, Standard, Blocked], true);
}
