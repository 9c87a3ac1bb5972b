//! A stderr nobody reads (a pipe whose reader is gone, as in
//! `bloomlsm scan DB 2>&1 | head -0`) does not turn a note or an error
//! into a panic: the command exits with its own status (0 with the scan
//! limit's note, 2 for an error). Before, `eprintln!` panicked on the
//! failed write and the command exited 101.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Stdio};

/// Exit code of the command run with its stderr a pipe whose reading
/// end was closed before it started: every write to it fails (EPIPE).
fn with_stderr_closed(args: &[&str]) -> Option<i32> {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(writer)
        .status()
        .unwrap()
        .code()
}

#[test]
fn notes_and_errors_on_a_closed_stderr_keep_their_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let put = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["put", d, "a", "1", "b", "2"])
        .output()
        .unwrap();
    assert!(put.status.success(), "{put:?}");
    // The note that --limit cut the range.
    assert_eq!(with_stderr_closed(&["scan", d, "--limit", "1"]), Some(0));
    // An error line.
    assert_eq!(
        with_stderr_closed(&["get", "/nonexistent/store", "a"]),
        Some(2)
    );
    // Bad arguments (clap's own message).
    assert_eq!(with_stderr_closed(&["get"]), Some(2));
}
