//! `stats --absent-gets` figures add up where a table's filter block is
//! damaged: an absent key's probe of a table is a read saved, a false
//! positive, or a probe of a table without a usable filter, and the last
//! is printed (`probes_without_filter`, in the totals and each level's
//! row) as the library counts it (`LevelStats::probes_without_filter`).
//! Before, it was not printed: 1,000 absent gets showed 1,000 table
//! probes beside 882 reads saved and 6 false positives, the other 112
//! unexplained beside `tables_without_usable_filter 1`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

fn json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn every_absent_probe_is_saved_a_false_positive_or_without_filter() {
    let dir = tempfile::tempdir().unwrap();
    let levels = deep_store(dir.path());
    assert!(levels.iter().filter(|&&t| t > 0).count() >= 2, "{levels:?}");
    let d = dir.path().to_str().unwrap();

    // Damage the filter block of one table of the deepest level.
    let records = bloomlsm::table_records(dir.path()).unwrap();
    let deepest = records.iter().max_by_key(|t| t.level).unwrap();
    let table = dir.path().join(format!("{:06}.sst", deepest.number));
    let t = table.to_str().unwrap();
    let filter = &json(&["inspect", t, "--probes", "1"])["footer"]["filter"];
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[u(&filter["offset"]) as usize + 3] ^= 0x08;
    std::fs::write(&table, bytes).unwrap();

    let v = json(&["stats", d, "--absent-gets", "2000"]);
    assert_eq!(u(&v["tables_without_usable_filter"]), 1, "{v}");
    let adds_up = |row: &serde_json::Value| {
        u(&row["table_probes"])
            == u(&row["reads_saved"])
                + u(&row["false_positives"])
                + u(&row["probes_without_filter"])
    };
    assert!(adds_up(&v), "{v}");
    let rows = v["levels"].as_array().unwrap();
    for row in rows {
        assert!(adds_up(row), "{row}");
    }
    let without: u64 = rows.iter().map(|r| u(&r["probes_without_filter"])).sum();
    assert_eq!(without, u(&v["probes_without_filter"]), "{v}");
    // Only the damaged table's level probes without a filter, and it does.
    for row in rows {
        let here = u(&row["probes_without_filter"]);
        if u(&row["level"]) == deepest.level as u64 {
            assert!(here > 0, "{row}");
        } else {
            assert_eq!(here, 0, "{row}");
        }
    }
}

/// A store of narrow tables over several levels, closed.
fn deep_store(dir: &std::path::Path) -> Vec<u64> {
    let options = bloomlsm::Options {
        block_size: 256,
        memtable_bytes: 16 << 10,
        target_file_bytes: 4 << 10,
        l1_bytes: 8 << 10,
        level_size_ratio: 2,
        dynamic_level_bytes: false,
        background_work: false,
        ..bloomlsm::Options::default()
    };
    let db = bloomlsm::Db::open(dir, options).unwrap();
    for round in 0..5u64 {
        for i in (0..2000u64).filter(|i| i % (round + 1) == 0) {
            db.put(
                format!("k{i:05}").as_bytes(),
                format!("v{round}").as_bytes(),
            )
            .unwrap();
        }
        db.flush().unwrap();
    }
    let levels = db.stats().levels.iter().map(|l| l.tables).collect();
    db.close().unwrap();
    levels
}
