//! A later session: a read-write open on `FaultFs` armed to fail every
//! operation from a crash point on, then commits (puts, deletes, batches,
//! favouring keys whose writes the first session's damage dropped),
//! explicit flushes (compactions follow inline on the narrow tree),
//! snapshots held and read, and a clean close, up to the first failure;
//! every answer read while the store runs is checked against the model.

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, Snapshot, SyncMode, WalCut};

use crate::common::{Model, Rng};

use super::check::check_reads;
use super::history::{Origins, draw_commit};

/// What a session did: `models[i]` is the store after its first `i`
/// commits (`models[0]` what it opened with).
pub struct Session {
    pub sync: SyncMode,
    /// The open returned `Ok`, with this cut and these salvaged headers.
    pub opened: Option<(Option<WalCut>, Vec<std::path::PathBuf>, u64)>,
    pub models: Vec<Model>,
    /// Commits that returned `Ok`.
    pub acked: usize,
    /// Commits before the last flush that returned `Ok`: durable in
    /// either sync mode.
    pub flushed: usize,
    pub closed: bool,
    /// Operations its open made (when it returned `Ok`).
    pub open_ops: u64,
    /// The first sequence number of each commit tried (`models[i + 1]`
    /// is the store after commit `i`).
    pub first_seqs: Vec<u64>,
}

impl Session {
    /// The commits the recovered store may hold: at least every durable
    /// one, at most one past the acknowledged ones (a write that failed
    /// may have reached the disk).
    pub fn bounds(&self) -> (usize, usize) {
        let all = self.models.len() - 1;
        let least = match self.sync {
            SyncMode::Always => self.acked,
            _ if self.closed => all,
            _ => self.flushed,
        };
        (least, (self.acked + 1).min(all))
    }
}

pub struct Plan<'a> {
    pub number: u32,
    pub options: Options,
    pub crash_at: u64,
    pub commits: usize,
    pub favoured: &'a [u64],
}

pub fn run(
    dir: &std::path::Path,
    fs: &FaultFs,
    plan: &Plan,
    base: &Model,
    rng: &mut Rng,
    origins: &mut Origins,
) -> Session {
    let ops_before = fs.ops();
    fs.fail_from_op(ops_before + plan.crash_at);
    let mut s = Session {
        sync: plan.options.sync,
        opened: None,
        models: vec![base.clone()],
        acked: 0,
        flushed: 0,
        closed: false,
        open_ops: 0,
        first_seqs: Vec::new(),
    };
    let Ok(db) = Db::open_with_fs(dir, plan.options.clone(), Arc::new(fs.clone())) else {
        return s;
    };
    s.open_ops = fs.ops() - ops_before;
    let stats = db.stats();
    s.opened = Some((
        stats.wal_replay_cut,
        stats.wal_headers_salvaged,
        db.last_sequence(),
    ));
    let what = format!("session {} open", plan.number);
    check_reads(&db, base, &[], &what, origins);
    let mut model = base.clone();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut failed = false;
    for n in 0..plan.commits {
        match rng.below(100) {
            0..=5 => {
                if db.flush().is_err() {
                    failed = true;
                    break;
                }
                s.flushed = s.acked;
            }
            6..=9 => snapshots.push((db.snapshot(), model.clone())),
            10..=11 if !snapshots.is_empty() => {
                snapshots.remove(0);
            }
            12..=15 => {
                let what = format!("session {} after {n} steps", plan.number);
                check_reads(&db, &model, &snapshots, &what, origins);
            }
            _ => {
                let c = draw_commit(rng, plan.number, n, plan.favoured, origins);
                c.apply(&mut model);
                s.models.push(model.clone());
                s.first_seqs.push(db.last_sequence() + 1);
                if c.write(&db).is_err() {
                    failed = true;
                    break;
                }
                s.acked += 1;
            }
        }
    }
    if !failed {
        let what = format!("session {} end", plan.number);
        check_reads(&db, &model, &snapshots, &what, origins);
        drop(snapshots);
        s.closed = db.close().is_ok();
    }
    s
}
