//! `--wal-recovery point-in-time`: a store whose WAL (written with each
//! record fsynced) is damaged before its tail is refused by every command
//! under the default, with advice that names the flag's mode; with the
//! flag, the study commands read the writes before the damage and drop
//! nothing on disk, and `put` makes the recovery permanent.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::process::Output;

use bloomlsm::{Db, Options, SyncMode};
use common::bloomlsm;

/// Where a version 3 WAL's records begin (after its 24-byte header).
const WAL_RECORDS_START: usize = 24;
const WRITES: usize = 20;
/// The record whose checksum is damaged (each put is one record).
const DAMAGED: usize = 10;

fn wal_of(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap()
}

/// A store of `WRITES` puts written with each record fsynced and closed,
/// every one still in its one WAL.
fn store_of_synced_writes() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        sync: SyncMode::Always,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..WRITES {
        db.put(format!("key{i:02}").as_bytes(), b"value").unwrap();
    }
    db.close().unwrap();
    dir
}

/// A store of `WRITES` puts, every one still in its one WAL, whose record
/// `DAMAGED` has a flipped byte in its payload.
fn store_with_damage_before_the_tail() -> tempfile::TempDir {
    let dir = store_of_synced_writes();
    let wal = wal_of(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let mut at = WAL_RECORDS_START;
    for _ in 0..DAMAGED {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
    }
    bytes[at + 8] ^= 0x01; // the payload's first byte: its checksum fails
    std::fs::write(&wal, bytes).unwrap();
    dir
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8(out.stdout.clone()).unwrap(),
        String::from_utf8(out.stderr.clone()).unwrap(),
    )
}

#[test]
fn the_default_refuses_and_names_the_mode_that_recovers() {
    let dir = store_with_damage_before_the_tail();
    let db = dir.path().to_str().unwrap();
    let wal_before = std::fs::read(wal_of(dir.path())).unwrap();
    for args in [vec!["get", db, "key00"], vec!["put", db, "k", "v"]] {
        let out = bloomlsm(&args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(".wal"), "{args:?}: {err}");
        assert!(err.contains("WalRecovery::PointInTime"), "{args:?}: {err}");
        assert!(
            err.contains("--wal-recovery point-in-time"),
            "{args:?}: {err}"
        );
    }
    // Refused opens change nothing.
    assert_eq!(std::fs::read(wal_of(dir.path())).unwrap(), wal_before);
}

#[test]
fn point_in_time_reads_the_writes_before_the_damage_and_drops_nothing_on_disk() {
    let dir = store_with_damage_before_the_tail();
    let db = dir.path().to_str().unwrap();
    let flag = ["--wal-recovery", "point-in-time"];
    let wal_before = std::fs::read(wal_of(dir.path())).unwrap();
    for i in 0..WRITES {
        let key = format!("key{i:02}");
        let out = bloomlsm(&[&flag[..], &["get", db, &key]].concat());
        let expected = if i < DAMAGED { Some(0) } else { Some(1) };
        assert_eq!(out.status.code(), expected, "{key}: {:?}", text(&out));
    }
    let out = bloomlsm(&[&flag[..], &["stats", db]].concat());
    let (stats, err) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(stats.contains("wal_replay_cut"), "{stats}");
    assert!(stats.contains("damage, point-in-time recovery"), "{stats}");
    // The study commands open read-only: the WAL is as it was, and the
    // default still refuses the store.
    assert_eq!(std::fs::read(wal_of(dir.path())).unwrap(), wal_before);
    assert_eq!(bloomlsm(&["get", db, "key00"]).status.code(), Some(2));
}

#[test]
fn a_write_under_point_in_time_makes_the_recovery_permanent() {
    let dir = store_with_damage_before_the_tail();
    let db = dir.path().to_str().unwrap();
    let out = bloomlsm(&["--wal-recovery", "point-in-time", "put", db, "new", "v"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    // Now the default opens the store: the writes before the damage, the
    // new one, and none after the damage.
    for (key, found) in [
        ("key00", true),
        ("key09", true),
        ("new", true),
        ("key10", false),
    ] {
        let out = bloomlsm(&["get", db, key]);
        let expected = if found { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(expected), "{key}: {:?}", text(&out));
    }
}

/// A WAL whose header alone is damaged (its checksum no longer matches,
/// as a clean close's rewrite torn inside its sector leaves it): the
/// default refuses the store; under point-in-time every write is read
/// (the records verify under the salt the header kept) and `stats` names
/// the WAL as `wal_headers_salvaged`, with no `wal_replay_cut` row.
#[test]
fn point_in_time_reads_past_a_damaged_header_and_stats_names_the_wal() {
    let dir = store_of_synced_writes();
    let wal = wal_of(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[20] ^= 0x01; // the header's checksum (bytes 20..24)
    std::fs::write(&wal, bytes).unwrap();
    let db = dir.path().to_str().unwrap();
    assert_eq!(bloomlsm(&["get", db, "key00"]).status.code(), Some(2));
    let flag = ["--wal-recovery", "point-in-time"];
    for i in 0..WRITES {
        let key = format!("key{i:02}");
        let out = bloomlsm(&[&flag[..], &["get", db, &key]].concat());
        assert_eq!(out.status.code(), Some(0), "{key}: {:?}", text(&out));
    }
    let out = bloomlsm(&[&flag[..], &["stats", db]].concat());
    let (stats, err) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let row = |name: &str| {
        stats
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .to_string()
    };
    assert!(
        row("wal_headers_salvaged").ends_with(wal.to_str().unwrap()),
        "{stats}"
    );
    assert!(row("wal_replay_cut").ends_with('-'), "{stats}");
}
