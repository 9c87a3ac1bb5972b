//! Tests that fork run their forking part in a child process of their own
//! (this test binary again, one entry test alone), so the fork never
//! copies the test harness's other threads.

use std::path::Path;
use std::process::Command;

/// Runs this binary's `entry` test alone in a child process with `env_var`
/// set to `dir`, asserts it passed, and returns what follows `marker` on
/// the first line of its output that holds it.
pub fn entry_outcome(entry: &str, env_var: &str, dir: &Path, marker: &str) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", entry, "--nocapture", "--test-threads", "1"])
        .env(env_var, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once(marker).map(|(_, outcome)| outcome.to_string()))
        .unwrap_or_else(|| panic!("no {marker:?} in: {stdout}"))
}
