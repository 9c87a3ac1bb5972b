//! Memory stays flat across many cycles of the same workload: the heap
//! bytes live after a cycle (counted by this binary's global allocator)
//! may grow only with the tree's filters, indexes and the block cache,
//! which the same workload keeps the same size. Each cycle overwrites and
//! deletes keys of a fixed set in a deep narrow tree, holds iterators and
//! snapshots across flushes and compactions, then drops them, rebuilds
//! filters now and then, and settles; every few cycles the store is
//! closed and reopened (now and then read-only as well). Live bytes after cycle 50 are
//! compared with those after cycle 10.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use bloomlsm::{Db, FilterPolicy, Options};
use common::narrow_tree::narrow_tree_options;
use common::{Rng, scratch_dir};

/// The system allocator, counting the bytes it has handed out and not
/// yet been given back.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed on to `System` unchanged; only a counter
// is updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: u64 = 300;

fn options(background_work: bool) -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        block_cache_bytes: 16 << 10,
        background_work,
        max_open_files: Some(3),
        ..narrow_tree_options()
    }
}

fn cycle(db: &Db, rng: &mut Rng, n: u64) {
    let mut iters = Vec::new();
    let mut snapshots = Vec::new();
    for round in 0..6 {
        for i in 0..KEYS {
            let k = format!("k{i:05}").into_bytes();
            if rng.below(5) == 0 {
                db.delete(&k).unwrap();
            } else {
                // Values of a size fixed per key: the same data each cycle.
                let v = format!("{n}-{round}-{}", "x".repeat((i % 40) as usize));
                db.put(&k, v.as_bytes()).unwrap();
            }
        }
        let mut it = db.scan::<&[u8], _>(..).unwrap();
        it.next();
        iters.push(it);
        snapshots.push(db.snapshot());
        if round == 3 && n.is_multiple_of(7) {
            let bits = [4.0, 6.0, 8.0][(n % 3) as usize];
            db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: bits })
                .unwrap();
        }
    }
    drop(iters);
    drop(snapshots);
    // The same end state each cycle: every key present, so the tree holds
    // the same keys (compactions drop the tombstones and older versions).
    for i in 0..KEYS {
        let k = format!("k{i:05}").into_bytes();
        db.put(&k, "x".repeat((i % 40) as usize).as_bytes())
            .unwrap();
    }
    db.wait_for_background_work().unwrap();
}

#[test]
fn live_heap_bytes_stay_flat_over_fifty_cycles() {
    let dir = scratch_dir();
    let mut rng = Rng(50);
    let mut db = Db::open(dir.path(), options(false)).unwrap();
    let mut live = Vec::new();
    for n in 1..=50u64 {
        cycle(&db, &mut rng, n);
        if n.is_multiple_of(5) {
            db.close().unwrap();
            if n.is_multiple_of(15) {
                let ro = Db::open_read_only(dir.path(), options(false)).unwrap();
                assert_eq!(ro.scan::<&[u8], _>(..).unwrap().count() as u64, KEYS);
                ro.close().unwrap();
            }
            // Background work for cycles 21 to 25 only: every figure
            // compared is taken with no thread but this one at work.
            db = Db::open(dir.path(), options(n == 20)).unwrap();
        }
        let tables = db.stats().total.tables;
        live.push((LIVE.load(Ordering::Relaxed), tables));
    }
    db.close().unwrap();
    let (at10, _) = live[9];
    let (at50, _) = live[49];
    assert!(at50 < at10 + at10 / 4, "live bytes: {live:?}");
}
