//! `bloomlsm stats --absent-gets N` asks absent keys of every table's key
//! range, so each level's row has probes to report: the absent keys were
//! seeded from the store's N smallest keys only, and a level whose tables
//! hold larger keys (here L0, written last with the largest keys) printed
//! zero probes, zero reads saved and no observed FPR.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

/// L6 holds `key00000..key04000`; one L0 table holds `key90000..key90500`.
fn store_with_high_keys_in_l0() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let options = bloomlsm::Options {
        background_work: false, // the compaction runs inline: a fixed tree
        ..bloomlsm::Options::default()
    };
    let db = bloomlsm::Db::open(dir.path(), options).unwrap();
    // Four L0 tables reach the trigger and are compacted into L6.
    for part in 0..4 {
        for i in part * 1000..(part + 1) * 1000 {
            db.put(format!("key{i:05}").as_bytes(), b"value").unwrap();
        }
        db.flush().unwrap();
    }
    for i in 90_000..90_500 {
        db.put(format!("key{i:05}").as_bytes(), b"value").unwrap();
    }
    db.flush().unwrap();
    let levels = db.stats().levels;
    assert_eq!((levels[0].tables, levels[6].tables > 0), (1, true));
    db.close().unwrap();
    dir
}

/// `bloomlsm --json stats DIR --absent-gets 1000`, parsed.
fn stats_after_absent_gets(dir: &std::path::Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["--json", "stats", dir.to_str().unwrap()])
        .args(["--absent-gets", "1000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_level_meets_absent_keys() {
    let dir = store_with_high_keys_in_l0();
    let v = stats_after_absent_gets(dir.path());
    assert_eq!(v["gets"], 1000);
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{v}");
    for level in levels {
        let probes = level["table_probes"].as_u64().unwrap();
        // Seeds in proportion to entries: L0 holds 500 of 4,500 keys.
        assert!(
            probes >= 50,
            "level {}: {probes} probes\n{v}",
            level["level"]
        );
    }
}

/// A store whose every key is deleted still has tables (of tombstones) to
/// ask: `absent_gets_run` said 1000 while no get ran (`gets 0`), as the
/// absent keys were seeded from live keys only.
#[test]
fn a_store_of_tombstones_still_meets_absent_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for i in 0..100 {
        db.put(format!("key{i:03}").as_bytes(), b"value").unwrap();
    }
    db.flush().unwrap();
    for i in 0..100 {
        db.delete(format!("key{i:03}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let v = stats_after_absent_gets(dir.path());
    assert_eq!(v["absent_gets_run"], v["gets"], "{v}");
    assert_eq!(v["gets"], 1000, "{v}");
    assert!(v["table_probes"].as_u64().unwrap() > 0, "{v}");
}

/// A table of one key has no absent key in its range (its smallest key is
/// its largest): the fences rule every absent key out before its filter is
/// asked, so a level of such tables shows no probe however many absent
/// gets run (as `bloomlsm put DIR a 1`, then `put DIR b 2`, leaves). The
/// help and README said every level meets them.
#[test]
fn one_key_tables_never_meet_absent_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for k in ["a", "b", "c"] {
        db.put(k.as_bytes(), b"value").unwrap();
        db.flush().unwrap();
    }
    db.close().unwrap();
    let v = stats_after_absent_gets(dir.path());
    assert_eq!(v["gets"], 1000, "{v}");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels[0]["tables"], 3, "{v}");
    assert_eq!(v["table_probes"], 0, "{v}");
    assert_eq!(v["observed_fpr"], serde_json::Value::Null, "{v}");
}
