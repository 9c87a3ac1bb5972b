//! Filter budgets per level, filter rebuilds, and damaged filter handling.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{CorruptFilterPolicy, Db, FilterPolicy, Options};
use common::{scattered_absent as absent, scattered_key as key};

fn multi_level(policy: FilterPolicy) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        filter_policy: policy,
        memtable_bytes: 32 << 10,
        l1_bytes: 128 << 10,
        level_size_ratio: 4,
        target_file_bytes: 64 << 10,
        block_cache_bytes: 0,
        // Inline flushes and compactions: both stores get the same shape.
        background_work: false,
        // Static level budgets: L1 to L3 fill in turn, the deep shape the
        // per-level budgets are about (dynamic budgets keep this store in
        // fewer, fuller levels).
        dynamic_level_bytes: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..60_000 {
        db.put(&key(i), b"value-value-value").unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    (dir, db)
}

fn reads_per_absent_get(db: &Db, n: u64) -> f64 {
    let before = db.stats().total.data_blocks_read;
    for i in 0..n {
        assert_eq!(db.get(&absent(i)).unwrap(), None);
    }
    (db.stats().total.data_blocks_read - before) as f64 / n as f64
}

#[test]
fn optimized_budget_reads_less_than_uniform_at_equal_memory() {
    let (_d1, uniform) = multi_level(FilterPolicy::Uniform { bits_per_key: 4.0 });
    let (_d2, optimized) = multi_level(FilterPolicy::Optimized { bits_per_key: 4.0 });
    let levels = |db: &Db| db.stats().levels.iter().filter(|l| l.tables > 0).count();
    assert!(
        levels(&uniform) >= 3,
        "want a multi-level store, got {} levels",
        levels(&uniform)
    );
    let (mu, mo) = (
        uniform.stats().total.filter_bytes as f64,
        optimized.stats().total.filter_bytes as f64,
    );
    let (ru, ro) = (
        reads_per_absent_get(&uniform, 20_000),
        reads_per_absent_get(&optimized, 20_000),
    );
    for (name, db) in [("uniform", &uniform), ("optimized", &optimized)] {
        let s = db.stats();
        let per_level: Vec<String> = s
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tables > 0)
            .map(|(i, l)| {
                format!(
                    "L{i} {} keys {:.2} bits/key, observed FPR {:.4} (theory {:.4}) over {} probes",
                    l.entries, l.bits_per_key, l.observed_fpr, l.theoretical_fpr, l.table_probes
                )
            })
            .collect();
        println!("{name}: {}", per_level.join(", "));
    }
    println!(
        "filter bytes: uniform {mu} optimized {mo}; reads per absent get: uniform {ru:.4} optimized {ro:.4}"
    );
    assert!(mo <= mu * 1.10, "optimized must not spend more memory");
    assert!(ro < ru, "optimized must read less per absent get");
}

#[test]
fn rebuild_filters_changes_bits_per_key_and_keeps_every_key() {
    let (_dir, db) = multi_level(FilterPolicy::Uniform { bits_per_key: 4.0 });
    let before = db.stats().total.bits_per_key;
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 14.0 })
        .unwrap();
    let after = db.stats().total.bits_per_key;
    println!("bits per key in memory: {before:.2} -> {after:.2}");
    assert!(after > before * 2.5);
    for i in (0..60_000).step_by(7) {
        assert!(db.get(&key(i)).unwrap().is_some(), "key {i} lost");
    }
    db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 0.0 })
        .unwrap();
    assert_eq!(db.stats().total.filter_bytes, 0);
    assert!(db.get(&key(42)).unwrap().is_some());
}

fn damage_filters(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            let t = bloomlsm_sstable::Table::open_path(&path, 0, None).unwrap();
            let at = (t.footer().filter.offset + 50) as usize;
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[at] ^= 0xff;
            std::fs::write(&path, bytes).unwrap();
        }
    }
}

#[test]
fn corrupt_filter_policies() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..2000 {
            db.put(&key(i), b"v").unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    damage_filters(dir.path());
    let fail = Options {
        on_corrupt_filter: CorruptFilterPolicy::Fail,
        ..Options::default()
    };
    let err = Db::open(dir.path(), fail).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    match &err {
        bloomlsm::Error::Corruption {
            path,
            offset,
            reason: bloomlsm::Damage::Filter(reason),
        } => {
            assert!(path.extension().is_some_and(|x| x == "sst"), "{err}");
            assert_eq!(*offset, reason.offset(), "{err}");
            // The flip is inside the block: its checksum catches it.
            assert!(
                matches!(reason, bloomlsm_sstable::FilterLoadError::Block { .. }),
                "{err}"
            );
        }
        other => panic!("expected a filter refusal, got {other}"),
    }

    let ignore = Db::open(dir.path(), Options::default()).unwrap();
    assert!(ignore.stats().total.tables_without_usable_filter > 0);
    assert!((0..2000).all(|i| ignore.get(&key(i)).unwrap().is_some()));
    ignore.close().unwrap();

    let rebuild = Options {
        on_corrupt_filter: CorruptFilterPolicy::Rebuild,
        ..Options::default()
    };
    let db = Db::open(dir.path(), rebuild).unwrap();
    db.wait_for_background_work().unwrap();
    // A bound on a hang, not a speed: the suite's other tests share the
    // cores, so it is generous.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while db.stats().total.tables_without_usable_filter > 0 && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        db.stats().total.tables_without_usable_filter,
        0,
        "filters were rebuilt"
    );
    assert!((0..2000).all(|i| db.get(&key(i)).unwrap().is_some()));
}

/// `FilterPolicy::bits_per_key` answers what the engine builds: no level
/// past `MAX_FILTER_BITS_PER_KEY`, even where Monkey prices a one-key
/// level far above a large one at an average near the cap.
#[test]
fn optimized_bits_per_key_never_passes_the_cap() {
    let policy = FilterPolicy::Optimized { bits_per_key: 99.0 };
    let shape = [1, 10, 100, 1_000, 10_000, 100_000];
    let actual = [1, 0, 0, 0, 0, 100_000];
    let bits: Vec<f64> = (0..shape.len())
        .map(|level| policy.bits_per_key(level, &shape, &actual))
        .collect();
    assert!(
        bits.iter().all(|&b| b <= bloomlsm::MAX_FILTER_BITS_PER_KEY),
        "{bits:?}"
    );
    assert!(
        bits[5] >= 90.0,
        "the large level keeps about the average: {bits:?}"
    );
}
