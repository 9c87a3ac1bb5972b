//! Writes and their model: commits (a put, a delete, or a batch of both)
//! of numbered keys, each value unique to its write, so a value read back
//! names the write it came from; and the first session, which leaves a
//! process-kill image of a store with several live WALs.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Options, SyncMode, WriteBatch};

use crate::common::narrow_tree::narrow_tree_options;
use crate::common::{Model, Rng};

/// Keys `0..UNIVERSE` are written and read; some never are.
pub const UNIVERSE: u64 = 150;

/// Key number `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("pk{i:04}").into_bytes()
}

#[derive(Clone, Debug)]
pub enum Op {
    Put(u64, Vec<u8>),
    Delete(u64),
}

/// One write: one WAL record, its ops numbered in order.
#[derive(Clone, Debug)]
pub struct Commit(pub Vec<Op>);

impl Commit {
    pub fn apply(&self, model: &mut Model) {
        for op in &self.0 {
            match op {
                Op::Put(k, v) => model.insert(key(*k), v.clone()),
                Op::Delete(k) => model.remove(&key(*k)),
            };
        }
    }

    pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(|op| match op {
            Op::Put(k, _) | Op::Delete(k) => *k,
        })
    }

    /// Writes it as `put`, `delete` or one batch.
    pub fn write(&self, db: &Db) -> bloomlsm::Result<()> {
        match &self.0[..] {
            [Op::Put(k, v)] => db.put(&key(*k), v),
            [Op::Delete(k)] => db.delete(&key(*k)),
            ops => {
                let mut batch = WriteBatch::new();
                for op in ops {
                    match op {
                        Op::Put(k, v) => batch.put(&key(*k), v),
                        Op::Delete(k) => batch.delete(&key(*k)),
                    };
                }
                db.write(batch)
            }
        }
    }
}

/// Every value written, naming its write ("session 1 commit 12"), so a
/// wrong answer says which write came back.
#[derive(Default)]
pub struct Origins(pub HashMap<Vec<u8>, String>);

impl Origins {
    /// Which write each key whose value differs from `want` came from.
    pub fn explain(&self, got: &Model, want: &Model) -> String {
        let keys: BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
        let mut out = Vec::new();
        for k in keys {
            let (g, w) = (got.get(k), want.get(k));
            if g != w {
                let name = |v: Option<&Vec<u8>>| {
                    v.map_or("absent".to_string(), |v| {
                        self.0.get(v).cloned().unwrap_or_else(|| "unknown".into())
                    })
                };
                out.push(format!(
                    "{}: got {}, want {}",
                    String::from_utf8_lossy(k),
                    name(g),
                    name(w)
                ));
            }
        }
        let n = out.len();
        out.truncate(6);
        format!("{n} keys differ: {out:?}")
    }
}

/// Draws commit `n` of session `session`; keys from `favoured` half the
/// time when it is not empty (keys whose writes a cut dropped).
pub fn draw_commit(
    rng: &mut Rng,
    session: u32,
    n: usize,
    favoured: &[u64],
    origins: &mut Origins,
) -> Commit {
    let ops = if rng.below(5) == 0 {
        2 + rng.below(4) as usize
    } else {
        1
    };
    let mut out = Vec::new();
    for j in 0..ops {
        let k = if !favoured.is_empty() && rng.below(2) == 0 {
            *rng.pick(favoured)
        } else {
            rng.below(UNIVERSE - 10)
        };
        if rng.below(4) == 0 {
            out.push(Op::Delete(k));
        } else {
            let mut v = format!("s{session}c{n}o{j}-").into_bytes();
            v.resize(20 + rng.below(30) as usize, b'.');
            origins
                .0
                .insert(v.clone(), format!("session {session} commit {n}"));
            out.push(Op::Put(k, v));
        }
    }
    Commit(out)
}

/// The first session's store as a process kill left it.
pub struct Image {
    pub dir: tempfile::TempDir,
    pub commits: Vec<Commit>,
    /// The first sequence number of each commit.
    pub first_seqs: Vec<u64>,
}

/// Options of a deep tree of narrow tables.
pub fn narrow(sync: SyncMode, background_work: bool) -> Options {
    Options {
        sync,
        level_size_ratio: 3,
        max_immutable_memtables: 4,
        background_work,
        ..narrow_tree_options()
    }
}

/// The store's WAL files, oldest first.
pub fn wal_names(dir: &Path) -> Vec<String> {
    crate::common::listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .collect()
}

/// A history of `before_hold` commits with flushes and compactions on a
/// deep tree of narrow tables, snapshots held; then, flushes held, more
/// commits until `wals` WAL files are live; then a copy of the store's
/// files, as a process kill there leaves them.
pub fn first_session(
    rng: &mut Rng,
    sync: SyncMode,
    before_hold: usize,
    wals: usize,
    origins: &mut Origins,
) -> Image {
    let live = crate::common::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(live.path(), narrow(sync, true), Arc::new(fs.clone())).unwrap();
    let mut commits = Vec::new();
    let mut first_seqs = Vec::new();
    let mut snapshots = Vec::new();
    let mut commit = |db: &Db, rng: &mut Rng, commits: &mut Vec<Commit>| {
        let c = draw_commit(rng, 1, commits.len(), &[], origins);
        first_seqs.push(db.last_sequence() + 1);
        c.write(db).unwrap();
        commits.push(c);
    };
    for i in 0..before_hold {
        commit(&db, rng, &mut commits);
        if i % 97 == 13 {
            snapshots.push(db.snapshot());
        }
    }
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.compactions > 0, "{stats:?}");
    drop(snapshots);
    db.close().unwrap();
    // Larger memtables now, for WALs of several pages.
    let options = Options {
        memtable_bytes: *rng.pick(&[2048, 8192, 16384]),
        ..narrow(sync, true)
    };
    let db = Db::open_with_fs(live.path(), options, Arc::new(fs.clone())).unwrap();
    let snapshot = db.snapshot();
    fs.set_hold_table_files(true);
    let mut more = 0;
    while (more == 0 || wal_names(live.path()).len() < wals) && more < 1500 {
        commit(&db, rng, &mut commits);
        more += 1;
    }
    // A few more into the newest WAL, so it holds records too (or not).
    for _ in 0..rng.below(4) {
        commit(&db, rng, &mut commits);
    }
    let image = crate::common::scratch_dir();
    for name in crate::common::listing(live.path()) {
        std::fs::copy(live.path().join(&name), image.path().join(&name)).unwrap();
    }
    fs.set_hold_table_files(false);
    drop(snapshot);
    db.close().unwrap();
    Image {
        dir: image,
        commits,
        first_seqs,
    }
}

/// The model after `commits[..n]`.
pub fn model_of(commits: &[Commit], n: usize) -> Model {
    let mut m = Model::new();
    for c in &commits[..n] {
        c.apply(&mut m);
    }
    m
}
