//! RocksDB's per-level figures: tables, entries and filter bytes from its
//! table properties per level, filter probes and block reads from its
//! per-level perf context (`PerfContextByLevel`: `bloom_filter_useful`,
//! `bloom_filter_full_positive`, `bloom_filter_full_true_positive`,
//! `block_cache_miss_count`, counted by the table reader of each level).
//!
//! The C API can set the perf level but cannot switch on the per-level
//! context, so `PerfContext::EnablePerLevelPerfContext` is called through
//! its C++ symbol; the counters are then read from the perf context's text
//! report, which lists them as `name = v@levelN, ...`. Perf contexts are
//! per thread: counting covers the gets of the thread that switched it on.
//! A table reader keeps the level it was opened at (a table moved down
//! by a trivial move counts at its old level).

use std::ffi::c_void;

use anyhow::Result;
use rocksdb::perf::{PerfContext, PerfStatsLevel, set_perf_stats};

use crate::probes::LevelProbes;

// The C++ functions `rocksdb::get_perf_context()` and
// `rocksdb::PerfContext::EnablePerLevelPerfContext()` of the linked
// RocksDB (Itanium ABI: a non-virtual member function takes `this` as its
// first argument, as a C function taking a pointer would).
unsafe extern "C" {
    #[link_name = "_ZN7rocksdb16get_perf_contextEv"]
    fn rocksdb_get_perf_context() -> *mut c_void;
    #[link_name = "_ZN7rocksdb11PerfContext25EnablePerLevelPerfContextEv"]
    fn rocksdb_enable_per_level_perf_context(context: *mut c_void);
}

/// Switches counting of this thread's point reads on (per level) or off.
pub fn count_on_this_thread(on: bool) {
    if on {
        set_perf_stats(PerfStatsLevel::EnableCount);
        // SAFETY: `get_perf_context` returns this thread's perf context,
        // which lives as long as the thread; enabling its per-level map
        // allocates the map once and sets a flag, nothing else.
        unsafe { rocksdb_enable_per_level_perf_context(rocksdb_get_perf_context()) };
    } else {
        set_perf_stats(PerfStatsLevel::Disable);
    }
}

/// This thread's per-level counters so far, as `(level, counters)` with
/// only the probe and read fields set.
fn counted_levels() -> Vec<LevelProbes> {
    parse_levels(&PerfContext::default().report(true))
}

/// The per-level counters of a perf context's text report.
fn parse_levels(report: &str) -> Vec<LevelProbes> {
    let mut levels: Vec<LevelProbes> = Vec::new();
    let mut name = "";
    // A counter with no level to list prints as "name = " alone, so one
    // part can hold several names: "a = b = 5@level0" is b's.
    for part in report.split(", ") {
        let segments: Vec<&str> = part.split(" = ").collect();
        let value = match segments.as_slice() {
            [.., n, v] => {
                name = n.trim();
                *v
            }
            _ => part,
        };
        let Some((v, level)) = value.trim().split_once("@level") else {
            continue;
        };
        let (Ok(v), Ok(level)) = (v.parse::<u64>(), level.parse::<usize>()) else {
            continue;
        };
        let row = match levels.iter().position(|l| l.level == level) {
            Some(i) => &mut levels[i],
            None => {
                levels.push(LevelProbes {
                    level,
                    ..LevelProbes::default()
                });
                levels.last_mut().expect("just pushed")
            }
        };
        match name {
            // Negatives and positives are every probe of a full filter.
            "bloom_filter_useful" => row.probes += v,
            "bloom_filter_full_positive" => {
                row.probes += v;
                row.false_positives += v;
            }
            "bloom_filter_full_true_positive" => {
                row.false_positives = row.false_positives.saturating_sub(v);
            }
            "block_cache_miss_count" => row.block_reads += v,
            _ => {}
        }
    }
    levels
}

/// Every level of `db` with its tables, entries and filter bytes, and this
/// thread's counters.
pub fn level_probes(db: &rocksdb::DB, num_levels: usize) -> Result<Vec<LevelProbes>> {
    let counted = counted_levels();
    let mut out = Vec::new();
    for level in 0..num_levels {
        let props = db
            .property_value(&format!(
                "rocksdb.aggregated-table-properties-at-level{level}"
            ))?
            .unwrap_or_default();
        let files = db
            .property_int_value(&format!("rocksdb.num-files-at-level{level}"))?
            .unwrap_or(0);
        let c = counted
            .iter()
            .find(|c| c.level == level)
            .copied()
            .unwrap_or_default();
        out.push(LevelProbes {
            level,
            tables: files,
            keys: parse_property(&props, "# entries").unwrap_or(0),
            filter_bytes: parse_property(&props, "filter block size").unwrap_or(0),
            ..c
        });
    }
    Ok(out)
}

/// Reads `name=value` from RocksDB's table-properties text.
pub fn parse_property(text: &str, name: &str) -> Option<u64> {
    text.split(';').find_map(|part| {
        let (k, v) = part.split_once('=')?;
        // Some names carry a parenthesized detail: "index block size (user-key? 1, ...)".
        let k = k.trim();
        let named = k == name
            || k.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(" ("));
        named.then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_counters_do_not_take_the_next_counters_values() {
        let report = "block_read_count = 94, bloom_filter_useful = 59457@level0, 19975@level6, \
                      bloom_filter_full_positive = 69@level0, 25@level6, \
                      bloom_filter_full_true_positive = user_key_return_count = \
                      block_cache_hit_count = block_cache_miss_count = 69@level0, 25@level6";
        let levels = parse_levels(report);
        let counts = |level| {
            let l = levels
                .iter()
                .find(|l| l.level == level)
                .copied()
                .unwrap_or_default();
            (l.probes, l.false_positives, l.block_reads)
        };
        assert_eq!(counts(6), (20000, 25, 25));
        assert_eq!(counts(0), (59526, 69, 69));
    }
}
