//! Where the unit tests put their stores: in memory (`/dev/shm`) where
//! there is one, or under `BLOOMLSM_TEST_TMPDIR` when it is set (the
//! integration tests' `common::scratch_dir` chooses the same way).
//!
//! These tests check answers, file sets and the order of operations, not
//! what a disk keeps across a power loss (`fs::fault` models that), so the
//! fsyncs of their many flushes and compactions need not wait for a
//! shared disk; every fsync and rename is still issued. Tests of what only
//! a disk file system does (direct reads, in-place overwrites, record
//! locks) keep `tempfile::tempdir()`.

/// A new empty directory, removed when dropped.
pub(crate) fn scratch_dir() -> tempfile::TempDir {
    let base = std::env::var_os("BLOOMLSM_TEST_TMPDIR")
        .map(std::path::PathBuf::from)
        .or_else(|| Some(std::path::PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::tempdir_in(base).expect("a scratch directory")
}
