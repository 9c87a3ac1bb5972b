//! A filter whose read failed at its table's open, in a deep store of
//! narrow tables, retried while readers are held: a snapshot and
//! iterators (on the store and on the snapshot) taken before the retry
//! and read after it, writes that flush and compact meanwhile, then a
//! reopen. Invariants: no get (now or at the snapshot) answers absent
//! for a stored key, none brings back an older version or a deleted
//! key, no iterator skips a pair, a table whose filter was retried
//! successfully is no longer counted without one, and every
//! acknowledged write reads back after the reopen.

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::{Db, FilterPolicy, Options};

use crate::common::held_iter::HeldIter;
use crate::common::model_run::deep_narrow_options;
use crate::common::{Model, Rng, listing, pairs, short_key};

const KEYS: u64 = 600;

/// A deep store of narrow tables (`common::model_run`'s), without
/// background threads: the reads of an open come in a fixed order.
fn options(max_open_files: Option<usize>) -> Options {
    Options {
        filter_policy: FilterPolicy::Uniform { bits_per_key: 10.0 },
        block_cache_bytes: 4 << 10,
        max_open_files,
        ..deep_narrow_options(false)
    }
}

/// `n` writes of random keys below `KEYS`, a quarter of them deletes.
fn write(db: &Db, model: &mut Model, rng: &mut Rng, writes: &mut u64, n: u64) {
    for _ in 0..n {
        *writes += 1;
        let key = short_key(rng.below(KEYS));
        if rng.below(4) == 0 {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("{writes}:{}", rng.below(1 << 20)).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
}

/// Every key below `KEYS`, through `get`, against `model`.
fn check_gets(get: impl Fn(&[u8]) -> Option<Vec<u8>>, model: &Model, ctx: &str) {
    for i in 0..KEYS {
        let key = short_key(i);
        assert!(get(&key).as_ref() == model.get(&key), "{ctx}: key {i}");
    }
}

fn tables(dir: &Path) -> u64 {
    listing(dir).iter().filter(|n| n.ends_with(".sst")).count() as u64
}

fn held(it: bloomlsm::DbIter, model: &Model, from: &[u8], what: &str) -> HeldIter {
    let want = model
        .range(from.to_vec()..)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    HeldIter::new(it, want, what.into())
}

#[test]
fn filters_retried_under_held_readers_lose_no_write() {
    for (max_open_files, seed) in [(None, 7), (Some(2), 8)] {
        let dir = crate::common::scratch_dir();
        let fs = FaultFs::new();
        let open = || Db::open_with_fs(dir.path(), options(max_open_files), Arc::new(fs.clone()));
        let (mut model, mut rng, mut writes) = (Model::new(), Rng(seed), 0);
        let db = open().unwrap();
        write(&db, &mut model, &mut rng, &mut writes, 3000);
        db.close().unwrap();
        for round in 0..4 {
            let n = tables(dir.path());
            assert!(n >= 10, "a deep store: {n} tables");
            // Table k's open makes reads 4k..4k+3; its filter's is the last.
            let k = (round * n / 4 + round) % n;
            let ctx = format!("{max_open_files:?} round {round}: table {k} of {n}");
            let faults = fs.faults_injected();
            fs.fail_reads(ReadFault::Only(fs.reads() + 4 * k + 3));
            let db = open().unwrap();
            fs.heal();
            assert_eq!(fs.faults_injected() - faults, 1, "{ctx}");
            assert_eq!(db.stats().total.tables_without_usable_filter, 1, "{ctx}");
            // Readers taken while the table has no filter.
            let snapshot = db.snapshot();
            let seen = model.clone();
            let from = short_key(rng.below(KEYS / 2));
            let mut iters = vec![
                held(db.scan(from.clone()..).unwrap(), &model, &from, "iterator"),
                held(
                    snapshot.scan(from.clone()..).unwrap(),
                    &seen,
                    &from,
                    "snapshot iterator",
                ),
            ];
            for it in &mut iters {
                it.read(5, &ctx);
            }
            // The first get that probes the table retries its filter.
            check_gets(|k| db.get(k).unwrap(), &model, &ctx);
            check_gets(|k| snapshot.get(k).unwrap(), &seen, &ctx);
            let s = db.stats().total;
            assert_eq!(s.tables_without_usable_filter, 0, "{ctx}: not retried");
            check_gets(|k| db.get(k).unwrap(), &model, &ctx);
            assert_eq!(
                db.stats().total.probes_without_filter,
                s.probes_without_filter,
                "{ctx}: probes without a filter once it was retried"
            );
            // Writes that flush and compact under the held readers.
            write(&db, &mut model, &mut rng, &mut writes, 400);
            check_gets(|k| db.get(k).unwrap(), &model, &ctx);
            check_gets(|k| snapshot.get(k).unwrap(), &seen, &ctx);
            for it in &mut iters {
                while !it.read(100, &ctx) {}
            }
            drop((iters, snapshot));
            db.close().unwrap();
        }
        let db = open().unwrap();
        check_gets(|k| db.get(k).unwrap(), &model, "reopened");
        let all: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(all == model, "reopened: scan");
        db.close().unwrap();
    }
}
