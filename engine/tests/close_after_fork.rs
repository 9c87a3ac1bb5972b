//! `Db::close` in a process forked from the one that opened the store:
//! the copy holds no lock, refuses every write with
//! `Error::WritesStopped`, and its close writes no close marker. Its close
//! must then say so as a close after any other refusal of writes does
//! (`Db::close`: "If an error had stopped writes ... the close returns
//! that `Error::WritesStopped`"), not `Ok` as a healthy store's.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::process::Command;

use bloomlsm::{Db, Error, Options};

/// Set in the process the test starts: the store directory.
const DIR_ENV: &str = "BLOOMLSM_CLOSE_FORK_DIR";
/// Set (to anything) in that process: the store runs background threads.
const BACKGROUND_ENV: &str = "BLOOMLSM_CLOSE_FORK_BACKGROUND";

/// The body of that process: opens a store, forks; the child writes
/// through its copy, closes it and reports both answers; the parent waits
/// for it (at most a minute: a close that joins the parent's background
/// threads, which the child does not have, waits for good) and says
/// whether it ended.
#[test]
fn close_fork_entry() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let options = Options {
        background_work: std::env::var_os(BACKGROUND_ENV).is_some(),
        ..Options::default()
    };
    let db = Db::open(Path::new(&dir), options).unwrap();
    db.put(b"before", b"fork").unwrap();
    // SAFETY: this process runs one test; its background threads, if
    // any, wait idle for work (nothing is due: one put into an empty
    // store), holding no lock: the child may use the heap and the store's
    // files.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let put = match db.put(b"after", b"fork") {
            Ok(()) => "accepted".to_string(),
            Err(Error::WritesStopped(stop)) if stop.is_forked_copy() => "stopped".to_string(),
            Err(e) => format!("error {e}"),
        };
        let close = match db.close() {
            Ok(()) => "ok".to_string(),
            Err(Error::WritesStopped(stop)) if stop.is_forked_copy() => "stopped".to_string(),
            Err(e) => format!("error {e}"),
        };
        println!("FORK-CHILD: put {put}, close {close}");
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-parameter for waitpid.
        if unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) } == pid {
            break;
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: `pid` is our child, not yet waited for.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            println!("FORK-CHILD: did not end");
            break;
        }
        // Bounds a hang: the child's answer does not depend on the wait.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    db.close().unwrap();
}

fn child_outcome(background: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "close_fork_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_ENV, dir.path());
    if background {
        command.env(BACKGROUND_ENV, "1");
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the entry failed: {stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once("FORK-CHILD: ").map(|(_, o)| o.to_owned()))
        .unwrap_or_else(|| panic!("no report from the child: {stdout}"))
}

/// The copy of a store with background threads: the child has none of
/// them (a fork copies only the forking thread), so its close must not
/// join them or wait for a lock one of them could have held.
#[test]
fn a_forked_copy_of_a_store_with_background_threads_closes_without_them() {
    assert_eq!(child_outcome(true), "put stopped, close stopped");
}

#[test]
fn a_forked_copy_whose_writes_are_refused_does_not_close_ok() {
    assert_eq!(child_outcome(false), "put stopped, close stopped");
}
