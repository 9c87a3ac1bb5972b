//! Reads that fail (`FaultFs::fail_reads`, `FaultFs::fail_read_opens`:
//! `EIO`) on deep trees of narrow tables, with background flushes,
//! compactions and filter rebuilds running, snapshots and iterators held
//! across them, buffered or direct reads, and `max_open_files` at
//! `Some(1)`, `Some(2)` or `None` (where every reopen of a table file may
//! be the one that fails). A fault is swept over every position.
//!
//! Invariants checked at each position:
//! - a get (now or at a snapshot) answers the model's value or fails with
//!   an `EIO` naming a table file: never `None` for a stored key, an older
//!   version, or a deleted key back;
//! - an iterator yields the model's pairs in order, and may end early only
//!   with such an error: it never skips a pair silently;
//! - a write is acknowledged or refused (writes stop after a background
//!   job failed on the read); a job that failed loses nothing;
//! - once the faults stop, every acknowledged write reads back, the
//!   snapshots still see what they saw, and a reopen (under another
//!   `max_open_files`) holds exactly the acknowledged writes.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod concurrent;
mod error_names;
mod filter_read_rebuild;
mod filter_retry;
mod filter_retry_deep;
mod harness;
mod open_faults;
mod sweep_opens;
mod sweep_reads;
