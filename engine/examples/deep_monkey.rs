//! Monkey on a deep tree, bloomlsm alone: loads the same keys
//! into a store with uniform filters and one with the optimized policy at
//! the same average bits per key, for the blocked and the Ribbon kind, and
//! rebuilds the uniform store's filters with the optimized policy (the same
//! tree under both policies);
//! samples filter memory during the load (the optimized store against
//! uniform's bytes per key), then measures block reads per absent get and
//! prints them beside Monkey's predicted reduction for the tree's actual
//! runs (each L0 table, each level below).
//!
//! `cargo run --release -p bloomlsm --example deep_monkey -- [keys] [bits] [table KiB]`
//! (default 2,000,000 keys, 10 bits per key, 512 KiB tables).

use bloomlsm::{Db, FilterKind, FilterPolicy, Options, Stats};

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

const MODULUS: u64 = 10_000_000_000_000_000;

fn key(i: u64) -> Vec<u8> {
    format!("{:016}", mix(i) % MODULUS / 2 * 2).into_bytes()
}

fn absent(i: u64) -> Vec<u8> {
    format!("{:016}", mix(i ^ 0x5555_5555) % MODULUS / 2 * 2 + 1).into_bytes()
}

/// The deep configuration: 32 KiB memtables, L1 of 128 KiB, size ratio
/// 10, 32-byte values, no block cache (every false positive is a read),
/// tables cut at `target_file_bytes` (small enough that L2 holds several).
fn options(kind: FilterKind, policy: FilterPolicy, target_file_bytes: u64) -> Options {
    Options {
        filter_policy: policy,
        filter_kind: kind,
        memtable_bytes: 32 << 10,
        l1_bytes: 128 << 10,
        level_size_ratio: 10,
        target_file_bytes,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

/// Keys per run an absent get probes: each L0 table (taken as equal
/// shares of L0), then each level below.
fn runs(s: &Stats) -> Vec<u64> {
    let mut runs = Vec::new();
    for (level, l) in s.levels.iter().enumerate() {
        if l.tables == 0 {
            continue;
        }
        if level == 0 {
            runs.extend((0..l.tables).map(|_| l.entries / l.tables));
        } else {
            runs.push(l.entries);
        }
    }
    runs
}

/// The summed expected false positive rates of the runs, from each
/// level's filters as built (`LevelStats::theoretical_fpr`, per table in
/// L0): the prediction for the filters the store really has.
fn expected_sum(s: &Stats) -> f64 {
    s.levels
        .iter()
        .enumerate()
        .map(|(level, l)| {
            if level == 0 {
                l.theoretical_fpr * l.tables as f64
            } else if l.tables > 0 {
                l.theoretical_fpr
            } else {
                0.0
            }
        })
        .sum()
}

struct Loaded {
    db: Db,
    _dir: tempfile::TempDir,
    /// Largest filter bytes per key seen during the load.
    peak_bytes_per_key: f64,
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn load(kind: FilterKind, policy: FilterPolicy, keys: u64, target: u64) -> Res<Loaded> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), options(kind, policy, target))?;
    let value = [7u8; 32];
    let mut peak = 0.0f64;
    for i in 0..keys {
        db.put(&key(i), &value)?;
        if i % 2000 == 1999 {
            let s = db.stats();
            if s.total.entries > 20_000 {
                peak = peak.max(s.total.filter_bytes as f64 / s.total.entries as f64);
            }
        }
    }
    db.flush()?;
    db.wait_for_background_work()?;
    Ok(Loaded {
        db,
        _dir: dir,
        peak_bytes_per_key: peak,
    })
}

fn reads_per_absent_get(db: &Db, n: u64) -> Res<f64> {
    let before = db.stats().total.data_blocks_read;
    for i in 0..n {
        if db.get(&absent(i))?.is_some() {
            return Err("an absent key was found".into());
        }
    }
    Ok((db.stats().total.data_blocks_read - before) as f64 / n as f64)
}

fn describe(name: &str, db: &Db, peak: Option<f64>, reads: f64) {
    let s = db.stats();
    let levels: Vec<String> = s
        .levels
        .iter()
        .enumerate()
        .filter(|(_, x)| x.tables > 0)
        .map(|(i, x)| format!("L{i} {} keys {:.2} b/k", x.entries, x.bits_per_key))
        .collect();
    println!(
        "| {name} | {reads:.5} | {:.4} | {} | {} | {} |",
        s.total.filter_bytes as f64 / s.total.entries as f64,
        peak.map_or("-".into(), |p| format!("{p:.4}")),
        s.filters_rebalanced,
        levels.join(", ")
    );
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args.next().map_or(Ok(2_000_000), |a| a.parse())?;
    let bits: f64 = args.next().map_or(Ok(10.0), |a| a.parse())?;
    let target_kib: u64 = args.next().map_or(Ok(512), |a| a.parse())?;
    let target = target_kib << 10;
    let gets = 500_000;
    println!(
        "| store | reads per absent get | filter bytes/key | peak bytes/key during load | filters rebalanced | levels |"
    );
    println!("|---|---|---|---|---|---|");
    let optimized = FilterPolicy::Optimized { bits_per_key: bits };
    let mut summary = Vec::new();
    for kind in [FilterKind::Blocked, FilterKind::Ribbon] {
        // The same tree under both policies: load with uniform filters,
        // measure, rebuild the filters with the optimized policy, measure.
        let same = load(
            kind,
            FilterPolicy::Uniform { bits_per_key: bits },
            keys,
            target,
        )?;
        let ru = reads_per_absent_get(&same.db, gets)?;
        describe(
            &format!("{kind} uniform"),
            &same.db,
            Some(same.peak_bytes_per_key),
            ru,
        );
        let tree = runs(&same.db.stats());
        let expected_uniform = expected_sum(&same.db.stats());
        same.db.rebuild_filters(optimized.clone())?;
        same.db.wait_for_background_work()?;
        let expected_optimized = expected_sum(&same.db.stats());
        let rr = reads_per_absent_get(&same.db, gets)?;
        describe(&format!("{kind} same tree, optimized"), &same.db, None, rr);
        // A store loaded with the optimized policy from the start.
        let own = load(kind, optimized.clone(), keys, target)?;
        let ro = reads_per_absent_get(&own.db, gets)?;
        describe(
            &format!("{kind} optimized from the start"),
            &own.db,
            Some(own.peak_bytes_per_key),
            ro,
        );
        let own_tree = runs(&own.db.stats());
        summary.push(format!(
            "{kind}: runs {tree:?}: predicted reduction {:.1}%, from the filters as built {:.1}% \
             (expected FPR sums {expected_uniform:.5} -> {expected_optimized:.5}), measured on the same tree {:.1}% (measured / predicted {:.3}); \
             optimized from the start (runs {own_tree:?}, predicted {:.1}%): {:.1}% below uniform",
            bloomlsm_filter::math::monkey_predicted_reduction(&tree) * 100.0,
            (1.0 - expected_optimized / expected_uniform) * 100.0,
            (1.0 - rr / ru) * 100.0,
            (1.0 - rr / ru) / bloomlsm_filter::math::monkey_predicted_reduction(&tree),
            bloomlsm_filter::math::monkey_predicted_reduction(&own_tree) * 100.0,
            (1.0 - ro / ru) * 100.0,
        ));
    }
    println!();
    for line in summary {
        println!("{line}");
    }
    Ok(())
}
