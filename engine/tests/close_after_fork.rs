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

/// The body of that process: opens a store (no background threads, so
/// the forked copy of the `Db` can work), forks; the child writes through
/// its copy, closes it and reports both answers; the parent waits for it.
#[test]
fn close_fork_entry() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(Path::new(&dir), options).unwrap();
    db.put(b"before", b"fork").unwrap();
    // SAFETY: this process runs one test on one thread (no background
    // threads): the child may use the heap and the store's files.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let put = match db.put(b"after", b"fork") {
            Ok(()) => "accepted".to_string(),
            Err(Error::WritesStopped(_)) => "stopped".to_string(),
            Err(e) => format!("error {e}"),
        };
        let close = match db.close() {
            Ok(()) => "ok".to_string(),
            Err(Error::WritesStopped(_)) => "stopped".to_string(),
            Err(e) => format!("error {e}"),
        };
        println!("FORK-CHILD: put {put}, close {close}");
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-parameter for waitpid.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    db.close().unwrap();
}

#[test]
fn a_forked_copy_whose_writes_are_refused_does_not_close_ok() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "close_fork_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the entry failed: {stdout}");
    let outcome = stdout
        .lines()
        .find_map(|l| l.split_once("FORK-CHILD: ").map(|(_, o)| o.to_owned()))
        .unwrap_or_else(|| panic!("no report from the child: {stdout}"));
    assert_eq!(outcome, "put stopped, close stopped");
}
