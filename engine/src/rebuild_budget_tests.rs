//! `rebuild_filters` under `Optimized` keeps the equal-memory invariant of
//! `filter_budget.rs`: the install of the rebuilt tables leaves the live
//! filters within uniform's bytes at the same bits for the same tables.
//! Targets price bits, filters take whole blocks: at each run's target
//! (the small runs above b, the deep one under it) a tree of narrow tables
//! takes more blocks than at b (a 32-key Blocked table at 18 bits is two
//! 512-bit blocks, at 10 one, and the deep level's tables at 8.7 bits free
//! nothing, still one block each): before the rebuild fitted its tables
//! into the budget, a Blocked store exactly at uniform went to 1.031 x.
//! A rebuild that raises filters claims the bytes it adds until its
//! install, as every write does: a flush planned while the rebuild reads
//! its tables sees their old filters and must not spend the same bytes.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bloomlsm_filter::planning::planned_memory_bytes;
use parking_lot::Mutex;

use crate::budget_test_shapes::{
    advance_sequence, filters_and_uniform, freeze_keys, narrow_options, place, prefixed_key,
    spread_key as key, static_budget_options,
};
use crate::filter_budget::{rebuild_targets, table_filter_bytes};
use crate::inner::DbInner;
use crate::scratch_dirs::scratch_dir;
use crate::{Db, FilterKind, FilterPolicy, Stats};

const BITS: f64 = 10.0;

/// Every install's (filter bytes, uniform bytes) from now on.
fn watch(db: &Db) -> Arc<Mutex<Vec<(u64, u64)>>> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&samples);
    let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
    db.inner
        .install_hook
        .set(Some(Arc::new(move |_: &Stats, _: &[Vec<u64>]| {
            if let Some(inner) = inner.upgrade() {
                into.lock().push(filters_and_uniform(&inner, BITS));
            }
        })));
    samples
}

/// A deep tree of narrow tables (7 levels, a few dozen keys a table),
/// loaded inline under `Optimized` at `BITS`, then every filter rebuilt at
/// the same policy: no install of the rebuild takes the tree past
/// uniform's bytes, and every key is still found.
#[test]
fn rebuild_filters_optimized_keeps_narrow_trees_within_uniform_memory() {
    for kind in [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ] {
        let dir = scratch_dir();
        let db = Db::open(dir.path(), narrow_options(kind, BITS, false)).unwrap();
        for i in 0..3000 {
            db.put(&key(i), b"value-value").unwrap();
        }
        let (before, uniform) = filters_and_uniform(&db.inner, BITS);
        assert!(
            before <= uniform,
            "{kind:?}: {before} over {uniform} before"
        );
        let tables: usize = db.stats().levels.iter().map(|l| l.tables as usize).sum();
        assert!(tables > 100, "{kind:?}: only {tables} tables");
        let samples = watch(&db);
        db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: BITS })
            .unwrap();
        let samples = samples.lock().clone();
        assert!(
            !samples.is_empty(),
            "{kind:?}: the rebuild installed nothing"
        );
        for (i, &(filters, uniform)) in samples.iter().enumerate() {
            assert!(
                filters <= uniform,
                "{kind:?}: rebuild install {i}: {filters} filter bytes over uniform's {uniform} \
                 (x{:.4}; {before} before the rebuild)",
                filters as f64 / uniform as f64
            );
        }
        for i in 0..3000 {
            assert_eq!(
                db.get(&key(i)).unwrap().as_deref(),
                Some(b"value-value".as_slice()),
                "{kind:?}: key {i}"
            );
        }
    }
}

/// A rebuild that raises a filter, with a flush planned and installed
/// while the rebuild has written its new filter but not installed it:
/// the flush sees the table's old filter (4 bits per key, far under its
/// share) and, without the rebuild's claim, takes the bytes the rebuild
/// is about to spend (the optimum gives a small L0 run above b). Every
/// install stays within uniform's bytes, and every key is found.
#[test]
fn a_flush_during_a_raising_rebuild_leaves_the_tree_within_uniform_memory() {
    flush_during_raising_rebuild(FilterPolicy::Optimized { bits_per_key: BITS });
}

/// The same with `rebuild_filters(Uniform { b })` at the store's b: its
/// tables get b, nothing fitted, but until its second pass the store is
/// under `Optimized` and flushes plan against the claims, so the rebuild
/// still claims what its install adds. Before, a rebuild to another
/// policy than `Optimized` claimed nothing: the flush took the bytes the
/// deep filter's raise to b was about to take, and the install went to
/// 1.045 x uniform.
#[test]
fn a_flush_during_a_raising_rebuild_to_uniform_leaves_the_tree_within_uniform_memory() {
    flush_during_raising_rebuild(FilterPolicy::Uniform { bits_per_key: BITS });
}

/// A deep table at 4 bits per key in a store at `Optimized` 10, a rebuild
/// to `policy` planned and written, a flush of 500 keys planned and
/// installed, then the rebuild's install: every install within uniform's
/// bytes, every key found.
fn flush_during_raising_rebuild(policy: FilterPolicy) {
    let dir = scratch_dir();
    let db =
        Arc::new(Db::open(dir.path(), static_budget_options(FilterKind::Blocked, BITS)).unwrap());
    let deep: Vec<_> = (0..4000).map(|i| prefixed_key("d", i)).collect();
    place(&db, 2, &deep, 1, 4.0);
    advance_sequence(&db, 10_000);
    let samples = watch(&db);

    let (paused, resume) = db.inner.rebuild_pause.arm_once();
    let rebuilder = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.rebuild_filters(policy))
    };
    paused.recv().unwrap();
    // A flush of 500 keys (into the memtable directly, then flushed: the
    // rebuild holds the compaction lock, not the flush lock).
    freeze_keys(&db, "f", 500);
    db.inner.flush_all_immutable().unwrap();
    resume.send(()).unwrap();
    rebuilder.join().unwrap().unwrap();

    // The flush, the rebuild, and its second pass (the flushed table).
    assert_installs_within_uniform_and_keys_found(&db, &samples, &[("d", 4000), ("f", 500)]);
}

/// At least two installs were sampled, each within uniform's bytes, and
/// every key `prefix` 0..n of `keys` is found.
fn assert_installs_within_uniform_and_keys_found(
    db: &Db,
    samples: &Mutex<Vec<(u64, u64)>>,
    keys: &[(&str, u64)],
) {
    let samples = samples.lock().clone();
    assert!(samples.len() >= 2, "{} installs", samples.len());
    for (i, &(filters, uniform)) in samples.iter().enumerate() {
        assert!(
            filters <= uniform,
            "install {i}: {filters} filter bytes over uniform's {uniform} (x{:.4})",
            filters as f64 / uniform as f64
        );
    }
    for &(prefix, n) in keys {
        for i in 0..n {
            assert!(
                db.get(&prefixed_key(prefix, i)).unwrap().is_some(),
                "{prefix}{i}"
            );
        }
    }
}

/// A flush planned before a rebuild plans, its claim paid from the share
/// a filter far under it leaves unused (a deep table at 4 bits per key in
/// a store at 10, as after a reopen from `Uniform { 4 }`). Under
/// `Optimized` the rebuild's floor for that table must leave the claim
/// alone (before, it gave the table its whole share, and the installs
/// took the tree to 1.04 x uniform); a rebuild to `Uniform` at the
/// store's b gives every table b and cannot give way at all (1.046 x,
/// until its second pass rebuilt the flushed table). A rebuild now plans
/// only once the flushes in flight have installed, so it plans with no
/// claim in flight (the floor that leaves a claim alone is checked with
/// a claim given by hand: `a_repair_plans_within_what_the_claims_leave_of_its_share`).
/// Every install stays within uniform's bytes, and every key is found.
#[test]
fn a_flush_claim_on_a_filter_under_its_share_holds_against_a_rebuild() {
    flush_claim_then_rebuild(FilterPolicy::Optimized { bits_per_key: BITS });
}

#[test]
fn a_flush_claim_on_a_filter_under_its_share_holds_against_a_rebuild_to_uniform() {
    flush_claim_then_rebuild(FilterPolicy::Uniform { bits_per_key: BITS });
}

/// The rebuild to `policy` stops before its plan; a flush of 1,000 keys
/// plans, claims, writes and stops before its install; the rebuild goes
/// on, then the flush.
fn flush_claim_then_rebuild(policy: FilterPolicy) {
    let dir = scratch_dir();
    let db =
        Arc::new(Db::open(dir.path(), static_budget_options(FilterKind::Blocked, BITS)).unwrap());
    let deep: Vec<_> = (0..9000).map(|i| prefixed_key("d", i)).collect();
    place(&db, 2, &deep, 1, 4.0);
    advance_sequence(&db, 10_000);
    // 1,000 keys frozen in a memtable (the flush's L0 run is priced well
    // above b beside the 9,000-key level, and the deep filter leaves
    // room for it).
    freeze_keys(&db, "f", 1000);
    let samples = watch(&db);

    let (rebuild_paused, resume_rebuild) = db.inner.rebuild_plan_pause.arm_once();
    let rebuilder = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.rebuild_filters(policy))
    };
    rebuild_paused.recv().unwrap();
    let (flush_paused, resume_flush) = db.inner.before_manifest_pause.arm_once();
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.inner.flush_all_immutable())
    };
    flush_paused.recv().unwrap();
    assert!(
        db.inner.filter_claims.held() > 0,
        "the flush claimed nothing"
    );
    resume_rebuild.send(()).unwrap();
    resume_flush.send(()).unwrap();
    flusher.join().unwrap().unwrap();
    rebuilder.join().unwrap().unwrap();

    // The flush and the rebuild (and a second pass, if the flush's table
    // came after the first).
    assert_installs_within_uniform_and_keys_found(&db, &samples, &[("d", 9000), ("f", 1000)]);
}

/// The repair of a filter that is gone (damaged, or never built) plans
/// within what the writes in flight leave: such a table's whole share is
/// free to a flush planned beside it, and one that claimed it must not
/// find the repair spending it again. With 1,000 bytes claimed, a
/// 9,000-key table without a filter (its share 11,264 bytes at 10 bits)
/// was planned at 9.95 bits (11,200 bytes, its floor), 1.09 x what the
/// claims left; now within it.
#[test]
fn a_repair_plans_within_what_the_claims_leave_of_its_share() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), static_budget_options(FilterKind::Blocked, BITS)).unwrap();
    let deep: Vec<_> = (0..9000).map(|i| prefixed_key("d", i)).collect();
    let gone = place(&db, 2, &deep, 1, 0.0);
    assert_eq!(table_filter_bytes(&gone), 0);
    let claimed = 1000;
    let sv = db.inner.current.load_full();
    let policy = FilterPolicy::Optimized { bits_per_key: BITS };
    let (targets, claim) = rebuild_targets(
        &policy,
        &policy,
        FilterKind::Blocked,
        &sv.version.levels,
        |t| t.meta.number == gone.meta.number,
        claimed,
    );
    assert_eq!(targets.len(), 1);
    let bits = targets[0].1;
    let planned = if bits > 0.0 {
        planned_memory_bytes(FilterKind::Blocked, 9000, bits)
    } else {
        0
    };
    let uniform = planned_memory_bytes(FilterKind::Blocked, 9000, BITS);
    assert!(
        planned + claimed <= uniform,
        "planned at {bits:.2} bits: {planned} bytes and {claimed} claimed over uniform's {uniform}"
    );
    // What the install adds: the whole filter (the table had none).
    assert_eq!(claim, planned);
}

/// A rebuild that claimed bytes (a deep filter raised from 4 bits to the
/// store's 10) and panics before its install (a bug) releases its claim
/// as it unwinds: no later write is planned against bytes nobody will
/// spend.
#[test]
fn a_rebuild_that_panics_before_its_install_releases_its_claim() {
    let dir = scratch_dir();
    let db =
        Arc::new(Db::open(dir.path(), static_budget_options(FilterKind::Blocked, BITS)).unwrap());
    let deep: Vec<_> = (0..4000).map(|i| prefixed_key("d", i)).collect();
    place(&db, 2, &deep, 1, 4.0);
    advance_sequence(&db, 10_000);
    let held_then = Arc::new(std::sync::atomic::AtomicU64::new(0));
    {
        let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
        let held_then = Arc::clone(&held_then);
        db.inner.rebuild_pause.set(Some(Arc::new(move || {
            if let Some(inner) = inner.upgrade() {
                held_then.store(inner.filter_claims.held(), Ordering::SeqCst);
            }
            panic!("injected panic before the rebuild's install");
        })));
    }
    let rebuilt = {
        let db = Arc::clone(&db);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: BITS })
        }))
    };
    assert!(rebuilt.is_err(), "the rebuild did not panic");
    assert!(
        held_then.load(Ordering::SeqCst) > 0,
        "the rebuild claimed nothing"
    );
    assert_eq!(db.inner.filter_claims.held(), 0, "a claim left held");
}
