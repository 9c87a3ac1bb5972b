//! The timed run: threads for a bounded time in two halves, the store
//! closed (whatever background work was due) and opened with another
//! filter kind and sync mode between them; after each half the whole
//! store is checked against the final histories, and at the end also
//! after a read-only open and a read-write open.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bloomlsm::{Db, FilterKind, SyncMode};
use bloomlsm_tests::scratch_dir;

use super::History;
use super::rng::Mix;
use super::shape::deep_options;
use super::threads::{maintainer, reader, snapshot_holder, writer};
use super::verify::verify_exact;
use super::write::{Owned, write_some};

/// One configuration of the timed run.
pub struct Config {
    /// Filter kind of the store while the threads run.
    pub kind: FilterKind,
    /// Sync mode while the threads run (the reopen uses the other).
    pub sync: SyncMode,
    /// `Options::deletion_compaction_ratio`.
    pub deletion_compaction_ratio: Option<f64>,
    /// Writer threads (each owns the keys `k % writers == its number`).
    pub writers: u64,
    /// L0 holds up to 5 overlapping tables and 3 frozen memtables wait
    /// for flush; static level budgets (L1 at 2 KiB, each level twice).
    pub l0_heavy: bool,
    /// The first half runs flushes and compactions inline in the writing
    /// threads (`background_work: false`), the second on the background
    /// threads.
    pub inline_first_half: bool,
    /// `Options::target_file_bytes` (the shape's is 1 KiB; 192 bytes makes
    /// tables of one to a few keys, hundreds per level).
    pub target_file_bytes: u64,
    /// `Options::max_open_files` of every open (`Some(1)`, `Some(2)`: the
    /// threads' reads reopen files the set closed as compactions and
    /// filter rebuilds replace them).
    pub max_open_files: Option<usize>,
}

fn store_options(config: &Config, kind: FilterKind, sync: SyncMode) -> bloomlsm::Options {
    let mut o = deep_options(kind, sync, config.deletion_compaction_ratio, true);
    o.target_file_bytes = config.target_file_bytes;
    o.max_open_files = config.max_open_files;
    if config.l0_heavy {
        o.l0_compaction_trigger = 5;
        o.max_immutable_memtables = 3;
        o.dynamic_level_bytes = false;
    }
    o
}

type Outcome = Result<String, String>;

fn panic_text(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs the threads on `db` for `seconds`; panics with every failure
/// seen. Returns the most levels below L0 seen in use at once.
fn run_half(
    db: &Arc<Db>,
    history: &Arc<History>,
    config: &Config,
    seconds: u64,
    seed: u64,
) -> usize {
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<(String, Outcome)>();
    let mut handles = Vec::new();
    let mut spawn = |name: String, work: Box<dyn FnOnce() -> Outcome + Send>| {
        let (stop, done) = (Arc::clone(&stop), done_tx.clone());
        handles.push(std::thread::spawn(move || {
            let outcome =
                catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|p| Err(panic_text(p)));
            if outcome.is_err() {
                stop.store(true, Ordering::SeqCst);
            }
            done.send((name, outcome)).unwrap();
        }));
    };
    let mut rngs = Mix::new(seed);
    for w in 0..config.writers {
        let (db, h, s, rng) = (
            Arc::clone(db),
            Arc::clone(history),
            Arc::clone(&stop),
            Mix::new(rngs.next_u64()),
        );
        let owned = Owned {
            writer: w,
            writers: config.writers,
        };
        spawn(
            format!("writer {w}"),
            Box::new(move || Ok(format!("{} ops", writer(&db, &h, rng, owned, &s)))),
        );
    }
    for r in 0..2 {
        let (db, h, s, rng) = (
            Arc::clone(db),
            Arc::clone(history),
            Arc::clone(&stop),
            Mix::new(rngs.next_u64()),
        );
        spawn(
            format!("reader {r}"),
            Box::new(move || reader(&db, &h, rng, &s).map(|n| format!("{n} reads"))),
        );
    }
    {
        let (db, h, s, rng) = (
            Arc::clone(db),
            Arc::clone(history),
            Arc::clone(&stop),
            Mix::new(rngs.next_u64()),
        );
        spawn(
            "snapshots".into(),
            Box::new(move || snapshot_holder(&db, &h, rng, &s).map(|n| format!("{n} re-reads"))),
        );
    }
    {
        let (db, s, rng) = (Arc::clone(db), Arc::clone(&stop), Mix::new(rngs.next_u64()));
        spawn(
            "maintainer".into(),
            Box::new(move || {
                let (deepest, rebuilds) = maintainer(&db, rng, &s);
                Ok(format!(
                    "{deepest} levels deepest, {rebuilds} rebuild_filters"
                ))
            }),
        );
    }
    drop(done_tx);

    let workers = handles.len();
    let mut outcomes = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds);
    // A worker that returns before the end failed: stop everyone then.
    if let Ok(first) = done_rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        outcomes.push(first);
    }
    stop.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(120);
    while outcomes.len() < workers {
        let left = deadline.saturating_duration_since(Instant::now());
        let outcome = done_rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "seed {seed}: a worker did not finish in 120 s (deadlock or stall): {outcomes:?}"
            )
        });
        outcomes.push(outcome);
    }
    for h in handles {
        h.join().unwrap();
    }
    let failures: Vec<_> = outcomes.iter().filter(|(_, o)| o.is_err()).collect();
    assert!(failures.is_empty(), "seed {seed}: {failures:#?}");
    let s = db.stats();
    eprintln!(
        "{outcomes:?}; {} flushes, {} compactions ({} deletion-triggered, {} bottom cleanups), \
         {} trivial moves, {} filters rebalanced, tables {:?}",
        s.flushes,
        s.compactions,
        s.deletion_compactions,
        s.bottom_cleanups,
        s.trivial_moves,
        s.filters_rebalanced,
        s.levels.iter().map(|l| l.tables).collect::<Vec<_>>()
    );
    outcomes
        .iter()
        .find(|(n, _)| n == "maintainer")
        .and_then(|(_, o)| o.as_ref().ok()?.split(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Runs `config` for `seconds` in two halves with a reopen between them;
/// panics with every failure seen.
pub fn run_threads(config: &Config, seconds: u64, seed: u64) {
    eprintln!(
        "stress_history: seed {seed}, {seconds} s, {:?} {:?}",
        config.kind, config.sync
    );
    let dir = scratch_dir();
    let options = store_options(config, config.kind, config.sync);
    let other_kind = if config.kind == FilterKind::Ribbon {
        FilterKind::Standard
    } else {
        FilterKind::Ribbon
    };
    let other_sync = if config.sync == SyncMode::Never {
        SyncMode::Always
    } else {
        SyncMode::Never
    };
    let reopen = store_options(config, other_kind, other_sync);
    let history = Arc::new(History::new(config.writers));

    let first_options = bloomlsm::Options {
        background_work: !config.inline_first_half,
        ..options.clone()
    };
    let db = Arc::new(Db::open(dir.path(), first_options).unwrap());
    let first = run_half(&db, &history, config, seconds.div_ceil(2), seed);
    verify_exact(&db, &history, "live, first half");
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
    let db = Arc::new(Db::open(dir.path(), reopen.clone()).unwrap());
    verify_exact(&db, &history, "reopened between the halves");
    let second = run_half(&db, &history, config, seconds / 2, seed ^ 0x5ec0);
    verify_exact(&db, &history, "live, second half");
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();

    let db = Db::open_read_only(dir.path(), options.clone()).unwrap();
    verify_exact(&db, &history, "read-only open");
    db.close().unwrap();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    verify_exact(&db, &history, "read-write open");
    let mut rng = Mix::new(seed ^ 0xc105e);
    for i in 0..200 {
        let owned = Owned {
            writer: i % config.writers,
            writers: config.writers,
        };
        write_some(&db, &history, &mut rng, owned);
    }
    verify_exact(&db, &history, "after writes on reopen");
    db.close().unwrap();
    let db = Db::open(dir.path(), reopen).unwrap();
    verify_exact(&db, &history, "last reopen");
    db.close().unwrap();
    let deepest = first.max(second);
    assert!(
        deepest >= 4,
        "seed {seed}: only {deepest} levels below L0 in use at once"
    );
}
