//! A read-only open of a store left as a killed process leaves it: a
//! deep tree of narrow tables below, and above it two or more frozen
//! memtables whose flush is held (`FaultFs::set_hold_table_files`, the
//! flush thread waiting before its first table write) plus the active one,
//! each with its own live WAL. The writes in those WALs include batches
//! that put, delete and put one key again, spanning memtable switches, and
//! deletes of keys whose older versions sit in the tables.
//!
//! Promise (RELIABILITY rows 1, 2 and 11): the read-only open of the copy
//! answers every get and scan exactly as the model of the acknowledged
//! writes (no deleted key back, no older version), changes no file, and a
//! read-write open of the copy afterwards answers the same.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, WriteBatch};
use common::{Model, Rng, listing, scratch_dir};

fn key(i: u64) -> Vec<u8> {
    format!("key{:05}", i * 7 % 601).into_bytes()
}

fn options() -> Options {
    Options {
        memtable_bytes: 1024,
        max_immutable_memtables: 6,
        target_file_bytes: 1024,
        l1_bytes: 2048,
        block_size: 128,
        level_size_ratio: 3,
        num_levels: 6,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 6,
        l0_stop_trigger: 10,
        background_work: true,
        ..Options::default()
    }
}

fn write_some(db: &Db, model: &mut Model, rng: &mut Rng, n: u64, tag: &str) {
    for step in 0..n {
        let i = rng.below(600);
        match rng.below(10) {
            0..=4 => {
                let v = format!("{tag}-{step}-{i}").into_bytes();
                db.put(&key(i), &v).unwrap();
                model.insert(key(i), v);
            }
            5..=7 => {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            _ => {
                // Put, delete, put of one key in one batch, among others.
                let mut b = WriteBatch::new();
                let j = rng.below(600);
                let v1 = format!("{tag}-{step}-b1").into_bytes();
                let v2 = format!("{tag}-{step}-b2").into_bytes();
                b.put(&key(i), &v1).delete(&key(j)).delete(&key(i));
                b.put(&key(j), &v2).put(&key(i), &v2);
                db.write(b).unwrap();
                model.remove(&key(j));
                model.insert(key(j), v2.clone());
                model.insert(key(i), v2);
            }
        }
    }
}

fn check(db: &Db, model: &Model, what: &str) {
    let got: Model = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let missing: Vec<_> = model.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !model.contains_key(*k)).collect();
    assert!(
        got == *model,
        "{what}: scan differs: {} missing, {} back from the dead, first missing {:?}, first extra {:?}",
        missing.len(),
        extra.len(),
        missing.first().map(|k| String::from_utf8_lossy(k)),
        extra.first().map(|k| String::from_utf8_lossy(k))
    );
    for i in 0..601 {
        let k = format!("key{i:05}").into_bytes();
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{what}: get {i}"
        );
    }
}

fn image(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    listing(dir)
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

#[test]
fn read_only_open_of_a_killed_store_with_frozen_wals_held() {
    for seed in 0..4u64 {
        let mut rng = Rng(seed);
        let dir = scratch_dir();
        let fs = Arc::new(FaultFs::new());
        let db = Db::open_with_fs(dir.path(), options(), fs.clone()).unwrap();
        let mut model = Model::new();
        // A deep tree first.
        write_some(&db, &mut model, &mut rng, 3_000, "deep");
        db.wait_for_background_work().unwrap();
        // Then hold every table write: the next flush takes its memtables
        // and waits; writes go on freezing more.
        fs.set_hold_table_files(true);
        let wal_files = || {
            listing(dir.path())
                .iter()
                .filter(|n| n.ends_with(".wal"))
                .count()
        };
        // Until the flush waits and at least three frozen WALs are live
        // beside the active one; a few writes at a time, so the frozen
        // memtables never reach `max_immutable_memtables` (writes would
        // then wait for the held flush).
        let settled = wal_files();
        let mut rounds = 0;
        while fs.table_files_waiting() == 0 || wal_files() < 4 {
            // Once a memtable is frozen, no more writes until its flush
            // waits: a flush thread not yet run (a loaded machine) would
            // otherwise let writes freeze `max_immutable_memtables`
            // memtables, and the next write would stall for a flush held
            // until after this loop (the test hung so). Rotation schedules
            // the flush, so the wait ends.
            if wal_files() > settled {
                while fs.table_files_waiting() == 0 {
                    std::thread::yield_now();
                }
            }
            write_some(&db, &mut model, &mut rng, 5, &format!("held{rounds}"));
            rounds += 1;
            assert!(rounds < 1_000, "seed {seed}: no frozen WALs");
        }
        let wals = wal_files();
        // As a killed process leaves it: every file as written so far.
        let copy = tempfile::tempdir().unwrap();
        for name in listing(dir.path()) {
            if name != "LOCK" {
                std::fs::copy(dir.path().join(&name), copy.path().join(&name)).unwrap();
            }
        }
        // Let the original go on before any check: a failed check must
        // not leave its flush thread waiting (the drop would wait for it).
        fs.set_hold_table_files(false);
        let before = image(copy.path());

        {
            let ro = Db::open_read_only(copy.path(), options()).unwrap();
            check(
                &ro,
                &model,
                &format!("seed {seed}: read-only, {wals} WAL files"),
            );
            ro.close().unwrap();
        }
        assert!(
            image(copy.path()) == before,
            "seed {seed}: the read-only open changed a file"
        );
        {
            let rw = Db::open(copy.path(), options()).unwrap();
            check(&rw, &model, &format!("seed {seed}: read-write after"));
            rw.close().unwrap();
        }
        db.close().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        check(&db, &model, &format!("seed {seed}: the original reopened"));
        println!("seed {seed}: {wals} WAL files in the image");
    }
}
