//! A reader that stops early (`bloomlsm scan DB | head`) is not an error:
//! the command stops writing, prints nothing on stderr and exits with the
//! status of its answer (0, or 1 for `get` of a key not found). Before,
//! `scan` printed `error: Broken pipe (os error 32)` and exited 2.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Stdio};

/// Runs the command with its stdout a pipe whose reading end is closed
/// at once: every write past what the pipe holds fails with EPIPE (the
/// Rust runtime ignores SIGPIPE). Returns the exit code and stderr.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    // About 1.5 MB of text, far more than a pipe holds (64 KiB).
    for i in 0..20_000 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 60])
            .unwrap();
    }
    db.close().unwrap();
    let d = dir.path().to_str().unwrap();
    for json in [false, true] {
        let mut args = vec!["scan", d, "--limit", "100000"];
        if json {
            args.insert(0, "--json");
        }
        assert_eq!(
            with_stdout_closed(&args),
            (Some(0), String::new()),
            "{args:?}"
        );
    }
    // The answer's status stays, printed or not.
    assert_eq!(
        with_stdout_closed(&["get", d, "absent"]),
        (Some(1), String::new())
    );
    assert_eq!(
        with_stdout_closed(&["get", d, "key000001"]),
        (Some(0), String::new())
    );
}
