//! The write's filter allowance (`FilterAllowance`, kept by the table
//! writer) on the shapes that stress it: a write planned below uniform's
//! bits (the deepest level under the optimum) cut into narrow tables,
//! whose own uniform shares round up to whole blocks while the allowance
//! takes its keys' part of the plan's (negative) excess. Every table of
//! such a write must keep a filter, and every key must be found.

use std::sync::Arc;

use bloomlsm_filter::planning::planned_memory_bytes;

use crate::budget_test_shapes::{
    advance_sequence, filter_and_uniform_bytes, live_tables, merge_by_hand, place, place_planned,
    prefixed_key as key, static_budget_options,
};
use crate::filter_budget::{Plan, PlannedWrite, table_filter_bytes, table_keys};
use crate::table_files::OutputCuts;
use crate::version::TableHandle;
use crate::{Db, FilterKind, FilterPolicy, Options};

const BITS: f64 = 10.0;

fn options(kind: FilterKind) -> Options {
    static_budget_options(kind, BITS)
}

/// (filter bytes of the live tables, uniform's bytes for them at `BITS`).
fn memory(db: &Db) -> (u64, u64) {
    filter_and_uniform_bytes(db, BITS)
}

/// A live table: (level, keys, bits per key recorded, filter bytes).
type LiveFilter = (usize, u64, f64, u64);

/// Every live table, as a [`LiveFilter`].
fn live_filters(levels: &[Vec<Arc<TableHandle>>]) -> Vec<LiveFilter> {
    levels
        .iter()
        .flatten()
        .map(|t| {
            (
                t.meta.level,
                table_keys(t),
                t.table.properties().bits_per_key,
                table_filter_bytes(t),
            )
        })
        .collect()
}

/// A tree whose deepest level gets fewer bits than uniform from the
/// optimum (an L0 run and a large L3), and a 600-key L1 table compacted
/// into L3 in tables of about 20 keys, as a store with a small
/// `target_file_bytes` cuts them. Returns the outputs and the plan.
fn narrow_compaction_into_the_deepest_level(
    db: &Db,
    input_bits: f64,
) -> (Vec<Arc<TableHandle>>, Vec<Arc<TableHandle>>, Plan) {
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    place(db, 3, &deep, 1, BITS);
    let l0: Vec<_> = (0..2_000).map(|i| key("z", i)).collect();
    place(db, 0, &l0, 25_000, BITS);
    let l1: Vec<_> = (0..600).map(|i| key("k", i)).collect();
    let input = place(db, 1, &l1, 30_000, input_bits);
    advance_sequence(db, 40_000);

    let inputs = vec![input];
    let entries: Vec<_> = (30_000..).zip(l1).map(|(seq, k)| (k, seq)).collect();
    let (outputs, plan) = merge_by_hand(db, 3, OutputCuts::new(256, Vec::new()), &inputs, &entries);
    assert!(
        plan.bits_per_key < BITS && plan.bits_per_key >= 1.0,
        "the optimum gives the deepest level fewer bits than uniform: {plan:?}"
    );
    (outputs, inputs, plan)
}

/// Blocked: a table of about 20 keys takes one 64-byte block at any bits
/// per key, which is exactly its uniform share; its part of a negative
/// excess leaves its allowance under one block, so no filter fits and the
/// table is written without one (every other table, as leftovers add up).
#[test]
fn narrow_blocked_tables_below_uniform_keep_their_filters() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Blocked)).unwrap();
    let (outputs, _, plan) = narrow_compaction_into_the_deepest_level(&db, BITS);
    assert!(outputs.len() >= 20, "{} tables", outputs.len());
    let unfiltered: Vec<u64> = outputs
        .iter()
        .filter(|t| t.table.filter().is_none())
        .map(|t| table_keys(t))
        .collect();
    assert!(
        unfiltered.is_empty(),
        "{} of {} tables (keys {unfiltered:?}) written without a filter at plan {plan:?}",
        unfiltered.len(),
        outputs.len()
    );
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    for i in 0..600 {
        assert_eq!(db.get(&key("k", i)).unwrap(), Some(b"v".to_vec()));
    }
}

/// The same write in every kind, from an input filtered at its share and
/// from one filtered below it (whose unused share the write must give
/// back): every table keeps a filter, and the tree stays within uniform's
/// bytes.
#[test]
fn narrow_tables_below_uniform_keep_their_filters_in_every_kind() {
    let mut failures = Vec::new();
    for (kind, input_bits) in [
        (FilterKind::Standard, BITS),
        (FilterKind::Ribbon, BITS),
        (FilterKind::Blocked, BITS),
        (FilterKind::Standard, 6.0),
        (FilterKind::Ribbon, 6.0),
        (FilterKind::Blocked, 6.0),
    ] {
        let dir = crate::scratch_dirs::scratch_dir();
        let db = Db::open(dir.path(), options(kind)).unwrap();
        let (outputs, _, plan) = narrow_compaction_into_the_deepest_level(&db, input_bits);
        let (filters, uniform) = memory(&db);
        assert!(
            filters <= uniform + 64,
            "{kind:?} from {input_bits} bits: filters take {filters} bytes, uniform's {uniform}"
        );
        let unfiltered: Vec<(u64, f64)> = outputs
            .iter()
            .filter(|t| t.table.filter().is_none())
            .map(|t| (table_keys(t), t.table.properties().bits_per_key))
            .collect();
        if !unfiltered.is_empty() {
            failures.push(format!(
                "{kind:?} from {input_bits} bits: {} of {} tables (keys, bits) {unfiltered:?} \
                 without a filter at plan {plan:?}",
                unfiltered.len(),
                outputs.len()
            ));
        }
        for i in 0..600 {
            assert_eq!(db.get(&key("k", i)).unwrap(), Some(b"v".to_vec()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A memtable full of overwrites written to L0, by a flush or by the
/// replay of its WAL at open: counted by its entries, it would be the
/// tree's largest run by far, so the optimum would give it fewer bits than
/// uniform and the allowance a negative excess per key, but the table holds
/// a few distinct keys whose uniform share is already the smallest filter
/// (512 bits; one block): the allowance would be under it, no filter would
/// fit, and a fresh L0 table, the run every get probes first, would be
/// written without one. Both plan for the distinct keys.
/// (`tables_without_usable_filter` counts damaged filters only: a filter
/// the allowance dropped does not show there.) Returns each kind's live
/// tables (`live_filters`).
fn overwrites_keep_their_filter(written_by_replay: bool) -> Vec<(FilterKind, Vec<LiveFilter>)> {
    let mut failures = Vec::new();
    let mut trees = Vec::new();
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        let dir = crate::scratch_dirs::scratch_dir();
        let opts = Options {
            memtable_bytes: 64 << 20,
            ..options(kind)
        };
        let mut db = Db::open(dir.path(), opts.clone()).unwrap();
        for i in 0..500 {
            db.put(&key("a", i), b"v").unwrap();
        }
        db.flush().unwrap();
        for round in 0..2_000u64 {
            for i in 0..10 {
                db.put(&key("o", i), &round.to_le_bytes()).unwrap();
            }
        }
        if written_by_replay {
            drop(db);
            db = Db::open(dir.path(), opts).unwrap();
        } else {
            db.flush().unwrap();
        }
        assert_eq!(db.stats().total.tables_without_usable_filter, 0);
        let tables = live_filters(&db.inner.current.load().version.levels);
        if tables.len() != 2 || tables.iter().any(|t| t.3 == 0) {
            failures.push(format!(
                "{kind:?}: not two tables with filters: (level, keys, bits, filter bytes) {tables:?}"
            ));
        }
        for i in 0..10 {
            assert_eq!(
                db.get(&key("o", i)).unwrap(),
                Some(1_999u64.to_le_bytes().to_vec())
            );
        }
        let (filters, uniform) = memory(&db);
        assert!(filters <= uniform + 64, "{kind:?}: {filters} > {uniform}");
        trees.push((kind, tables));
    }
    assert!(failures.is_empty(), "{failures:#?}");
    trees
}

#[test]
fn a_flush_of_overwrites_keeps_its_filter() {
    overwrites_keep_their_filter(false);
}

/// The replay plans the table as the flush of the same memtable would:
/// for its 10 distinct keys, which the optimum gives about 18 bits per key
/// as the smallest run, not for its 20,000 entries (about 9.8).
#[test]
fn a_replay_of_overwrites_plans_as_a_flush_does() {
    let flushed = overwrites_keep_their_filter(false);
    let replayed = overwrites_keep_their_filter(true);
    assert_eq!(replayed, flushed);
}

/// A store reopened from Ribbon to Standard compacts two narrow Ribbon
/// tables, one filtered a little below its (Ribbon) share, into one
/// Standard table of 44 keys, whose uniform share is the smallest
/// Standard filter (512 bits). The write's own share less the removed
/// table's unused share is under the smallest filter, and what is free
/// is its own share less `plan_write`'s one-block reserve
/// (`ROUNDING_BITS`): the plan gives 0 bits and the table is written
/// without a filter, though a filter at its own share would leave the
/// tree exactly as far from uniform as the tables that stay. (Not the
/// allowance's doing: the plan asks for no filter. The mixed-kind loads
/// reach it at level 6 once they count tables without a filter.)
#[test]
fn a_narrow_compaction_after_a_kind_change_keeps_its_filter() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    let a: Vec<_> = (0..21).map(|i| key("k", 2 * i)).collect();
    let b: Vec<_> = (0..23).map(|i| key("k", 2 * i + 1)).collect();
    // Sequences up to 100 made durable by a flush (one L0 table of one
    // key), then the narrow tables under them.
    sequences_made_durable(&db, 100);
    place(&db, 2, &b, 1, 8.0);
    place(&db, 1, &a, 30, BITS);
    let before: Vec<(u64, u64)> = db.inner.current.load().version.levels[1..3]
        .iter()
        .flatten()
        .map(|t| (table_keys(t), table_filter_bytes(t)))
        .collect();
    db.close().unwrap();

    let db = Db::open(dir.path(), options(FilterKind::Standard)).unwrap();
    db.inner.compact_while_needed().unwrap();
    let sv = db.inner.current.load_full();
    let tables = live_filters(&sv.version.levels);
    assert_eq!(sv.version.levels[1].len(), 0, "{tables:?}");
    assert!(
        tables.iter().all(|t| t.3 > 0),
        "(level, keys, bits, filter bytes) {tables:?} from (keys, Ribbon bytes) {before:?}"
    );
    for k in a.iter().chain(&b) {
        assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()));
    }
}

/// As above, but the tables that stay are over their uniform share (a
/// deep Standard table at 10.3 bits: 152 bytes over, past the removed
/// Ribbon table's unused share of 64), as the mixed-kind loads leave them
/// at level 6. The output's own share less that unused share is under the
/// smallest filter, and the tree has no headroom: the plan gives 0 bits.
/// Keeping the smallest filter would raise the tree's excess by the
/// removed table's unused share (64 bytes, about 1% of the tree): a
/// narrow write keeps the smallest filter anyway (`FLOOR_MAX_BYTES` in
/// `plan_write`), as a table without one costs a read per get.
#[test]
fn a_narrow_compaction_after_a_kind_change_keeps_its_filter_without_headroom() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    let a: Vec<_> = (0..21).map(|i| key("k", 2 * i)).collect();
    let b: Vec<_> = (0..23).map(|i| key("k", 2 * i + 1)).collect();
    sequences_made_durable(&db, 100);
    place(&db, 2, &b, 1, 8.0);
    place(&db, 1, &a, 30, BITS);
    db.close().unwrap();

    let db = Db::open(dir.path(), options(FilterKind::Standard)).unwrap();
    // 4,000 Standard keys at 10.3 bits: 5,152 bytes where uniform's
    // 5,000 (the tree a little over, as the loads leave it).
    let deep: Vec<_> = (0..4_000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 1, 10.3);
    let (filters, uniform) = memory(&db);
    assert!(filters > uniform, "{filters} <= {uniform}");
    db.inner.compact_while_needed().unwrap();
    let sv = db.inner.current.load_full();
    let tables = live_filters(&sv.version.levels);
    assert_eq!(sv.version.levels[1].len(), 0, "{tables:?}");
    assert!(
        tables.iter().all(|t| t.3 > 0),
        "(level, keys, bits, filter bytes) {tables:?}"
    );
}

/// The 1-bit floor of `plan_write` on a large write: a 4,000-key L2 table
/// without a filter (written under `PerLevel` with 0 bits at L2, or a
/// damaged filter read on under `Ignore`) in a tree without headroom
/// (the deepest level a bit over its share, as a reopen with a lower
/// average leaves it) compacted into L3. Its own share less the removed
/// table's unused share is 0 and nothing is free, so the budget gives it
/// 0 bits; the floor gives it 1 bit per key anyway, 500 bytes at 5 bits
/// per key, 3.3% of the tree, where DESIGN.md bounds the floor to the
/// smallest filters of a few narrow tables and the tests to 1.02 x.
#[test]
fn a_large_write_with_no_budget_stays_within_the_bound() {
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 5.0 },
        ..options(FilterKind::Standard)
    };
    let db = Db::open(dir.path(), options).unwrap();
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 1, 6.0);
    let x: Vec<_> = (0..4_000).map(|i| key("x", i)).collect();
    let input = place(&db, 2, &x, 25_000, 0.0);
    assert!(input.table.filter().is_none());
    advance_sequence(&db, 40_000);
    let uniform_at = |db: &Db| {
        let sv = db.inner.current.load_full();
        sv.version
            .levels
            .iter()
            .flatten()
            .fold((0u64, 0u64), |(f, u), t| {
                (
                    f + table_filter_bytes(t),
                    u + planned_memory_bytes(FilterKind::Standard, table_keys(t), 5.0),
                )
            })
    };
    let (filters, uniform) = uniform_at(&db);
    assert!(filters <= uniform, "{filters} > {uniform} before the write");

    let inputs = vec![input];
    let entries: Vec<_> = (25_000..).zip(x).map(|(seq, k)| (k, seq)).collect();
    let (_, plan) = merge_by_hand(&db, 3, OutputCuts::one_table(), &inputs, &entries);
    let (filters, uniform) = uniform_at(&db);
    assert!(
        filters as f64 <= uniform as f64 * 1.02,
        "filters take {filters} bytes, uniform's {uniform} ({:.4} x) at plan {plan:?}",
        filters as f64 / uniform as f64
    );
}

/// A write whose removed tables' unused share exceeds its own share: 40
/// narrow Ribbon tables at 6 bits per key (a Ribbon table of 20 keys
/// takes 320 bytes at 10 bits), the store reopened as Standard (whose
/// share of the same 800 keys in one table is 1,000 bytes), compacted
/// into L3 in a tree without headroom (the deep table over its share by
/// that unused share). Its claim, the unused share less its own, was
/// never held to what is free: 1.156 x uniform after the install (the
/// output, 800 keys, without a filter). The write's plan alone cannot
/// fix it (it has nothing left to give back); the compaction now first
/// lowers the filters over their target (`DbInner::lower_and_plan_filters`,
/// as `merge_by_hand` does) while its install would go past uniform.
#[test]
fn a_write_whose_removed_tables_left_more_than_its_share_unused_stays_within_the_bound() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = narrow_ribbon_reopened_as_standard(dir.path(), 40_000);
    merge_narrow_into_l3_within_the_bound(&db);
}

/// 40 narrow Ribbon tables at 6 bits per key in L2 (keys "k"), the store
/// reopened as Standard (its sequence past `sequence`), and a deep L3
/// table (keys "d") over its share by what the narrow tables leave
/// unused: the tree at uniform, no headroom.
fn narrow_ribbon_reopened_as_standard(dir: &std::path::Path, sequence: u64) -> Db {
    let db = Db::open(dir, options(FilterKind::Ribbon)).unwrap();
    sequences_made_durable(&db, 1_000);
    for (j, chunk) in narrow_keys().chunks(20).enumerate() {
        place(&db, 2, chunk, 1 + 20 * j as u64, 6.0);
    }
    db.close().unwrap();

    let db = Db::open(dir, options(FilterKind::Standard)).unwrap();
    advance_sequence(&db, sequence);
    let (filters, uniform) = memory(&db);
    let over = (uniform - filters) as f64 * 8.0 / 20_000.0;
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 20_000, BITS + over - 0.01);
    let (filters, uniform) = memory(&db);
    assert!(filters <= uniform, "{filters} > {uniform} before the write");
    db
}

/// Writes `versions` versions of the one key `zz` and flushes them: one
/// L0 table that makes sequences 1 to `versions` durable, so tables placed
/// under it may carry any of them.
fn sequences_made_durable(db: &Db, versions: u64) {
    for _ in 0..versions {
        db.put(b"zz", b"v").unwrap();
    }
    db.flush().unwrap();
}

fn narrow_keys() -> Vec<Vec<u8>> {
    (0..800).map(|i| key("k", i)).collect()
}

/// Merges the 40 narrow L2 tables of [`narrow_ribbon_reopened_as_standard`]
/// into L3 as a compaction does, and checks the tree within 1.02 x uniform.
fn merge_narrow_into_l3_within_the_bound(db: &Db) {
    let inputs: Vec<_> = db.inner.current.load().version.levels[2].clone();
    assert_eq!(inputs.len(), 40);
    let entries: Vec<_> = (1..).zip(narrow_keys()).map(|(seq, k)| (k, seq)).collect();
    let (_, plan) = merge_by_hand(db, 3, OutputCuts::one_table(), &inputs, &entries);
    let (filters, uniform) = memory(db);
    assert!(
        filters as f64 <= uniform as f64 * 1.02,
        "filters take {filters} bytes, uniform's {uniform} ({:.4} x) at plan {plan:?}",
        filters as f64 / uniform as f64
    );
}

/// The shape above, with a flush planned after the compaction's lowerings
/// and before its plan (four, each 2,000 keys) (a flush never takes the compaction lock): the
/// flush sees the compaction's inputs live and counts the share their
/// filters leave unused as free, so the room the lowerings made for the
/// compaction is spent by the flush, and the compaction's install takes
/// the tree past uniform. The compaction must plan with what the lowerings
/// left, or lower again.
#[test]
fn a_flush_planned_between_a_compactions_lowerings_and_its_plan_stays_within_the_bound() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let dir = crate::scratch_dirs::scratch_dir();
    let db = Arc::new(narrow_ribbon_reopened_as_standard(dir.path(), 60_000));

    // The flush, as `flush_all_immutable` plans, writes and installs it.
    let flushed = Arc::new(AtomicBool::new(false));
    let hook = {
        let db = Arc::clone(&db);
        let flushed = Arc::clone(&flushed);
        Arc::new(move || {
            if flushed.swap(true, Ordering::AcqRel) {
                return;
            }
            for f in 0..4 {
                let keys: Vec<_> = (0..2_000).map(|i| key(&format!("f{f}"), i)).collect();
                let (plan, claim) = db.inner.plan_filters(PlannedWrite {
                    level: 0,
                    keys: keys.len() as u64,
                    removed: &[],
                });
                place_planned(&db, 0, &keys, 40_001 + 2_000 * f, &plan);
                drop(claim);
            }
        }) as Arc<dyn Fn() + Send + Sync>
    };
    db.inner.lowered_pause.set(Some(hook));

    merge_narrow_into_l3_within_the_bound(&db);
    db.inner.lowered_pause.set(None);
    assert!(flushed.load(Ordering::Acquire), "the flush never ran");
    let missing = live_tables(&db)
        .iter()
        .filter(|t| t.table.filter().is_none())
        .count();
    assert_eq!(missing, 0, "tables without a filter");
}

/// Compactions whose plans claim nothing, yet whose installs raise the
/// tree's excess over uniform: a store reopened from Ribbon to Standard
/// (as `mixed_kind_tests`' loads) holds narrow Ribbon tables at 8 bits
/// per key (256 bytes, 64 under their Ribbon share of 320), and a tree
/// without headroom. Each 200-key Ribbon table compacted into L3 is
/// planned within its own Standard share (256 bytes) less that unused
/// share, so it claims 0, and its allowance asks its tables to give the
/// 64 bytes back; but the outputs are narrow (about 20 keys), each
/// already at its share, the smallest Standard filter (one 512-bit
/// block), so nothing is given back. Each such install raised the tree's
/// excess by 64 bytes that no claim covered and no lowering made room
/// for (`Plan::past_uniform_bytes` is at most the claim), one after
/// another, as a background compaction thread runs them while L0 slows
/// writes (a rebalancing step lowers filters above their share only past
/// `BACKGROUND_TOLERANCE`, 0.5 bits per key, about 5% of the tree):
/// 1.0201 x uniform after 12 such compactions (of 20).
#[test]
fn narrow_compactions_that_cannot_give_back_an_unused_share_stay_within_the_bound() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    sequences_made_durable(&db, 100);
    let chunks: Vec<Vec<Vec<u8>>> = (0..20)
        .map(|j| (0..200).map(|i| key("k", 200 * j + i)).collect())
        .collect();
    advance_sequence(&db, 10_000);
    for (j, chunk) in chunks.iter().enumerate() {
        place(&db, 2, chunk, 1_000 + 200 * j as u64, 8.0);
    }
    db.close().unwrap();

    let db = Db::open(dir.path(), options(FilterKind::Standard)).unwrap();
    advance_sequence(&db, 10_000);
    let (filters, uniform) = memory(&db);
    let over = (uniform - filters) as f64 * 8.0 / 20_000.0;
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    place(&db, 3, &deep, 20_000, BITS + over - 0.01);
    advance_sequence(&db, 50_000);
    let (filters, uniform) = memory(&db);
    assert!(
        filters <= uniform,
        "{filters} > {uniform} before the writes"
    );

    for (j, chunk) in chunks.iter().enumerate() {
        let seq = 1_000 + 200 * j as u64;
        let input = db.inner.current.load().version.levels[2]
            .iter()
            .find(|t| t.meta.smallest_key.as_slice() == chunk[0].as_slice())
            .cloned()
            .unwrap();
        let entries: Vec<_> = (seq..)
            .zip(chunk.iter().cloned())
            .map(|(s, k)| (k, s))
            .collect();
        let (outputs, plan) =
            merge_by_hand(&db, 3, OutputCuts::new(256, Vec::new()), &[input], &entries);
        assert!(outputs.len() >= 5, "{} outputs", outputs.len());
        let (filters, uniform) = memory(&db);
        assert!(
            filters as f64 <= uniform as f64 * 1.02,
            "after {} compactions: filters take {filters} bytes, uniform's {uniform} \
             ({:.4} x) at plan {plan:?}",
            j + 1,
            filters as f64 / uniform as f64
        );
    }
    for chunk in &chunks {
        for k in chunk {
            assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()));
        }
    }
}

/// The room-making loop of a compaction (`lower_and_plan_filters`) on a
/// tree where it takes many lowerings: the 40 narrow Ribbon tables of
/// [`narrow_ribbon_reopened_as_standard`] compacted into L3, where 30
/// Standard tables of 1,000 keys each sit a little over their target
/// (each lowering frees about 160 bytes of the 3,700 the install would
/// take past uniform). `Db::close` sets the shutdown flag and joins the
/// background threads: a compaction thread in that loop went on
/// rebuilding filter after filter (each reading its whole table) before
/// close could return. Once the store shuts down the loop must stop, and
/// the compaction be given up (it has written nothing; a plan past
/// uniform would take the tree there at the last install).
#[test]
fn the_room_making_loop_stops_when_the_store_shuts_down() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    sequences_made_durable(&db, 1_000);
    for (j, chunk) in narrow_keys().chunks(20).enumerate() {
        place(&db, 2, chunk, 1 + 20 * j as u64, 6.0);
    }
    db.close().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(FilterKind::Standard)).unwrap());
    advance_sequence(&db, 40_000);
    for j in 0..30 {
        let deep: Vec<_> = (0..1_000).map(|i| key(&format!("d{j:02}"), i)).collect();
        place(&db, 3, &deep, 1, 11.0);
    }
    let inputs: Vec<_> = db.inner.current.load().version.levels[2].clone();
    assert_eq!(inputs.len(), 40);

    let lowered = Arc::new(AtomicUsize::new(0));
    let hook = {
        let db = Arc::clone(&db);
        let lowered = Arc::clone(&lowered);
        Arc::new(move || {
            lowered.fetch_add(1, Ordering::AcqRel);
            // What `Db::close` does first.
            db.inner.bg.lock().shutdown = true;
        }) as Arc<dyn Fn() + Send + Sync>
    };
    db.inner.lowered_pause.set(Some(hook));
    let planned = room_for_800_keys_into_l3(&db, &inputs);
    let lowered = lowered.load(Ordering::Acquire);
    assert!(
        planned.is_none() && lowered == 1,
        "{lowered} filters lowered after the store began to shut down, then planned {planned:?}"
    );
    let (filters, uniform) = memory(&db);
    assert!(filters <= uniform, "{filters} > {uniform}");
}

/// The room-making loop of a compaction lowers filters to free bytes; a
/// filter of another kind over its target in the store's kind is lowered
/// in the store's kind when that move's claim fits what is free
/// (`Rebalancing::lowering`). But what is free there is the tree's room
/// without the compaction (its claim is dropped while it lowers), so the
/// loop took narrow Ribbon tables at 8 bits (256 bytes, 64 under their
/// Ribbon share) in a store reopened as Standard into Standard filters at
/// their target (a 200-key Standard filter takes about 240 bytes, its
/// share 256): each such "lowering" shrank the filter by less than it
/// shrank the table's share, and raised the tree's excess over uniform
/// by its claim, spending the room the compaction was lowering filters
/// to make. Here the only filters over their target are three such
/// Ribbon tables, and the compaction (40 narrow Ribbon tables at 6 bits
/// into L3) would take the tree past uniform with a flush in flight.
#[test]
fn the_room_making_loop_only_frees_bytes() {
    use std::sync::Mutex;

    use crate::filter_budget::table_targets;
    use crate::rebuild::RebuildJob;

    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options(FilterKind::Ribbon)).unwrap();
    advance_sequence(&db, 40_000);
    for (j, chunk) in narrow_keys().chunks(20).enumerate() {
        place(&db, 2, chunk, 1 + 20 * j as u64, 6.0);
    }
    for j in 0..3 {
        let m: Vec<_> = (0..200).map(|i| key(&format!("m{j}"), i)).collect();
        place(&db, 3, &m, 1_000 + 200 * j as u64, 8.0);
    }
    db.close().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(FilterKind::Standard)).unwrap());
    advance_sequence(&db, 60_000);
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    let deep = place(&db, 3, &deep, 2_000, 9.0);
    let upper: Vec<_> = (0..8_000).map(|i| key("a", i)).collect();
    let upper = place(&db, 1, &upper, 30_000, 10.0);
    // Both Standard tables just under their targets (which depend on
    // keys only): no filter of the store's kind is over its target.
    let policy = db.inner.options.filter_policy.clone();
    let targets = table_targets(
        &policy,
        FilterKind::Standard,
        &db.inner.current.load().version.levels,
    );
    let target = |t: &Arc<TableHandle>| {
        targets
            .iter()
            .find(|(x, _)| x.meta.number == t.meta.number)
            .map(|(_, b)| *b)
            .unwrap()
    };
    let (t1, deep_bits) = (target(&upper) - 0.02, target(&deep) - 0.02);
    {
        let _compaction = db.inner.compaction_lock.lock();
        db.inner
            .rebuild_tables_locked(&[
                RebuildJob {
                    table: upper,
                    bits_per_key: t1,
                    kind: FilterKind::Standard,
                },
                RebuildJob {
                    table: deep,
                    bits_per_key: deep_bits,
                    kind: FilterKind::Standard,
                },
            ])
            .unwrap();
    }
    let inputs: Vec<_> = db.inner.current.load().version.levels[2].clone();
    assert_eq!(inputs.len(), 40);

    let excess = |db: &Db| {
        let (filters, uniform) = memory(db);
        filters as i64 - uniform as i64
    };
    let seen = Arc::new(Mutex::new(vec![excess(&db)]));
    let hook = {
        let db = Arc::clone(&db);
        let seen = Arc::clone(&seen);
        Arc::new(move || seen.lock().unwrap().push(excess(&db))) as Arc<dyn Fn() + Send + Sync>
    };
    db.inner.lowered_pause.set(Some(hook));
    // A flush in flight, planned at the optimum's bits for a fresh L0
    // run (above uniform's), claims what its install will add.
    let flush_in_flight = db.inner.filter_claims.claim(3_000);
    let plan = room_for_800_keys_into_l3(&db, &inputs);
    drop(flush_in_flight);
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() > 1, "nothing lowered: {plan:?}");
    assert!(
        seen.windows(2).all(|w| w[1] < w[0]),
        "the tree's excess over uniform after each lowering: {seen:?} (plan {plan:?})"
    );
}

/// The room-making loop and plan of a compaction of `inputs` writing 800
/// keys into L3, under the compaction lock (the claim dropped), with the
/// `lowered_pause` hook cleared after it.
fn room_for_800_keys_into_l3(db: &Db, inputs: &[Arc<TableHandle>]) -> Option<Plan> {
    let planned = {
        let _compaction = db.inner.compaction_lock.lock();
        db.inner
            .lower_and_plan_filters(PlannedWrite {
                level: 3,
                keys: 800,
                removed: inputs,
            })
            .unwrap()
            .map(|(plan, _claim)| plan)
    };
    db.inner.lowered_pause.set(None);
    planned
}
