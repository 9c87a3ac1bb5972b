//! A pass reading ahead holds one buffer the size of a block, not two: a
//! block's size is a recorded field (a crafted index over a sparse file
//! may claim nearly 2^63 bytes), and its buffer is reserved fallibly so a
//! refused allocation fails the read; a second, infallible allocation of
//! the same size (a copy of the block out of the window) aborted the
//! process whenever memory admitted the block once but not twice.
//!
//! Modelled with a global allocator that, once armed, refuses an
//! allocation of [`LARGE`] bytes or more while another one is live: a
//! table of a single data block larger than that must still be read
//! whole by a pass that does not fill the cache.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::TableIter;
use common::{open, options, simple_model, write_table};

/// Allocations at least this large count as block-sized.
const LARGE: usize = 1 << 20;

static ARMED: AtomicBool = AtomicBool::new(false);
/// Block-sized allocations live now (counted armed or not).
static LIVE_LARGE: AtomicUsize = AtomicUsize::new(0);

struct OneLargeAtATime;

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

#[test]
fn a_pass_reads_a_block_larger_than_its_window_into_one_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let model = simple_model(60_000);
    let summary = write_table(&path, &model, options(Some(FilterKind::Blocked), 8 << 20));
    assert_eq!(summary.properties.data_blocks, 1);
    assert!(summary.properties.data_bytes > LARGE as u64);
    let table = open(&path, false);
    assert_eq!(LIVE_LARGE.load(Ordering::SeqCst), 0);
    ARMED.store(true, Ordering::SeqCst);
    // Compared as they come: a vector of every entry would itself grow
    // past `LARGE` while the block is held.
    let mut expected = model.iter();
    let mut read = 0;
    for e in TableIter::new(table, false) {
        let e = e.unwrap();
        let ((key, seq), (_, value)) = expected.next().unwrap();
        assert_eq!((&e.user_key, e.seq, &e.value), (key, seq.0, value));
        read += 1;
    }
    ARMED.store(false, Ordering::SeqCst);
    assert_eq!(read, model.len());
}
