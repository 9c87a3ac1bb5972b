//! Failed positioned reads (`EIO`), swept over the reads a workload makes:
//! gets, held iterators, compaction inputs (bulk reads), filter rebuilds
//! and the reads of new tables' footer, index and filter at their open.

use bloomlsm::fs::fault::ReadFault;

use super::harness::{Case, Seen, Shape, shape};

/// Reads (or read-opens) the workload makes after the tree is built, in
/// a run without faults.
pub fn span(shape: Shape, opens: bool) -> u64 {
    let mut case = Case::build(shape, "calibration").unwrap();
    let count = |c: &Case| {
        if opens {
            c.fs.read_opens()
        } else {
            c.fs.reads()
        }
    };
    let before = count(&case);
    case.workload();
    let span = count(&case) - before;
    let tables: Vec<u64> = case.db().stats().levels.iter().map(|l| l.tables).collect();
    println!("{shape:?}: tables per level {tables:?}");
    case.heal_and_check(shape.max_open_files);
    span
}

/// The bound a case reopens under: another one than it ran with.
pub fn other_bound(max_open_files: Option<usize>) -> Option<usize> {
    match max_open_files {
        None => Some(1),
        Some(1) => Some(2),
        Some(_) => None,
    }
}

/// Runs `positions` cases of `shape` (or `READ_FAULT_POSITIONS` of
/// them, for a longer hunt), the fault `at(k)` armed `k` calls after the
/// tree is built, `k` spread over the workload's span.
pub fn sweep(shape: Shape, opens: bool, positions: u64, at: impl Fn(u64) -> ReadFault) -> Seen {
    let positions = std::env::var("READ_FAULT_POSITIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(positions);
    let Some(probe) = Case::build(shape, "probe") else {
        println!("{shape:?}: skipped, no direct reads here");
        return Seen::default();
    };
    drop(probe);
    let span = span(shape, opens).max(1);
    let mut total = Seen::default();
    for p in 0..positions {
        let k = span * p / positions + p % 7;
        let mut case =
            Case::build(shape, &format!("opens {opens} position {k} of {span}")).unwrap();
        let base = if opens {
            case.fs.read_opens()
        } else {
            case.fs.reads()
        };
        let fault = match at(k) {
            ReadFault::Only(n) => ReadFault::Only(base + n),
            ReadFault::From(n) => ReadFault::From(base + n),
            seeded => seeded,
        };
        case.ctx = format!("{} {fault:?}", case.ctx);
        case.attack(opens, fault);
        let seen = case.heal_and_check(other_bound(shape.max_open_files));
        total.failed_reads += seen.failed_reads;
        total.refused_writes += seen.refused_writes;
        total.failed_jobs += seen.failed_jobs;
        total.faults += seen.faults;
        total.filterless += seen.filterless;
    }
    println!("{shape:?} opens {opens}: span {span}, {total:?}");
    total
}

#[test]
fn one_failed_read_anywhere_is_an_error_never_a_wrong_answer() {
    for (seed, max_open_files) in [(1, None), (2, Some(1)), (3, Some(2))] {
        let seen = sweep(
            shape(max_open_files, false, seed),
            false,
            40,
            ReadFault::Only,
        );
        assert!(seen.faults > 0, "{max_open_files:?}: no fault was injected");
    }
}

#[test]
fn one_failed_direct_read_anywhere_is_an_error_never_a_wrong_answer() {
    for (seed, max_open_files) in [(4, None), (5, Some(1))] {
        sweep(
            shape(max_open_files, true, seed),
            false,
            10,
            ReadFault::Only,
        );
    }
}

#[test]
fn reads_failing_from_a_point_on_lose_nothing_once_healed() {
    for (seed, max_open_files) in [(6, None), (7, Some(1)), (8, Some(2))] {
        sweep(
            shape(max_open_files, false, seed),
            false,
            12,
            ReadFault::From,
        );
    }
}

#[test]
fn a_seeded_share_of_failed_reads_is_errors_never_wrong_answers() {
    for (seed, max_open_files) in [(9, None), (10, Some(1)), (11, Some(2))] {
        let seeded = |k| ReadFault::Seeded {
            seed: k,
            one_in: 40,
        };
        sweep(shape(max_open_files, false, seed), false, 8, seeded);
    }
}
