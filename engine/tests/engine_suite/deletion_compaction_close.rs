//! Deletion-triggered compaction on background threads, the store closed
//! while its picks are in flight (right after range deletes, snapshots
//! held), then opened read-only and again with another ratio (or none):
//! every answer, at the head and at every held snapshot, matches the
//! model, and once settled no pick is left to make.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options};
use common::model_run::{ModelRun, deep_narrow_options};
use common::{Model, Rng, pairs, short_key};

const KEYS: u64 = 600;

fn options(rng: &mut Rng) -> Options {
    Options {
        dynamic_level_bytes: rng.below(2) == 0,
        deletion_compaction_ratio: *rng.pick(&[None, Some(0.01), Some(0.3), Some(1.0)]),
        ..deep_narrow_options(true)
    }
}

fn check_read_only(run: &ModelRun, what: &str) {
    let db = Db::open_read_only(run.dir.path(), run.options.clone()).unwrap();
    let scanned: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(scanned == run.model, "{what}: read-only scan");
    for i in 0..KEYS + 10 {
        let k = short_key(i);
        assert_eq!(
            db.get(&k).unwrap(),
            run.model.get(&k).cloned(),
            "{what}: read-only get {i}"
        );
    }
}

#[test]
fn closing_while_deletion_picks_run_loses_nothing() {
    let mut total_picks = 0;
    for seed in 1..=12 {
        let mut rng = Rng(seed);
        let mut run = ModelRun::new(options(&mut rng), short_key, KEYS + 10);
        let mut order: Vec<u64> = (0..KEYS).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for &i in &order {
            run.put(i);
        }
        for round in 0..6 {
            let what = format!(
                "seed {seed} round {round} ({:?})",
                run.options.deletion_compaction_ratio
            );
            let from = rng.below(KEYS - 100);
            for i in from..from + 100 {
                if i % 5 != 0 {
                    run.delete(i);
                }
            }
            if rng.below(2) == 0 {
                run.take_snapshot();
            }
            for i in from..from + 100 {
                if i % 7 == 0 && rng.below(2) == 0 {
                    run.put(i);
                }
            }
            run.check(&what, false);
            total_picks += run.db().stats().deletion_compactions;
            // Closed with the picks the deletes called for in flight.
            run.close();
            check_read_only(&run, &what);
            run.options = options(&mut rng);
            run.open();
            run.check(&format!("{what}: reopened"), true);
        }
        run.db().wait_for_background_work().unwrap();
        let picks = run.db().stats().deletion_compactions;
        run.db().wait_for_background_work().unwrap();
        assert_eq!(
            run.db().stats().deletion_compactions,
            picks,
            "seed {seed}: picks go on"
        );
        run.check("settled", true);
        total_picks += picks;
    }
    println!("{total_picks} deletion-triggered picks");
    assert!(total_picks > 0, "no deletion-triggered pick ran");
}
