#![no_main]
//! Manifests of the fuzzer's fields with a valid checksum
//! (`bloomlsm::fuzzing::resealed::reseal_manifest`), so the fuzzer reaches
//! the decoding and checks behind the crc32 that `manifest_decode` rarely
//! passes: decoding never panics, what decodes re-encodes as its version
//! says (`exercise_manifest`), and decoding allocates at most a small
//! multiple of the input's length (counted by this target's allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bloomlsm::fuzzing::resealed::{exercise_manifest, reseal_manifest};
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
    let bytes = reseal_manifest(data);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    exercise_manifest(&bytes);
    let used = PEAK.load(Ordering::Relaxed) - base;
    // The tables (a record of at least 52 bytes each) and their keys, then
    // the re-encoding: a few copies of the input, never a count or length
    // the bytes claim.
    assert!(
        used <= 16 * bytes.len() + 16_384,
        "decoding {} bytes allocated {used}",
        bytes.len()
    );
});
