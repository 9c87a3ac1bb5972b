//! `scan --limit N` prints at most N pairs, and says on stderr (stdout
//! stays the pairs alone) when the range holds more, so a user does not
//! take the first N pairs for the whole range.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

fn scan(dir: &str, args: &[&str]) -> (usize, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["--json", "scan", dir])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    let pairs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        pairs.as_array().unwrap().len(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_cut_range_says_so_and_a_whole_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for i in 0..10 {
        db.put(format!("k{i}").as_bytes(), b"v").unwrap();
    }
    db.delete(b"k9").unwrap();
    db.close().unwrap();
    let d = dir.path().to_str().unwrap();
    let (n, err) = scan(d, &["--limit", "5"]);
    assert_eq!(n, 5);
    assert!(err.contains("--limit 5 reached"), "{err}");
    // Nine live keys: a limit of exactly nine prints them all, and the
    // deleted tenth is no "more".
    let (n, err) = scan(d, &["--limit", "9"]);
    assert_eq!(n, 9);
    assert!(err.is_empty(), "{err}");
    let (n, err) = scan(d, &["--from", "k3", "--to", "k5", "--limit", "2"]);
    assert_eq!(n, 2);
    assert!(err.is_empty(), "{err}");
}
