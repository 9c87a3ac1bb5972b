//! A global allocator that, once armed ([`ARMED`]), refuses an
//! allocation of [`LARGE`] bytes or more while another one is live: memory
//! that admits a block-sized buffer once but not twice. Installed by the
//! test binaries that include this module (and only those).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Allocations at least this large count as block-sized.
pub const LARGE: usize = 1 << 20;

pub static ARMED: AtomicBool = AtomicBool::new(false);
/// Block-sized allocations live now (counted armed or not).
pub static LIVE_LARGE: AtomicUsize = AtomicUsize::new(0);

pub struct OneLargeAtATime;

// SAFETY: delegates every allocation it grants to the system allocator
// unchanged; a refusal returns null, as the contract allows.
unsafe impl GlobalAlloc for OneLargeAtATime {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= LARGE {
            if LIVE_LARGE.fetch_add(1, Ordering::SeqCst) > 0 && ARMED.load(Ordering::SeqCst) {
                LIVE_LARGE.fetch_sub(1, Ordering::SeqCst);
                return std::ptr::null_mut();
            }
            // SAFETY: same contract as the caller's.
            let p = unsafe { System.alloc(layout) };
            if p.is_null() {
                LIVE_LARGE.fetch_sub(1, Ordering::SeqCst);
            }
            return p;
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= LARGE {
            LIVE_LARGE.fetch_sub(1, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: OneLargeAtATime = OneLargeAtATime;
