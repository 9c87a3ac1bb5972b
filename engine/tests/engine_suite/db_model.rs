//! The model interpreter shared with the fuzz target `db_model`
//! (`bloomlsm::fuzzing::db_model`), run on random byte strings decoded
//! into cases: narrow store shapes, puts, deletes, batches, gets, range
//! scans, snapshots checked across flushes, compactions and filter
//! rebuilds, rebuilds at every policy and reopens with other filters,
//! every answer against a `BTreeMap`.
//!
//! `BLOOMLSM_DB_MODEL_CASES` sets the number of cases (default 16, a few
//! seconds in a debug build); failing inputs are kept in
//! `engine/tests/engine_suite/db_model.proptest-regressions` and replayed first.
//! `BLOOMLSM_DB_MODEL_INPUT=FILE` replays one fuzz input (an artifact of
//! `cargo fuzz run db_model`; a relative path starts in `engine/`) and
//! prints the case it decodes to.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use bloomlsm::FilterKind;
use bloomlsm::fuzzing::db_model::{
    Case, FilterConfig, Op, PolicySpec, RunFigures, Shape, run_case,
};
use common::scratch_dir;
use proptest::collection::vec;
use proptest::prelude::any;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

fn cases() -> u32 {
    std::env::var("BLOOMLSM_DB_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

/// Runs the case the bytes decode to; a panic (a wrong answer, or an
/// operation that failed) becomes the failure, with the decoded case.
fn run_bytes(bytes: &[u8]) -> Result<RunFigures, TestCaseError> {
    let case = Case::from_bytes(bytes);
    let dir = scratch_dir();
    catch_unwind(AssertUnwindSafe(|| run_case(&case, dir.path()))).map_err(|panic| {
        let msg = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        TestCaseError::fail(format!("{msg}\ncase: {case:?}"))
    })
}

#[test]
fn replay_input_file() {
    let Some(path) = std::env::var_os("BLOOMLSM_DB_MODEL_INPUT") else {
        return;
    };
    // cargo runs the test in `engine/`: a relative path starts there.
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        let shown = std::path::Path::new(&path).display().to_string();
        panic!("BLOOMLSM_DB_MODEL_INPUT={shown} (relative to engine/): {e}")
    });
    let started = std::time::Instant::now();
    eprintln!("{:?}", Case::from_bytes(&bytes));
    let figures = run_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{figures:?} in {:?}", started.elapsed());
}

#[test]
fn random_cases_match_btreemap() {
    let mut config = Config::with_source_file(file!());
    config.cases = cases();
    config.failure_persistence = Some(Box::new(FileFailurePersistence::WithSource(
        "proptest-regressions",
    )));
    if config.max_shrink_iters == u32::MAX {
        config.max_shrink_iters = 5_000;
    }
    let figures: Mutex<Vec<RunFigures>> = Mutex::new(Vec::new());
    let result = TestRunner::new(config).run(&vec(any::<u8>(), 400..1_200), |bytes| {
        let f = run_bytes(&bytes)?;
        figures.lock().unwrap().push(f);
        Ok(())
    });
    let figures = figures.into_inner().unwrap();
    let deep = figures.iter().filter(|f| f.sorted_levels >= 4).count();
    eprintln!(
        "db_model: {} cases, {} operations, {} full checks, {} snapshot checks; \
         most levels below L0 in use per case {:?}",
        figures.len(),
        figures.iter().map(|f| f.ops).sum::<usize>(),
        figures.iter().map(|f| f.full_checks).sum::<u64>(),
        figures.iter().map(|f| f.snapshot_checks).sum::<u64>(),
        figures.iter().map(|f| f.sorted_levels).collect::<Vec<_>>(),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator's promise: most cases build deep trees of narrow
    // tables without a manual compaction doing it for them.
    assert!(
        deep * 2 >= figures.len(),
        "only {deep} of {} cases had 4 levels below L0 in use at once",
        figures.len()
    );
}

/// A case written as the fuzz target's `Case` debug output reads: two L0
/// tables hold a put and a later delete of `a` (key id 2), then two puts;
/// no filters (layout 3: L0 compacts at four tables). Failed when `get`
/// read L0 oldest table first: the deleted key came back, then the older
/// value won.
#[test]
fn versions_of_a_key_in_several_l0_tables() {
    let case = Case {
        shape: Shape {
            layout: 3,
            deletion_compaction: false,
            filters: FilterConfig {
                kind: FilterKind::Blocked,
                policy: PolicySpec::Uniform(0),
            },
        },
        ops: vec![
            Op::Put(2, 200),
            Op::Flush,
            Op::Delete(2),
            Op::Flush,
            Op::Get(2),
            Op::Put(2, 20),
            Op::Flush,
            Op::Get(2),
        ],
    };
    let dir = scratch_dir();
    run_case(&case, dir.path());
}
