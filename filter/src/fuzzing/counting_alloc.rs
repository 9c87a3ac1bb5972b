//! A global allocator for fuzz targets that bound what a decoder
//! allocates: the system allocator, counting the bytes live and the most
//! live since a measurement began. Process-wide counters: a measurement
//! means something only while no other thread allocates.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Install with `#[global_allocator] static A: CountingAlloc = CountingAlloc;`.
#[derive(Debug)]
pub struct CountingAlloc;

impl CountingAlloc {
    /// Begins a measurement: the peak is reset to the bytes live now,
    /// which are returned (pass them to [`Self::peak_since`]).
    pub fn start() -> usize {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        base
    }

    /// The most bytes live at once since [`Self::start`] returned `base`,
    /// above `base`.
    pub fn peak_since(base: usize) -> usize {
        PEAK.load(Ordering::Relaxed).saturating_sub(base)
    }
}

// SAFETY: every call is passed to `System` unchanged; only counters are
// added.
unsafe impl GlobalAlloc for CountingAlloc {
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
