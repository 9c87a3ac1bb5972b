//! Kill loop: a child process writes batches (sync on for even batches, off
//! for odd ones) and records each acknowledged batch; the parent kills it
//! with SIGKILL at a random moment (some during open and recovery), reopens
//! and checks that every acknowledged batch survived whole and that the
//! recovered batches are a prefix of the attempted ones.
//! Cycles: 50, or `BLOOMLSM_CRASH_CYCLES`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bloomlsm::{Db, Options, SyncMode, WriteBatch};
use rand::Rng;

const BATCH: u64 = 4;
const CHILD_ENV: &str = "BLOOMLSM_KILL_CHILD_DIR";

fn options() -> Options {
    Options {
        memtable_bytes: 16 << 10,
        l1_bytes: 64 << 10,
        target_file_bytes: 16 << 10,
        ..Options::default()
    }
}

fn batch_key(batch: u64, j: u64) -> Vec<u8> {
    format!("b{batch:08}-{j}").into_bytes()
}

/// The child: writes batches from `start` until killed.
#[test]
fn kill_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let start: u64 = std::env::var("BLOOMLSM_KILL_START")
        .unwrap()
        .parse()
        .unwrap();
    let dir = Path::new(&dir);
    let db = Db::open(dir.join("db"), options()).unwrap();
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("acked"))
        .unwrap();
    for batch in start.. {
        let mut b = WriteBatch::new();
        for j in 0..BATCH {
            b.put(&batch_key(batch, j), format!("{batch}:{j}").as_bytes());
        }
        if batch % 2 == 0 {
            db.write(b).unwrap();
        } else {
            // Sync off: the write reached the OS before the call returned.
            let options_sync = db.options().sync;
            assert_eq!(options_sync, SyncMode::Never);
            db.write(b).unwrap();
        }
        // One write per line, so a kill can only leave an unterminated tail.
        acks.write_all(format!("{batch}\n").as_bytes()).unwrap();
    }
}

fn recovered_batches(db: &Db) -> u64 {
    let mut n = 0;
    loop {
        let present: Vec<bool> = (0..BATCH)
            .map(|j| db.get(&batch_key(n, j)).unwrap().is_some())
            .collect();
        if present.iter().all(|p| *p) {
            n += 1;
        } else {
            assert!(
                present.iter().all(|p| !p),
                "batch {n} recovered partly: {present:?}"
            );
            break;
        }
    }
    // Nothing after the first missing batch.
    for later in n..n + 20 {
        assert!(
            db.get(&batch_key(later, 0)).unwrap().is_none(),
            "hole before batch {later}"
        );
    }
    n
}

#[test]
fn kill_loop() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let cycles: u64 = std::env::var("BLOOMLSM_CRASH_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut start = 0u64;
    let mut total_acked = 0u64;
    for cycle in 0..cycles {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "kill_child_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_ENV, dir.path())
            .env("BLOOMLSM_KILL_START", start.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Some kills land during open and recovery, most during writes.
        let delay = if cycle % 5 == 0 {
            rng.random_range(0..5)
        } else {
            rng.random_range(5..80)
        };
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = std::fs::read_to_string(dir.path().join("acked")).unwrap_or_default();
        std::fs::remove_file(dir.path().join("acked")).ok();
        // Only newline-terminated lines are acknowledgements.
        let complete = acked.rsplit_once('\n').map_or("", |(done, _)| done);
        let max_acked = complete.lines().filter_map(|l| l.parse::<u64>().ok()).max();
        let db = Db::open(dir.path().join("db"), options()).unwrap();
        let recovered = recovered_batches(&db);
        if let Some(max) = max_acked {
            assert!(
                recovered > max,
                "cycle {cycle}: batch {max} was acknowledged, only {recovered} recovered"
            );
            total_acked = total_acked.max(max + 1);
        }
        drop(db);
        start = recovered;
    }
    println!(
        "{cycles} kill cycles; {total_acked} acknowledged batches of {BATCH} all recovered; 0 lost, 0 partial"
    );
}
