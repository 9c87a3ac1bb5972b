//! `inspect` of a table in a store that is shorter than the manifest
//! records (its tail lost) says so as the store does: exit status 2, one
//! line naming the file, its length and the recorded size. Before, it
//! printed `I/O error on ...: reading the footer block at offset N: failed
//! to fill whole buffer`, where `get` on the same store says `table is N
//! bytes; the manifest recorded M`. The file is left as it was.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_table_shorter_than_its_record_is_named_with_both_sizes() {
    let (dir, table) = bloomlsm_tests::store_with_one_table((0..500).map(|i| format!("k{i:04}")));
    let sound = std::fs::read(&table).unwrap();
    let recorded = sound.len();
    let t = table.to_str().unwrap();
    let name = table.file_name().unwrap().to_str().unwrap();
    for len in [recorded - 1, recorded - 10, recorded / 2, 0] {
        std::fs::write(&table, &sound[..len]).unwrap();
        let want = format!("table is {len} bytes; the manifest recorded {recorded}");
        for args in [
            vec!["inspect", t, "--probes", "10"],
            vec!["inspect", t, "--verify"],
        ] {
            let out = cli(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{len}: {out:?}");
            assert!(out.stdout.is_empty(), "{len}: {out:?}");
            assert!(err.starts_with("error: corrupt "), "{len}: {err}");
            assert!(err.contains(name) && err.contains(&want), "{len}: {err}");
            assert_eq!(err.lines().count(), 1, "{len}: {err}");
        }
        // The store's own reads say the same.
        let out = cli(&["get", dir.path().to_str().unwrap(), "k0001"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{len}: {out:?}");
        assert!(err.contains(&want), "{len}: {err}");
        assert_eq!(std::fs::read(&table).unwrap(), &sound[..len]);
    }
    // Whole again, it inspects.
    std::fs::write(&table, &sound).unwrap();
    assert!(cli(&["inspect", t, "--verify"]).status.success());
}
