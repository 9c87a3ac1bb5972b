//! A new user's cross-check: each level row of `bloomlsm stats` (tables,
//! entries, tombstones, filter bytes, bits per key, theoretical FPR) is
//! what `bloomlsm inspect` says of that level's table files, summed (bits
//! per key over distinct keys, the formula weighted by each filter's
//! keys), on a deep store with tombstones; after its filters are rebuilt
//! to other bits per level, some to none; and with the Ribbon kind.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::process::Command;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};

fn json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    // The output prints floats as they are (JSON); sums in another order
    // differ in the last bits.
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

/// Every level row of `stats` against `inspect` of its tables; returns
/// the filter kinds seen (`none` for a table without a usable filter).
fn check(dir: &Path, what: &str) -> std::collections::BTreeSet<String> {
    let mut kinds = std::collections::BTreeSet::new();
    let stats = json(&["stats", dir.to_str().unwrap()]);
    let rows = stats["levels"].as_array().unwrap();
    let records = bloomlsm::table_records(dir).unwrap();
    let deepest = records.iter().map(|t| t.level).max().unwrap();
    let mut seen = 0;
    for level in 0..=deepest {
        let tables: Vec<_> = records.iter().filter(|t| t.level == level).collect();
        let row = rows.iter().find(|r| r["level"] == level);
        let Some(row) = row else {
            assert!(tables.is_empty(), "{what}: L{level} has no row");
            continue;
        };
        seen += 1;
        let (mut entries, mut tombstones, mut filter_bytes, mut distinct) = (0, 0, 0, 0);
        let (mut weighted, mut items) = (0.0, 0u64);
        for t in &tables {
            let path = dir.join(format!("{:06}.sst", t.number));
            let v = json(&["inspect", path.to_str().unwrap(), "--probes", "1"]);
            let p = &v["properties"];
            entries += p["entries"].as_u64().unwrap();
            tombstones += p["tombstones"].as_u64().unwrap();
            distinct += p["distinct_keys"].as_u64().unwrap();
            let f = &v["filter"];
            kinds.insert(f["kind"].as_str().unwrap_or("none").to_string());
            if f["status"] == "usable" {
                let n = f["items"].as_u64().unwrap();
                assert_eq!(n, p["distinct_keys"].as_u64().unwrap(), "{what}: {v}");
                filter_bytes += f["memory_bytes"].as_u64().unwrap();
                weighted += f["fpr_formula"].as_f64().unwrap() * n as f64;
                items += n;
            }
        }
        let at = format!("{what}, L{level}: {row}");
        let u = |name: &str| row[name].as_u64().unwrap();
        assert_eq!(u("tables"), tables.len() as u64, "{at}");
        assert_eq!(u("entries"), entries, "{at}");
        assert_eq!(u("tombstones"), tombstones, "{at}");
        assert_eq!(u("filter_bytes"), filter_bytes, "{at}");
        let bits = filter_bytes as f64 * 8.0 / distinct as f64;
        assert!(
            close(row["bits_per_key"].as_f64().unwrap(), bits),
            "{at}: {bits}"
        );
        // A level with no usable filter has no rate: `-`, JSON null.
        match (items > 0).then(|| weighted / items as f64) {
            Some(fpr) => assert!(
                close(row["theoretical_fpr"].as_f64().unwrap(), fpr),
                "{at}: {fpr}"
            ),
            None => assert!(row["theoretical_fpr"].is_null(), "{at}"),
        }
    }
    assert_eq!(seen, rows.len(), "{what}: a row per non-empty level");
    kinds
}

fn rebuild(dir: &Path, kind: FilterKind, policy: FilterPolicy) {
    let options = Options {
        filter_kind: kind,
        background_work: false,
        dynamic_level_bytes: false,
        level_size_ratio: 2,
        l1_bytes: 8 << 10,
        target_file_bytes: 2 << 10,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    db.rebuild_filters(policy).unwrap();
    db.close().unwrap();
}

#[test]
fn stats_rows_are_the_sums_of_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let levels = common::deep_store(dir.path(), 1500);
    assert!(levels.iter().filter(|&&t| t > 0).count() >= 3, "{levels:?}");
    assert_eq!(
        check(dir.path(), "deep store"),
        ["blocked".to_string()].into()
    );
    rebuild(
        dir.path(),
        FilterKind::Blocked,
        FilterPolicy::PerLevel(vec![12.0, 0.0, 3.0, 0.0, 7.5]),
    );
    let kinds = check(dir.path(), "rebuilt per level");
    assert!(
        kinds.contains("none") && kinds.contains("blocked"),
        "{kinds:?}"
    );
    rebuild(
        dir.path(),
        FilterKind::Ribbon,
        FilterPolicy::Uniform { bits_per_key: 6.0 },
    );
    let kinds = check(dir.path(), "rebuilt to Ribbon");
    assert_eq!(kinds, ["ribbon".to_string()].into());
}
