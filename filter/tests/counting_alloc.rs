//! `fuzzing::CountingAlloc`, installed as this test binary's allocator
//! (one test, so no other thread allocates during a measurement): the
//! resealing fuzz targets bound a decoder's allocation with it, so it must
//! see a large allocation and forget what was freed before it began.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::fuzzing::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn the_peak_counts_what_was_live_at_once_since_the_start() {
    let before = vec![0u8; 1 << 20];
    drop(before);
    let base = CountingAlloc::start();
    assert!(
        CountingAlloc::peak_since(base) < 1 << 16,
        "a freed MiB counted"
    );
    let a = vec![1u8; 3 << 20];
    let b = vec![2u8; 1 << 20];
    let peak = CountingAlloc::peak_since(base);
    assert!(peak >= 4 << 20, "peak {peak} below the 4 MiB live at once");
    drop((a, b));
    let c = vec![3u8; 1 << 20];
    assert!(
        CountingAlloc::peak_since(base) < 5 << 20,
        "freed bytes still counted as live"
    );
    std::hint::black_box(&c);
}
