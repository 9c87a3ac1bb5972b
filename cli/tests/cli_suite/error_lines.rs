//! An error is printed once: the engine's and the table crate's errors
//! already spell out their cause in their own message, so printing the
//! cause chain after it repeated the OS error or the corruption reason.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

fn stderr_of(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    String::from_utf8(out.stderr).unwrap()
}

/// A store of one table, its path, and that table's path.
fn store_with_one_table() -> (tempfile::TempDir, std::path::PathBuf) {
    bloomlsm_tests::store_with_one_table((0..2000).map(|i| format!("key{i:05}")))
}

#[test]
fn a_corrupt_data_block_is_named_once() {
    let (dir, table) = store_with_one_table();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0xff; // inside the first data block
    std::fs::write(&table, bytes).unwrap();
    let err = stderr_of(&["get", dir.path().to_str().unwrap(), "key00001"]);
    assert!(err.contains("data block at offset 0"), "{err}");
    assert!(
        err.contains(table.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
    assert_eq!(err.matches("checksum mismatch").count(), 1, "{err}");
}

#[test]
fn an_os_error_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where a table file was expected: the OS refuses the read.
    let err = stderr_of(&["inspect", dir.path().to_str().unwrap()]);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
}
