//! A global allocator for fuzz targets that bound what a decoder
//! allocates: the system allocator, counting the bytes live and the most
//! live since a measurement began. The live bytes and the peak are
//! process-wide, so they mean something only while no other thread
//! allocates; [`CountingAlloc::thread_net`] counts one thread's own
//! allocations, which the test harness's threads do not disturb.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Bytes this thread allocated less the bytes it freed. Constant
    /// initialised and without a destructor, so reading it never allocates
    /// and works while the thread exits.
    static THREAD_NET: Cell<isize> = const { Cell::new(0) };
}

/// Adds `bytes` to this thread's net count.
fn thread_add(bytes: isize) {
    // `try_with` cannot fail for a constant without a destructor; ignoring
    // it keeps the allocator free of any panic path.
    let _ = THREAD_NET.try_with(|net| net.set(net.get().wrapping_add(bytes)));
}

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

    /// Bytes the calling thread allocated less those it freed, since it
    /// began: the difference of two readings is what the thread's code
    /// between them left allocated, whatever other threads did meanwhile
    /// (negative if it freed more than it allocated, perhaps another
    /// thread's allocations).
    pub fn thread_net() -> isize {
        THREAD_NET.try_with(Cell::get).unwrap_or(0)
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
            thread_add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        thread_add(-(layout.size() as isize));
    }
}
