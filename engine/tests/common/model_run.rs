//! A store driven beside a model: puts and deletes of numbered keys,
//! snapshots held with what each saw, and a check of every answer (gets
//! and full scans, of the store and of each snapshot) against the model.

use bloomlsm::{Db, Options, Snapshot};

use super::narrow_tree::narrow_tree_options;
use super::{Model, pairs, scratch_dir};

/// The options of a deep store of narrow tables ([`narrow_tree_options`])
/// with a size ratio of 3, writes slowed at 4 L0 tables and stopped at 8.
pub fn deep_narrow_options(background_work: bool) -> Options {
    Options {
        level_size_ratio: 3,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        background_work,
        ..narrow_tree_options()
    }
}

/// The store, the model, and the snapshots held with what each saw.
pub struct ModelRun {
    pub dir: tempfile::TempDir,
    pub options: Options,
    /// `None` only while closed.
    pub db: Option<Db>,
    pub model: Model,
    pub snapshots: Vec<(Snapshot, Model)>,
    /// The key of number `i`.
    key: fn(u64) -> Vec<u8>,
    /// Numbers `0..universe` are the keys `check` asks for (include some
    /// never written).
    universe: u64,
    writes: u64,
    steps: u64,
    /// Table bytes written by the opens before this one.
    bytes_written_before: u64,
}

impl ModelRun {
    pub fn new(options: Options, key: fn(u64) -> Vec<u8>, universe: u64) -> Self {
        let dir = scratch_dir();
        let db = Db::open(dir.path(), options.clone()).unwrap();
        Self {
            dir,
            options,
            db: Some(db),
            model: Model::new(),
            snapshots: Vec::new(),
            key,
            universe,
            writes: 0,
            steps: 0,
            bytes_written_before: 0,
        }
    }

    pub fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    pub fn key(&self, i: u64) -> Vec<u8> {
        (self.key)(i)
    }

    /// Puts a 40-byte value unique to this write.
    pub fn put(&mut self, i: u64) {
        self.writes += 1;
        let mut value = format!("v{}-{i}-", self.writes).into_bytes();
        value.resize(40, b'.');
        self.db().put(&self.key(i), &value).unwrap();
        self.model.insert(self.key(i), value);
    }

    pub fn delete(&mut self, i: u64) {
        self.db().delete(&self.key(i)).unwrap();
        self.model.remove(&self.key(i));
    }

    /// Every answer of the store and of each held snapshot against the
    /// model: a full scan each, and gets of a rotating third of the keys
    /// (all of them when `all`), deleted and never-written ones included.
    pub fn check(&mut self, what: &str, all: bool) {
        self.steps += 1;
        let step = self.steps;
        let chosen = |i: u64| all || (i + step).is_multiple_of(3);
        let db = self.db();
        let scanned: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(scanned == self.model, "step {step} ({what}): scan");
        for i in (0..self.universe).filter(|&i| chosen(i)) {
            let k = self.key(i);
            assert_eq!(
                db.get(&k).unwrap(),
                self.model.get(&k).cloned(),
                "step {step} ({what}): get {i}"
            );
        }
        for (n, (snapshot, seen)) in self.snapshots.iter().enumerate() {
            let scanned: Model = pairs(snapshot.scan::<&[u8], _>(..).unwrap())
                .into_iter()
                .collect();
            assert!(scanned == *seen, "step {step} ({what}): snapshot {n} scan");
            for i in (0..self.universe).filter(|&i| chosen(i)) {
                let k = self.key(i);
                assert_eq!(
                    snapshot.get(&k).unwrap(),
                    seen.get(&k).cloned(),
                    "step {step} ({what}): snapshot {n} get {i}"
                );
            }
        }
    }

    pub fn take_snapshot(&mut self) {
        let snapshot = self.db().snapshot();
        self.snapshots.push((snapshot, self.model.clone()));
    }

    pub fn release_oldest_snapshot(&mut self) {
        if !self.snapshots.is_empty() {
            self.snapshots.remove(0);
        }
    }

    /// Drops every snapshot and closes the store cleanly.
    pub fn close(&mut self) {
        self.snapshots.clear();
        let db = self.db.take().unwrap();
        self.bytes_written_before += db.stats().bytes_written;
        db.close().unwrap();
    }

    /// Table bytes written (flushes, compactions, rebuilds) over every
    /// open of the run.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written_before + self.db.as_ref().map_or(0, |db| db.stats().bytes_written)
    }

    /// Opens the store closed by `close` with the run's options.
    pub fn open(&mut self) {
        self.db = Some(Db::open(self.dir.path(), self.options.clone()).unwrap());
    }

    pub fn reopen(&mut self) {
        self.close();
        self.open();
    }
}
