//! Shapes the filter-budget tests share: deep stores of narrow tables,
//! trees of hand-placed tables under static level budgets, and merges
//! planned, written and installed by hand (as `merge` runs them).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_sstable::EntryKind;

use crate::filter_budget::{Plan, PlannedWrite, table_filter_bytes, table_keys};
use crate::install::VersionEdit;
use crate::table_files::OutputCuts;
use crate::version::TableHandle;
use crate::{Db, FilterKind, FilterPolicy, Options};

/// A deep store of narrow tables (a few dozen keys each): 2 KiB
/// memtables, 1 KiB tables, a 2 KiB L1 and a size ratio of 3 over 7
/// levels, under `Optimized` at `bits_per_key`.
pub(crate) fn narrow_options(
    kind: FilterKind,
    bits_per_key: f64,
    background_work: bool,
) -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key },
        filter_kind: kind,
        memtable_bytes: 2 << 10,
        target_file_bytes: 1 << 10,
        l1_bytes: 2 << 10,
        level_size_ratio: 3,
        num_levels: 7,
        block_cache_bytes: 0,
        background_work,
        ..Options::default()
    }
}

/// Static level budgets, no background work, under `Optimized` at
/// `bits_per_key`: L1 is over budget with any table, L2 and L3 never; L0
/// below its trigger with a table or two. Tables are placed by hand.
pub(crate) fn static_budget_options(kind: FilterKind, bits_per_key: f64) -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key },
        filter_kind: kind,
        background_work: false,
        num_levels: 4,
        l1_bytes: 64,
        level_size_ratio: 1 << 20,
        dynamic_level_bytes: false,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

/// SplitMix64's finalizer: spreads consecutive numbers over the key space.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A 16-digit key spread over the key space.
pub(crate) fn spread_key(i: u64) -> Vec<u8> {
    format!("{:016}", mix(i) % 10_000_000_000_000_000).into_bytes()
}

/// `prefix` and six digits: keys in order, in a range of their own.
pub(crate) fn prefixed_key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}{i:06}").into_bytes()
}

/// Writes `keys` (ascending) as one table at `level` with a filter at
/// `bits` per key, sequences from `first_seq`, and installs it.
pub(crate) fn place(
    db: &Db,
    level: usize,
    keys: &[Vec<u8>],
    first_seq: u64,
    bits: f64,
) -> Arc<TableHandle> {
    place_planned(db, level, keys, first_seq, &Plan::unbounded(bits))
}

/// [`place`], with the filter as `plan` says.
pub(crate) fn place_planned(
    db: &Db,
    level: usize,
    keys: &[Vec<u8>],
    first_seq: u64,
    plan: &Plan,
) -> Arc<TableHandle> {
    place_entries(db, level, keys, first_seq, plan, EntryKind::Put)
}

/// [`place_planned`], every entry of `kind` (a put's value is "v").
pub(crate) fn place_entries(
    db: &Db,
    level: usize,
    keys: &[Vec<u8>],
    first_seq: u64,
    plan: &Plan,
    kind: EntryKind,
) -> Arc<TableHandle> {
    let inner = &db.inner;
    let tables = inner
        .tables
        .write(
            level,
            OutputCuts::one_table(),
            plan,
            &inner.counters,
            &mut |out| {
                let value: &[u8] = if kind == EntryKind::Put { b"v" } else { b"" };
                for (i, k) in keys.iter().enumerate() {
                    out.add(k, first_seq + i as u64, kind, value)?;
                }
                Ok(())
            },
        )
        .unwrap();
    make_visible(inner, &tables);
    inner
        .install(VersionEdit {
            added: &tables,
            ..Default::default()
        })
        .unwrap();
    Arc::clone(&tables[0])
}

/// Filter bytes of the live tables, and uniform's bytes at `bits` per key
/// for them, each in the kind of its own filter.
pub(crate) fn filters_and_uniform(inner: &crate::inner::DbInner, bits: f64) -> (u64, u64) {
    let kind = inner.options.filter_kind;
    let sv = inner.current.load_full();
    sv.version
        .levels
        .iter()
        .flatten()
        .fold((0, 0), |(f, u), t| {
            let own = t.table.filter().map_or(kind, |x| x.kind());
            (
                f + table_filter_bytes(t),
                u + bloomlsm_filter::planning::planned_memory_bytes(own, table_keys(t), bits),
            )
        })
}

/// Puts `n` keys `prefix` and six digits (value "v") into the memtable
/// and freezes it, as writes would (no WAL): a flush to come.
pub(crate) fn freeze_keys(db: &Db, prefix: &str, n: u64) {
    let mut w = db.inner.write.lock();
    let mem = Arc::clone(&db.inner.current.load().mem);
    for i in 0..n {
        mem.insert(&prefixed_key(prefix, i), w.next_seq, EntryKind::Put, b"v");
        w.next_seq += 1;
    }
    db.inner
        .last_visible
        .store(w.next_seq - 1, Ordering::Release);
    db.inner.rotate_memtable(&mut w).unwrap();
}

/// Makes sequences up to `seq` visible, and new writes start after it.
pub(crate) fn advance_sequence(db: &Db, seq: u64) {
    db.inner.last_visible.store(seq, Ordering::Release);
    db.inner.write.lock().next_seq = seq + 1;
}

/// Makes every entry of `tables` (written by hand, to be installed)
/// visible, as the writes that put them in a memtable would have, unless
/// it is already: the manifest an install writes names no table newer
/// than its last sequence, which the open would refuse.
pub(crate) fn make_visible(inner: &crate::inner::DbInner, tables: &[Arc<TableHandle>]) {
    let Some(largest) = tables.iter().map(|t| t.meta.largest_seq).max() else {
        return;
    };
    let mut w = inner.write.lock();
    inner.last_visible.fetch_max(largest, Ordering::AcqRel);
    w.next_seq = w.next_seq.max(largest + 1);
}

/// Merges `inputs` into `level` as `merge` does (under the compaction
/// lock: filters lowered where the install would go past uniform, plan
/// with the claim held, write cut by `cuts`, install, release), the merged entries being
/// `entries` (user key and sequence, in table order, each a put of "v").
/// Returns the outputs and the plan.
pub(crate) fn merge_by_hand(
    db: &Db,
    level: usize,
    cuts: OutputCuts,
    inputs: &[Arc<TableHandle>],
    entries: &[(Vec<u8>, u64)],
) -> (Vec<Arc<TableHandle>>, Plan) {
    let _compaction = db.inner.compaction_lock.lock();
    let write = PlannedWrite {
        level,
        keys: inputs.iter().map(|t| table_keys(t)).sum(),
        removed: inputs,
    };
    let (plan, claim) = db
        .inner
        .lower_and_plan_filters(write)
        .unwrap()
        .expect("the store is open");
    let outputs = db
        .inner
        .tables
        .write(level, cuts, &plan, &db.inner.counters, &mut |out| {
            for (k, seq) in entries {
                out.add(k, *seq, EntryKind::Put, b"v")?;
            }
            Ok(())
        })
        .unwrap();
    let written = db
        .inner
        .claim_written(write, &plan, &outputs)
        .unwrap()
        .expect("the store is open");
    make_visible(&db.inner, &outputs);
    db.inner
        .install(VersionEdit {
            added: &outputs,
            removed: inputs,
            ..VersionEdit::default()
        })
        .unwrap();
    drop(written);
    drop(claim);
    (outputs, plan)
}

/// (filter bytes of the live tables, uniform's bytes for them at `bits`
/// in the kind of each one's filter).
pub(crate) fn filter_and_uniform_bytes(db: &Db, bits: f64) -> (u64, u64) {
    let kind = db.inner.options.filter_kind;
    let sv = db.inner.current.load_full();
    sv.version
        .levels
        .iter()
        .flatten()
        .fold((0, 0), |(f, u), t| {
            let own = crate::filter_budget::table_filter_kind(kind, t);
            (
                f + table_filter_bytes(t),
                u + bloomlsm_filter::planning::planned_memory_bytes(own, table_keys(t), bits),
            )
        })
}

/// The live tables, level by level.
pub(crate) fn live_tables(db: &Db) -> Vec<Arc<TableHandle>> {
    let sv = db.inner.current.load_full();
    sv.version.levels.iter().flatten().cloned().collect()
}

/// The file numbers of the live tables, level by level.
pub(crate) fn live_numbers(db: &Db) -> Vec<u64> {
    live_tables(db).iter().map(|t| t.meta.number).collect()
}
