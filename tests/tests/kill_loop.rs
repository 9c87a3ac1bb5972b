//! Kill loop, one phase per sync mode: a child process writes batches with
//! the background threads on (flushes and compactions running) and records
//! each acknowledged batch; the parent kills it with SIGKILL at a random
//! moment (some during open and recovery), reopens and checks the promise
//! of a process kill, which is the same in both modes (a returned write
//! has reached the OS): every acknowledged batch survived, and the store
//! holds exactly batches `0..r` for some `r`: no partial batch, no hole.
//!
//! Batch `n` sets a marker key to `n`, puts three keys and deletes one,
//! all within 1,024 keys, so batches overwrite and delete each other's
//! keys; the marker names the `r` whose model the whole store must equal.
//! Cycles per phase: 25, or `BLOOMLSM_CRASH_CYCLES`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bloomlsm::{Db, Options, SyncMode, WriteBatch};
use bloomlsm_tests::contents;
use rand::Rng;

const CHILD_ENV: &str = "BLOOMLSM_KILL_CHILD_DIR";
const SYNC_ENV: &str = "BLOOMLSM_KILL_SYNC";
/// `Options::max_open_files` of the child and the recovery after it
/// ("none": no bound).
const OPEN_FILES_ENV: &str = "BLOOMLSM_KILL_OPEN_FILES";
const MARKER: &[u8] = b"~last-batch";
const KEYS: u64 = 1024;

fn options(sync: SyncMode, max_open_files: Option<usize>) -> Options {
    Options {
        sync,
        max_open_files,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        l1_bytes: 16 << 10,
        level_size_ratio: 4,
        target_file_bytes: 4 << 10,
        block_size: 512,
        ..Options::default()
    }
}

fn sync_name(sync: SyncMode) -> &'static str {
    match sync {
        SyncMode::Always => "always",
        SyncMode::Never => "never",
    }
}

/// A fixed scramble of `x` (SplitMix64's finalizer).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn slot_key(slot: u64) -> Vec<u8> {
    format!("k{slot:04}").into_bytes()
}

/// The operations of batch `n`: `Some(value)` puts, `None` deletes.
fn batch_ops(n: u64) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut ops = vec![(MARKER.to_vec(), Some(n.to_string().into_bytes()))];
    for j in 0..3 {
        let v = format!("{n}:{j}").into_bytes();
        ops.push((slot_key(mix(n * 4 + j) % KEYS), Some(v)));
    }
    ops.push((slot_key(mix(n * 4 + 3) % KEYS), None));
    ops
}

fn apply_model(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, n: u64) {
    for (k, v) in batch_ops(n) {
        match v {
            Some(v) => model.insert(k, v),
            None => model.remove(&k),
        };
    }
}

/// The child: writes batches from `start` until killed.
#[test]
fn kill_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let sync = match std::env::var(SYNC_ENV).unwrap().as_str() {
        "always" => SyncMode::Always,
        _ => SyncMode::Never,
    };
    let start: u64 = std::env::var("BLOOMLSM_KILL_START")
        .unwrap()
        .parse()
        .unwrap();
    let max_open_files = std::env::var(OPEN_FILES_ENV)
        .ok()
        .and_then(|n| n.parse().ok());
    let dir = Path::new(&dir);
    let db = Db::open(dir.join("db"), options(sync, max_open_files)).unwrap();
    assert_eq!(db.options().sync, sync);
    assert!(db.options().background_work);
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("acked"))
        .unwrap();
    for n in start.. {
        let mut b = WriteBatch::new();
        for (k, v) in batch_ops(n) {
            match v {
                Some(v) => b.put(&k, &v),
                None => b.delete(&k),
            };
        }
        db.write(b).unwrap();
        // One batch per line, so a kill can only leave an unterminated tail.
        acks.write_all(format!("{n}\n").as_bytes()).unwrap();
    }
}

/// Batches recovered, `r`: the marker says the last one. Panics unless
/// the store holds exactly the model of batches `0..r`.
fn recovered_batches(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, r: u64) {
    let got = contents(db);
    if &got == model {
        return;
    }
    // A partial batch `r - 1`, or anything of batch `r` or later: say which.
    let first_diff = got
        .iter()
        .find(|(k, v)| model.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{} = {:?} (model: {:?})",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v),
                model
                    .get(k)
                    .map(|m| String::from_utf8_lossy(m).into_owned())
            )
        })
        .or_else(|| {
            model
                .iter()
                .find(|(k, _)| !got.contains_key(*k))
                .map(|(k, v)| {
                    format!(
                        "{} missing (model: {:?})",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    )
                })
        });
    panic!(
        "the marker says {r} batches recovered, but the store is not batches 0..{r}: {first_diff:?}"
    );
}

fn run_phase(sync: SyncMode) {
    let cycles: u64 = std::env::var("BLOOMLSM_CRASH_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(25);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut model = BTreeMap::new();
    let mut recovered = 0u64;
    let mut checked_acks = 0u64;
    for cycle in 0..cycles {
        // Every other cycle keeps one table file open, in the killed child
        // and in the recovery: a kill may come while the set has closed
        // files, and the recovery reopens them through the bound.
        let bound = (cycle % 2 == 1).then_some(1usize);
        let start = recovered;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill_child_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ENV, dir.path())
            .env(SYNC_ENV, sync_name(sync))
            .env(
                OPEN_FILES_ENV,
                bound.map_or("none".to_string(), |n| n.to_string()),
            )
            .env("BLOOMLSM_KILL_START", start.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Some kills land during open and recovery, most during writes.
        let delay = if cycle % 5 == 0 {
            rng.random_range(0..5)
        } else {
            rng.random_range(5..120)
        };
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = std::fs::read_to_string(dir.path().join("acked")).unwrap_or_default();
        std::fs::remove_file(dir.path().join("acked")).ok();
        // Only newline-terminated lines are acknowledgements.
        let complete = acked.rsplit_once('\n').map_or("", |(done, _)| done);
        let max_acked = complete.lines().filter_map(|l| l.parse::<u64>().ok()).max();
        let db = Db::open(dir.path().join("db"), options(sync, bound))
            .unwrap_or_else(|e| panic!("{sync:?} cycle {cycle}, open files {bound:?}: {e}"));
        recovered = match db.get(MARKER).unwrap() {
            Some(v) => String::from_utf8(v).unwrap().parse::<u64>().unwrap() + 1,
            None => 0,
        };
        assert!(
            recovered >= start,
            "{sync:?} cycle {cycle}: {start} batches were recovered before, now {recovered}"
        );
        for n in start..recovered {
            apply_model(&mut model, n);
        }
        recovered_batches(&db, &model, recovered);
        if let Some(max) = max_acked {
            assert!(
                recovered > max,
                "{sync:?} cycle {cycle}: batch {max} was acknowledged, only {recovered} recovered"
            );
            checked_acks += max + 1 - start;
        }
        drop(db);
    }
    let tables = bloomlsm_tests::table_files(&dir.path().join("db"));
    println!(
        "SyncMode::{sync:?}: {cycles} kill cycles; {checked_acks} acknowledged batches checked, \
         {recovered} batches recovered in all; 0 lost, 0 partial, 0 holes; {tables} tables at the end"
    );
}

#[test]
fn kill_loop_sync_always() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    run_phase(SyncMode::Always);
}

#[test]
fn kill_loop_sync_never() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    run_phase(SyncMode::Never);
}
