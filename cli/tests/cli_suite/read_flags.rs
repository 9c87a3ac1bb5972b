//! `--direct-reads` and `--max-open-files` change how table files are read,
//! never what is read: on a deep store of narrow tables, `stats
//! --absent-gets`, `scan`, `get` and `trace` print the same figures and
//! answers under every combination as without the flags. With one table
//! file open at a time every data block read past the first table reopens
//! a file; with direct reads every block-cache miss goes past the page
//! cache.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::process::{Command, Output};

use common::key;

/// A scratch directory on a disk where there is one (`/var/tmp`), so that
/// direct reads reach a device; else the default temporary directory.
fn scratch() -> tempfile::TempDir {
    let disk = std::path::Path::new("/var/tmp");
    if disk.is_dir() {
        tempfile::tempdir_in(disk).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// Four or more levels of 2 KiB tables and overlapping L0 tables, a
/// tombstone over a deeper value for one key in eleven; closed.
fn deep_store() -> tempfile::TempDir {
    let dir = scratch();
    let levels = common::deep_store(dir.path(), 1500);
    assert!(
        levels[0] >= 1 && levels.iter().filter(|&&t| t > 0).count() >= 4,
        "{levels:?}"
    );
    assert!(levels.iter().sum::<u64>() >= 10, "{levels:?}");
    dir
}

fn cli(flags: &[&str], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .arg("--json")
        .args(flags)
        .args(args)
        .output()
        .unwrap()
}

/// The printed answer of a command that exits 0 (or 1, a key not found).
fn answer(flags: &[&str], args: &[&str]) -> serde_json::Value {
    let out = cli(flags, args);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{flags:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_read_flags_change_no_figure_and_no_answer() {
    let dir = deep_store();
    let d = dir.path().to_str().unwrap();
    let probe_keys: Vec<String> = (0..1500).step_by(37).map(key).collect();
    let run = |flags: &[&str]| {
        let mut answers = vec![
            answer(flags, &["stats", d, "--absent-gets", "3000"]),
            answer(flags, &["scan", d]),
        ];
        for k in &probe_keys {
            answers.push(answer(flags, &["get", d, k]));
            answers.push(answer(flags, &["trace", d, k]));
        }
        answers
    };
    let plain = run(&[]);
    let stats = &plain[0];
    assert!(
        stats["data_blocks_read_per_get"].as_f64().unwrap() > 0.0,
        "{stats}"
    );
    assert!(stats["reads_saved"].as_u64().unwrap() > 0, "{stats}");
    for flags in [
        &["--max-open-files", "1"][..],
        &["--direct-reads"][..],
        &["--direct-reads", "--max-open-files", "2"][..],
    ] {
        let flagged = run(flags);
        for (i, (a, b)) in plain.iter().zip(&flagged).enumerate() {
            assert_eq!(a, b, "{flags:?}: answer {i} differs");
        }
    }
}

#[test]
fn no_table_file_bound_of_zero() {
    let dir = deep_store();
    let d = dir.path().to_str().unwrap();
    let out = cli(&["--max-open-files", "0"], &["get", d, "k00001"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-open-files"), "{err}");
}
