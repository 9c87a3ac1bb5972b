//! `Filter::memory_bytes` is the heap a filter holds: the bytes of its
//! allocations (bit array, blocks, solution lines or counters), measured
//! here by a counting global allocator, for every kind, built or decoded.
//! The filter's own fixed-size struct is not heap and not counted (it lives
//! wherever its owner does: 96 bytes as an `AnyFilter`, for every filter).
//!
//! Counted on the measuring thread alone (`CountingAlloc::thread_net`):
//! the test harness's own threads allocate when they like (a process-wide
//! count once read 1,028 bytes for a 128-byte Ribbon filter under load).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::fuzzing::CountingAlloc;
use bloomlsm_filter::{AnyFilter, CountingBloomFilter, Filter, FilterKind, InsertFilter, KeyHash};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The heap `make` leaves live (what it returns holds) and what it returns.
fn held<T>(make: impl FnOnce() -> T) -> (usize, T) {
    let base = CountingAlloc::thread_net();
    let value = make();
    let held = CountingAlloc::thread_net() - base;
    (usize::try_from(held).unwrap(), value)
}

#[test]
fn memory_bytes_are_the_heap_each_kind_holds() {
    // (what, reported, heap) of every filter whose figure is not its heap.
    let mut wrong: Vec<(String, usize, usize)> = Vec::new();
    let mut check = |what: String, reported: usize, heap: usize| {
        if reported != heap {
            wrong.push((what, reported, heap));
        }
    };
    for keys in [0u64, 1, 3, 7, 100, 1000, 5001] {
        let hashes: Vec<KeyHash> = (0..keys).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
        for bits in [1.0, 6.5, 10.0, 20.0] {
            for kind in [
                FilterKind::Standard,
                FilterKind::Blocked,
                FilterKind::Ribbon,
            ] {
                let (heap, built) = held(|| AnyFilter::build(kind, &hashes, bits).unwrap());
                check(
                    format!("{kind:?} built, {keys} keys at {bits}"),
                    built.memory_bytes(),
                    heap,
                );
                let bytes = built.to_bytes();
                drop(built);
                let (heap, decoded) = held(|| AnyFilter::from_bytes(&bytes).unwrap());
                check(
                    format!("{kind:?} decoded, {keys} keys at {bits}"),
                    decoded.memory_bytes(),
                    heap,
                );
            }
            let (heap, mut counting) = held(|| CountingBloomFilter::with_bits_per_key(keys, bits));
            check(
                format!("counting, {keys} keys at {bits}"),
                counting.memory_bytes(),
                heap,
            );
            hashes.iter().for_each(|&h| counting.insert_hash(h));
            let bytes = counting.to_bytes();
            drop(counting);
            let (heap, decoded) = held(|| CountingBloomFilter::from_bytes(&bytes).unwrap());
            check(
                format!("counting decoded, {keys} keys at {bits}"),
                decoded.memory_bytes(),
                heap,
            );
        }
    }
    assert!(wrong.is_empty(), "(filter, memory_bytes, heap): {wrong:#?}");
}
