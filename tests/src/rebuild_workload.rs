//! The history of `apply_history_write` with a filter rebuild every so
//! many writes, run through a `FaultFs` until its injected failure: the
//! scaffolding of the tests that crash at every operation of rebuilds that
//! append filters to the tables' own files or copy the tables.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, FilterPolicy, Options};

use crate::apply_history_write;

/// How a run went.
#[derive(Debug, Default)]
pub struct RebuildRun {
    /// Writes acknowledged.
    pub acked: u64,
    /// The operations each rebuild took (`fs.ops()` before and after).
    pub rebuilds: Vec<Range<u64>>,
    /// Tables rebuilds appended to (file kept and grown).
    pub appended: usize,
    /// Tables rebuilds copied (file gone).
    pub copied: usize,
}

/// (name, size) of every table file in `dir`.
pub fn table_sizes(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect()
}

/// Writes `writes` of the history into a store opened with `options` on
/// `fs`, with `rebuild_filters(policy(round))` before every
/// `rebuild_every`-th write, until the first error.
pub fn run_with_rebuilds(
    dir: &Path,
    fs: &FaultFs,
    options: Options,
    writes: u64,
    rebuild_every: u64,
    policy: impl Fn(u64) -> FilterPolicy,
) -> RebuildRun {
    let mut run = RebuildRun::default();
    let Ok(db) = Db::open_with_fs(dir, options, Arc::new(fs.clone())) else {
        return run;
    };
    for i in 0..writes {
        if i > 0 && i % rebuild_every == 0 {
            let before = table_sizes(dir);
            let start = fs.ops();
            if db.rebuild_filters(policy(i / rebuild_every)).is_err() {
                break;
            }
            run.rebuilds.push(start..fs.ops());
            let after = table_sizes(dir);
            for (name, size) in &before {
                match after.get(name) {
                    Some(grown) if grown > size => run.appended += 1,
                    None => run.copied += 1,
                    Some(_) => {}
                }
            }
        }
        if apply_history_write(&db, i).is_err() {
            break;
        }
        run.acked = i + 1;
    }
    run
}
