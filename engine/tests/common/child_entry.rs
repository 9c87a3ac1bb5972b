//! Tests that fork run their forking part in a child process of their own,
//! this test binary again with one entry test alone.

use std::path::Path;
use std::process::Command;

/// Runs this binary's test `entry` alone in a process of its own (one test
/// thread, so no other test's thread is alive at its forks), with `env`
/// set to `dir`; the text after `marker: ` on its output. Panics (the
/// failure report) when the process fails or prints no such line.
pub fn entry_outcome(entry: &str, env: &str, dir: &Path, marker: &str) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", entry, "--nocapture", "--test-threads", "1"])
        .env(env, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{entry} failed: {stdout}");
    let prefix = format!("{marker}: ");
    stdout
        .lines()
        .find_map(|l| l.split_once(prefix.as_str()).map(|(_, o)| o.to_owned()))
        .unwrap_or_else(|| panic!("no outcome from {entry}: {stdout}"))
}
