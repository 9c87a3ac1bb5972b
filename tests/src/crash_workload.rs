//! A workload of puts and deletes run through a `FaultFs` until its
//! injected failure, and what a store holds after a prefix of it: the
//! scaffolding of the tests that crash at every file-system operation
//! around one kind of background work.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, Stats, SyncMode};

/// The options the crash-point tests share: every write synced, 1 KiB
/// memtables, L0 compacted at 2 tables (slowed at 3, stopped at 6), work
/// done inline so that a crash point names the same operation every run.
pub fn synced_inline_options() -> Options {
    Options {
        sync: SyncMode::Always,
        memtable_bytes: 1024,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 3,
        l0_stop_trigger: 6,
        background_work: false,
        ..Options::default()
    }
}

/// [`synced_inline_options`] with 1 KiB tables of 256-byte blocks and a
/// 4 KiB L1: many narrow tables and levels from a few hundred writes.
pub fn small_table_options() -> Options {
    Options {
        l1_bytes: 4096,
        target_file_bytes: 1024,
        block_size: 256,
        ..synced_inline_options()
    }
}

/// One write: a put (`Some(value)`) or a delete of the key.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// How a run went until the injected failure.
pub struct CrashRun {
    /// Writes acknowledged (`Ok`).
    pub acked: usize,
    /// The stats after every write was acknowledged and a flush and
    /// `wait_for_background_work` returned; `None` if the failure came first.
    pub settled: Option<Stats>,
    /// `fs.ops()` just before write number `mark` (0 if it never came).
    pub ops_at_mark: u64,
}

/// Opens a store in `dir` through `fs` and makes `workload`'s writes in
/// order, flushing after every `flush_every`-th, until one fails; then, if
/// none did, flushes and settles the background work.
pub fn run_until_crash(
    dir: &Path,
    fs: &FaultFs,
    options: Options,
    workload: &[Write],
    flush_every: usize,
    mark: usize,
) -> CrashRun {
    let mut run = CrashRun {
        acked: 0,
        settled: None,
        ops_at_mark: 0,
    };
    let Ok(db) = Db::open_with_fs(dir, options, Arc::new(fs.clone())) else {
        return run;
    };
    for (n, (k, v)) in workload.iter().enumerate() {
        if n == mark {
            run.ops_at_mark = fs.ops();
        }
        let r = match v {
            Some(v) => db.put(k, v),
            None => db.delete(k),
        };
        if r.is_err() {
            break;
        }
        run.acked = n + 1;
        if (n + 1) % flush_every == 0 && db.flush().is_err() {
            break;
        }
    }
    if run.acked == workload.len() && db.flush().is_ok() && db.wait_for_background_work().is_ok() {
        run.settled = Some(db.stats());
    }
    run
}

/// What a store holds after the first `writes` writes of `workload`.
pub fn contents_after(workload: &[Write], writes: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (k, v) in workload.iter().take(writes).cloned() {
        match v {
            Some(v) => m.insert(k, v),
            None => m.remove(&k),
        };
    }
    m
}
