//! Attacks on `Options::use_direct_reads` on a disk file system (`/var/tmp`
//! or `BLOOMLSM_DIRECT_TMPDIR`; each test skips on tmpfs, where `O_DIRECT`
//! has no alignment rule): a model run, readers through background churn,
//! damaged blocks, injected short reads, table shapes against the aligned
//! reader, and reads from a thread-local destructor. One binary, a module
//! each.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod damage;
mod faults;
mod model;
mod races;
mod table_shapes;
mod thread_exit;
