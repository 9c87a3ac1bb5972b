#![no_main]
//! Serialized filters of every kind with the fuzzer's header fields and
//! payload and a valid checksum (`bloomlsm_filter::fuzzing::reseal`), so
//! the fuzzer reaches the checks behind the crc32 that `filter_from_bytes`
//! rarely passes. Decoding never panics, the kind decoders agree, a
//! decoded filter answers probes and re-encodes as its version says
//! (`fuzzing::exercise`), and decoding allocates at most a small multiple
//! of the input's length (counted by this target's allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bloomlsm_filter::fuzzing::{exercise, reseal};
use libfuzzer_sys::fuzz_target;

/// The system allocator, counting the bytes live and the most live since
/// the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` unchanged; only counters are
// added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fuzz_target!(|data: &[u8]| {
    let bytes = reseal(data);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    exercise(&bytes);
    let used = PEAK.load(Ordering::Relaxed) - base;
    // Every kind decoded at once, each filter cloned once, each re-encoded
    // once: a few copies of the input, never a size the header claims.
    assert!(
        used <= 16 * bytes.len() + 16_384,
        "decoding {} bytes allocated {used}",
        bytes.len()
    );
});
