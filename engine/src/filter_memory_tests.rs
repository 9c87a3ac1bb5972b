//! The equal-memory invariant of `filter_budget.rs` on hand-built trees:
//! after every install the live filters take at most what uniform filters
//! at `BITS` would take for the same tables (plus one block of rounding).
//! Tables are placed at chosen levels with chosen filter bits, a tree
//! within that budget to start from; then one compaction, or a compaction
//! with flushes planned and installed while its claim is in flight (the
//! flush thread runs beside the compaction thread), must leave it within.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_filter::planning::planned_memory_bytes;
use bloomlsm_sstable::EntryKind;

use crate::budget_test_shapes::{
    advance_sequence, merge_by_hand, place, prefixed_key as key, static_budget_options,
};
use crate::filter_budget::{PlannedWrite, table_filter_bytes, table_keys};
use crate::install::VersionEdit;
use crate::table_files::OutputCuts;
use crate::version::TableHandle;
use crate::{Db, FilterKind, Options};

const BITS: f64 = 10.0;
const KIND: FilterKind = FilterKind::Blocked;
/// One 512-bit block of the blocked kind.
const ROUNDING_BYTES: u64 = 64;

fn options() -> Options {
    static_budget_options(KIND, BITS)
}

/// Installs a compaction's outputs in place of its inputs.
fn install_compaction(
    inner: &crate::inner::DbInner,
    outputs: &[Arc<TableHandle>],
    inputs: &[Arc<TableHandle>],
) {
    crate::budget_test_shapes::make_visible(inner, outputs);
    inner
        .install(VersionEdit {
            added: outputs,
            removed: inputs,
            ..VersionEdit::default()
        })
        .unwrap();
}

/// (filter bytes of the live tables, uniform's bytes for them in the
/// store's kind).
fn memory(db: &Db) -> (u64, u64) {
    let sv = db.inner.current.load_full();
    let tables = sv.version.levels.iter().flatten();
    tables.fold((0, 0), |(f, u), t| {
        (
            f + table_filter_bytes(t),
            u + planned_memory_bytes(db.inner.options.filter_kind, table_keys(t), BITS),
        )
    })
}

fn assert_within(db: &Db, what: &str) {
    let (filters, uniform) = memory(db);
    assert!(
        filters <= uniform + ROUNDING_BYTES,
        "{what}: filters take {filters} bytes, uniform's {uniform} (+{} bytes, x{:.3})",
        filters as i64 - uniform as i64,
        filters as f64 / uniform as f64
    );
}

/// L1 [k000000, k003998] (even keys) and L2 under it (odd keys), both at
/// 5 bits per key (below their share: written while the budget was taken,
/// or left within the rebalancer's `under` tolerance).
fn low_filtered_l1_over_l2(db: &Db, first_seq: u64) -> (Arc<TableHandle>, Arc<TableHandle>) {
    let odd: Vec<_> = (0..2000).map(|i| key("k", 2 * i + 1)).collect();
    let even: Vec<_> = (0..2000).map(|i| key("k", 2 * i)).collect();
    let b = place(db, 2, &odd, first_seq, 5.0);
    let a = place(db, 1, &even, first_seq + 2000, 5.0);
    (a, b)
}

/// One compaction, nothing else in flight. The tree is within budget, but
/// the table that stays (an L0 table over its uniform share, as the
/// optimum gives L0) leaves the merge of the two low-filtered tables less
/// than its own uniform share: the floor of `plan_write` (never under
/// min(optimum, uniform)) spends it anyway, and the tree goes over.
#[test]
fn a_compaction_alone_keeps_the_tree_within_uniform_memory() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    low_filtered_l1_over_l2(&db, 1);
    let stays: Vec<_> = (0..2000).map(|i| key("s", i)).collect();
    place(&db, 0, &stays, 10_000, 13.0);
    advance_sequence(&db, 20_000);
    assert_within(&db, "before");

    db.inner.compact_while_needed().unwrap();
    let s = db.stats();
    assert_eq!((s.compactions, s.levels[1].tables), (1, 0));
    assert_within(&db, "after the L1 -> L2 merge");
}

/// A compaction planned, then flushes planned and installed while its
/// plan is in flight (what the flush thread does beside the compaction
/// thread), then the compaction installed. The compaction's outputs stay
/// within their own uniform share, so a claim over that share is nothing,
/// yet they take more than its inputs' filters did: they spend the inputs'
/// unused share. Each flush still counts that share as free (the inputs
/// are live in the view it plans against) and claims it too.
#[test]
fn flushes_during_a_compaction_keep_the_tree_within_uniform_memory() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    let (a, b) = low_filtered_l1_over_l2(&db, 1);
    let deep: Vec<_> = (0..8000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 5_000, BITS);
    advance_sequence(&db, 20_000);
    assert_within(&db, "before");

    // The compaction of L1 into L2, as `merge` runs it: plan (the claim is
    // held), write, install, release.
    let inputs = vec![Arc::clone(&a), Arc::clone(&b)];
    let (plan, claim) = db.inner.plan_filters(PlannedWrite {
        level: 2,
        keys: inputs.iter().map(|t| table_keys(t)).sum(),
        removed: &inputs,
    });

    // Meanwhile, four flushes of 500 keys each (into the memtable
    // directly: an inline `put` would run the compaction itself).
    for f in 0..4 {
        let mut w = db.inner.write.lock();
        let mem = Arc::clone(&db.inner.current.load().mem);
        for i in 0..500 {
            mem.insert(&key(&format!("f{f}-"), i), w.next_seq, EntryKind::Put, b"v");
            w.next_seq += 1;
        }
        db.inner
            .last_visible
            .store(w.next_seq - 1, Ordering::Release);
        db.inner.rotate_memtable(&mut w).unwrap();
        drop(w);
        db.inner.flush_all_immutable().unwrap();
    }
    assert_eq!(db.stats().levels[0].tables, 4);
    assert_within(&db, "after the flushes");

    let mut merged: Vec<(Vec<u8>, u64)> = (0..4000)
        .map(|i| {
            // Odd keys from L2 (seq 1..), even keys from L1 (seq 2001..).
            let seq = if i % 2 == 1 { 1 + i / 2 } else { 2001 + i / 2 };
            (key("k", i), seq)
        })
        .collect();
    merged.sort();
    let outputs = db
        .inner
        .tables
        .write(
            2,
            OutputCuts::one_table(),
            &plan,
            &db.inner.counters,
            &mut |out| {
                for (k, seq) in &merged {
                    out.add(k, *seq, EntryKind::Put, b"v")?;
                }
                Ok(())
            },
        )
        .unwrap();
    install_compaction(db.inner.as_ref(), &outputs, &inputs);
    drop(claim);
    assert_eq!(db.get(&key("k", 7)).unwrap(), Some(b"v".to_vec()));
    assert_within(&db, "after the compaction installs");
}

/// A compaction of narrow Ribbon tables planned above `BITS`: a 600-key
/// L1 table over a large L3 filtered below its share (which leaves
/// headroom) goes into L2, cut into tables of about 20 keys. The plan
/// prices one filter over the 600 keys; each 20-key Ribbon table is at
/// least two 128-slot blocks, sized for a large filter's rate, so at the
/// planned bits each would take 40% more than its uniform share, which
/// no claim covers. The tables together must stay within the plan.
#[test]
fn a_compaction_cut_into_narrow_ribbon_tables_stays_within_its_plan() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(
        dir.path(),
        Options {
            filter_kind: FilterKind::Ribbon,
            ..options()
        },
    )
    .unwrap();
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 1, 7.0);
    let l1: Vec<_> = (0..600).map(|i| key("k", i)).collect();
    let input = place(&db, 1, &l1, 30_000, BITS);
    advance_sequence(&db, 40_000);
    assert_within(&db, "before");

    let inputs = vec![input];
    let entries: Vec<_> = (30_000..)
        .zip(l1.iter().cloned())
        .map(|(seq, k)| (k, seq))
        .collect();
    let (outputs, plan) =
        merge_by_hand(&db, 2, OutputCuts::new(256, Vec::new()), &inputs, &entries);
    assert!(
        plan.bits_per_key > BITS + 2.0,
        "the optimum gives the small level more: {plan:?}"
    );
    assert!(outputs.len() >= 20, "{} tables", outputs.len());
    let filters: u64 = outputs.iter().map(|t| table_filter_bytes(t)).sum();
    let allowance = plan.allowance.unwrap();
    let allowed: f64 = outputs
        .iter()
        .map(|t| allowance.bytes_for(table_keys(t)))
        .sum();
    assert!(
        filters as f64 <= allowed,
        "{} tables take {filters} filter bytes, the plan allows {allowed:.0}",
        outputs.len()
    );
    assert!(
        outputs.iter().all(|t| t.table.filter().is_some()),
        "every table keeps a filter"
    );
    for k in &l1 {
        assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()));
    }
    assert_within(&db, "after the compaction installs");
}
