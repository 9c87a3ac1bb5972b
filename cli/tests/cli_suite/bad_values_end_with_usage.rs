//! The README and `--help` say a bad-arguments error line ends with the
//! command's usage. It did for a missing or unknown argument, but a value
//! its parser refused (`scan DB --limit 0`, `size --fpr x`) printed clap's
//! message alone: clap renders no usage for those.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use common::bloomlsm;

#[test]
fn a_refused_value_ends_with_the_command_s_usage() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["scan", "db", "--limit", "0"],
            "bloomlsm scan [OPTIONS] <DB>",
        ),
        (
            &["scan", "db", "--limit", "x"],
            "bloomlsm scan [OPTIONS] <DB>",
        ),
        (
            &["size", "--items", "10", "--fpr", "x"],
            "bloomlsm size [OPTIONS] --items <ITEMS>",
        ),
        (
            &["--num-levels", "1", "get", "db", "k"],
            "bloomlsm get [OPTIONS] <DB> <KEY>",
        ),
        (
            &["get", "db", "k", "--max-open-files", "0"],
            "bloomlsm get [OPTIONS] <DB> <KEY>",
        ),
        (
            &["--wal-recovery", "bogus", "stats", "db"],
            "bloomlsm stats [OPTIONS] <DB>",
        ),
    ];
    for (args, usage) in cases {
        let out = bloomlsm(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: invalid value"), "{args:?}: {err}");
        assert!(
            err.trim_end().ends_with(&format!("; usage: {usage}")),
            "{args:?}: {err}"
        );
    }
}

/// A refused value before any command: the program's usage.
#[test]
fn before_the_command_the_usage_is_the_program_s() {
    let out = bloomlsm(&["--num-levels", "1"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.trim_end()
            .ends_with("; usage: bloomlsm [OPTIONS] <COMMAND>"),
        "{err}"
    );
}
