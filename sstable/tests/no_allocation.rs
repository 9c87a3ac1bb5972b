//! An absent-key get that the filter answers costs one filter probe and no
//! allocation: counted with a global allocator that tallies allocations.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::Outcome;
use common::{open, options, simple_model, write_table};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: delegates every call to the system allocator unchanged; only
// counts allocations.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn filter_negative_gets_allocate_nothing() {
    let model = simple_model(50_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    write_table(&path, &model, options(Some(FilterKind::Blocked), 4096));
    let table = open(&path, true);
    let keys: Vec<Vec<u8>> = (0..20_000u64)
        .map(|i| format!("key{:08}x", i * 2).into_bytes())
        .collect();
    let hashes: Vec<KeyHash> = keys.iter().map(|k| KeyHash::of(k)).collect();
    let mut negatives = 0u64;
    let mut allocations_in_negatives = 0u64;
    for (key, hash) in keys.iter().zip(&hashes) {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let lookup = table.get(key, *hash, u64::MAX >> 8).unwrap();
        let after = ALLOCATIONS.load(Ordering::Relaxed);
        if lookup.outcome == Outcome::FilterNegative {
            negatives += 1;
            allocations_in_negatives += after - before;
        }
    }
    println!("{negatives} filter-negative gets, {allocations_in_negatives} allocations");
    assert!(negatives > 19_000);
    assert_eq!(allocations_in_negatives, 0);
}
