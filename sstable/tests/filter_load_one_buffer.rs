//! A table's open loads its filter through one buffer the size of the
//! filter block, not two: the block's size is a recorded field (a crafted
//! footer over a sparse file may claim far more than memory holds), and
//! its buffer is reserved fallibly so a refused allocation fails the load;
//! the decoder then copied the payload into a second, infallible
//! allocation of nearly the same size, which aborted the process whenever
//! memory admitted the block once but not twice.
//!
//! Modelled with a global allocator that, once armed, refuses an
//! allocation of [`LARGE`] bytes or more while another one is live.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;
mod one_large;

use std::sync::atomic::Ordering;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{FilterLoadError, FilterStatus, Table, TableOptions};
use common::{simple_model, write_table};
use one_large::{ARMED, LIVE_LARGE};
use std::io::ErrorKind;

#[test]
fn a_filter_larger_than_memory_admits_twice_does_not_abort_the_open() {
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let model = simple_model(400_000);
        let options = TableOptions {
            block_size: 4096,
            filter_kind: kind,
            bits_per_key: 60.0,
            ..TableOptions::default()
        };
        write_table(&path, &model, options);
        assert_eq!(LIVE_LARGE.load(Ordering::SeqCst), 0);
        ARMED.store(true, Ordering::SeqCst);
        // The open succeeds: a filter is an optimization.
        let table = Table::open_path(&path, 1, None);
        ARMED.store(false, Ordering::SeqCst);
        // Refused memory is a failed read (retried by a lookup that
        // reaches it), not damage, which would have the filter rebuilt.
        match table.unwrap().filter_status() {
            FilterStatus::Unusable(FilterLoadError::Read { source, .. }) => {
                assert_eq!(source.kind(), ErrorKind::OutOfMemory, "{kind:?}: {source}");
            }
            other => panic!("{kind:?}: {other:?}"),
        }
        // Unarmed, the same table loads its filter.
        let table = Table::open_path(&path, 1, None).unwrap();
        assert!(
            matches!(table.filter_status(), FilterStatus::Loaded),
            "{kind:?}"
        );
    }
}
