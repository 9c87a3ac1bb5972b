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
mod one_large;

use std::sync::atomic::Ordering;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::TableIter;
use common::{open, options, simple_model, write_table};
use one_large::{ARMED, LARGE, LIVE_LARGE};

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
