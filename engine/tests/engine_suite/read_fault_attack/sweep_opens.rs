//! Failed read-opens (`EIO`) of table files, swept over the opens a
//! workload makes: with `max_open_files` every read that finds its file
//! closed reopens it (gets, held iterators, compaction inputs, filter
//! rebuilds); without it, only new tables' first opens.

use bloomlsm::fs::fault::ReadFault;

use super::harness::shape;
use super::sweep_reads::sweep;

#[test]
fn one_failed_reopen_anywhere_is_an_error_never_a_wrong_answer() {
    for (seed, max_open_files) in [(21, Some(1)), (22, Some(2)), (23, None)] {
        let seen = sweep(
            shape(max_open_files, false, seed),
            true,
            40,
            ReadFault::Only,
        );
        assert!(seen.faults > 0, "{max_open_files:?}: no fault was injected");
    }
}

#[test]
fn one_failed_direct_reopen_anywhere_is_an_error_never_a_wrong_answer() {
    sweep(shape(Some(1), true, 24), true, 10, ReadFault::Only);
}

#[test]
fn reopens_failing_from_a_point_on_lose_nothing_once_healed() {
    for (seed, max_open_files) in [(25, Some(1)), (26, Some(2)), (27, None)] {
        sweep(
            shape(max_open_files, false, seed),
            true,
            12,
            ReadFault::From,
        );
    }
}
