//! One seeded run: a store driven beside a `BTreeMap` model through
//! thousands of operations, closed and opened again and again with new
//! options (`draw`), now and then through refused opens (`refusals`) and
//! read-only opens, with a reader thread beside the writer (`readers`).

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use super::draw::{self, Work};
use super::filters_applied;
use super::keys::{KEYS, UNIVERSE, beside, key, value};
use super::readers::{self, Held, Shared, expected};
use super::refusals;
use crate::common::held_iter::HeldIter;
use crate::common::tree_shape::{TreeShape, check_tree_shape};
use crate::common::{Model, Rng, read_manifest};

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, FilterPolicy, Options, WriteBatch};

/// What a run did, for the report.
#[derive(Default, Debug, Clone)]
pub struct Counts {
    pub ops: u64,
    pub puts: u64,
    pub deletes: u64,
    pub absent_deletes: u64,
    pub batches: u64,
    pub refused_writes: u64,
    pub gets: u64,
    pub scans: u64,
    pub snapshots: u64,
    pub flushes: u64,
    pub rebuilds: u64,
    pub reopens: u64,
    pub crash_ends: u64,
    pub read_only_opens: u64,
    pub refused_opens: u64,
    pub too_few_levels: u64,
    pub full_checks: u64,
    /// Tables whose filter was checked to be the policy's and kind's.
    pub filters_checked: u64,
    pub reader_reads: u64,
    /// The most levels (L0 included) the tree spanned at any close.
    pub max_depth: usize,
    /// The most levels holding a table at any close.
    pub max_levels_in_use: usize,
}

pub struct Run {
    seed: u64,
    rng: Rng,
    dir: tempfile::TempDir,
    work: Work,
    direct_ok: bool,
    options: Options,
    fs: FaultFs,
    db: Option<Arc<Db>>,
    model: Model,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    iters: Vec<HeldIter>,
    writes: u64,
    step: u64,
    /// The fewest levels the store on disk allows (its deepest table's
    /// level plus one), as of the last close.
    depth: usize,
    /// The most levels an open of this run has (or `depth`, if more).
    levels_cap: usize,
    /// The manifest's next file number when the store was last opened:
    /// tables numbered from it on were written by this open.
    first_number: u64,
    /// The filter policies in force during this open (the options', then
    /// each `rebuild_filters`').
    policies: Vec<FilterPolicy>,
    /// An iterator and a snapshot of an earlier open, kept past its close
    /// and dropped at some step of a later open (the tables they held must
    /// not take a file of the new store with them).
    stale: Vec<(Option<HeldIter>, Option<Arc<Held>>)>,
    pub counts: Counts,
}

type Writes = Vec<(u64, Option<Vec<u8>>)>;

impl Run {
    pub fn new(seed: u64, work: Work, dir: tempfile::TempDir) -> Self {
        let direct_ok = crate::common::direct_reads_work(dir.path());
        let mut rng = Rng(seed);
        let levels_cap = *rng.pick(&[6, 7, 8, 10]);
        let options = draw::options(&mut rng, work, direct_ok, 2, levels_cap);
        let mut run = Self {
            seed,
            rng,
            dir,
            work,
            direct_ok,
            options,
            fs: FaultFs::new(),
            db: None,
            model: Model::new(),
            shared: Arc::new(Shared::default()),
            reader: None,
            iters: Vec::new(),
            writes: 0,
            step: 0,
            depth: 1,
            levels_cap,
            first_number: 0,
            policies: Vec::new(),
            stale: Vec::new(),
            counts: Counts::default(),
        };
        run.open();
        run
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn at(&self) -> String {
        let tables: Vec<u64> = self
            .db
            .as_ref()
            .map(|db| db.stats().levels.iter().map(|l| l.tables).collect())
            .unwrap_or_default();
        format!(
            "seed {} step {} (reopens {}), tables per level {tables:?}, options {:?}",
            self.seed,
            self.step,
            self.counts.reopens,
            self.db.as_ref().map(|db| db.options())
        )
    }

    /// Opens the store with `self.options` on a new file system (which,
    /// now and then, cannot append: filter rebuilds copy their tables),
    /// starting a reader thread beside it.
    fn open(&mut self) {
        self.first_number = if self.dir.path().join("MANIFEST").exists() {
            read_manifest(self.dir.path()).counters[0]
        } else {
            0
        };
        self.policies = vec![self.options.filter_policy.clone()];
        self.fs = FaultFs::new();
        self.fs.set_refuse_appends(self.rng.below(4) == 0);
        let db = Db::open_with_fs(
            self.dir.path(),
            self.options.clone(),
            Arc::new(self.fs.clone()),
        )
        .unwrap_or_else(|e| panic!("open: {e}\nseed {} options {:?}", self.seed, self.options));
        let reported = db.options();
        assert!(
            reported == self.options,
            "the store reports other options than it was opened with: {reported:?}\nseed {}",
            self.seed
        );
        let db = Arc::new(db);
        if self.options.background_work || self.rng.below(2) == 0 {
            let (db, shared, seed) = (Arc::clone(&db), Arc::clone(&self.shared), self.seed);
            self.reader = Some(std::thread::spawn(move || {
                readers::read_loop(db, shared, seed)
            }));
        }
        self.db = Some(db);
    }

    fn stop_reader(&mut self) {
        if let Some(reader) = self.reader.take() {
            self.shared.stop.store(true, Ordering::Release);
            if let Err(panic) = reader.join() {
                eprintln!("reader thread failed: {}", self.at());
                std::panic::resume_unwind(panic);
            }
            self.shared.stop.store(false, Ordering::Release);
        }
    }

    fn snapshots(&self) -> Vec<Arc<Held>> {
        self.shared.snapshots.lock().clone()
    }

    // ---- writes ----

    fn pick_key(&mut self) -> u64 {
        if self.rng.below(3) == 0 {
            self.rng.below(KEYS / 10) * 10 + self.seed % 10
        } else {
            self.rng.below(KEYS)
        }
    }

    fn new_value(&mut self, i: u64) -> Vec<u8> {
        self.writes += 1;
        let pad = if self.rng.below(30) == 0 {
            0
        } else {
            1 + self.rng.below(72)
        };
        value(self.writes, i, pad)
    }

    /// Writes `writes` (one put or delete, or a batch), checking a refusal
    /// against the limits of the options the store was opened with.
    fn write(&mut self, writes: Writes) {
        let long_key = writes
            .iter()
            .any(|(i, v)| v.is_some() && key(*i).len() > self.options.max_key_bytes);
        let big_value = writes.iter().any(|(_, v)| {
            v.as_ref()
                .is_some_and(|v| v.len() > self.options.max_value_bytes)
        });
        let result = match writes.as_slice() {
            [(i, Some(v))] => self.db().put(&key(*i), v),
            [(i, None)] => self.db().delete(&key(*i)),
            _ => {
                let mut batch = WriteBatch::new();
                for (i, v) in &writes {
                    match v {
                        Some(v) => batch.put(&key(*i), v),
                        None => batch.delete(&key(*i)),
                    };
                }
                self.db().write(batch)
            }
        };
        match result {
            Ok(()) => {
                assert!(
                    !long_key && !big_value,
                    "a write over the limits was taken\n{}",
                    self.at()
                );
                for (i, v) in &writes {
                    match v {
                        Some(v) => self.model.insert(key(*i), v.clone()),
                        None => self.model.remove(&key(*i)),
                    };
                }
                for (i, _) in &writes {
                    self.check_get(&key(*i));
                }
            }
            Err(Error::InvalidKey { .. }) if long_key => self.counts.refused_writes += 1,
            Err(Error::ValueTooLarge { .. }) if big_value => self.counts.refused_writes += 1,
            Err(e) => panic!("write {writes:?}: {e}\n{}", self.at()),
        }
    }

    fn put_one(&mut self) {
        let i = self.pick_key();
        let v = self.new_value(i);
        self.counts.puts += 1;
        self.write(vec![(i, Some(v))]);
    }

    fn delete_existing(&mut self) {
        let n = self.model.len() as u64;
        if n == 0 {
            return self.put_one();
        }
        let k = self
            .model
            .keys()
            .nth(self.rng.below(n) as usize)
            .unwrap()
            .clone();
        self.counts.deletes += 1;
        // Keys are `key(i)`; find i by its number in the value or by search.
        let i = (0..KEYS).find(|&i| key(i) == k).unwrap();
        self.write(vec![(i, None)]);
    }

    /// A delete of a key the store does not hold: a live key's neighbour,
    /// a number past the written ones, or a written key now absent.
    fn delete_absent(&mut self) {
        self.counts.absent_deletes += 1;
        let i = self.rng.below(UNIVERSE);
        let k = match self.rng.below(3) {
            0 => beside(i),
            1 => key(KEYS + i % (UNIVERSE - KEYS)),
            _ => {
                let k = key(i % KEYS);
                if self.model.contains_key(&k) {
                    beside(i)
                } else {
                    k
                }
            }
        };
        self.db().delete(&k).unwrap();
        self.model.remove(&k);
        self.check_get(&k);
    }

    /// A batch of 2 to 12 writes, now and then writing one key twice (the
    /// last write of a key wins).
    fn batch(&mut self) {
        self.counts.batches += 1;
        let n = 2 + self.rng.below(11);
        let mut writes: Writes = Vec::new();
        for _ in 0..n {
            let i = if writes.is_empty() || self.rng.below(3) != 0 {
                self.pick_key()
            } else {
                self.rng.pick(&writes).0
            };
            let v = (self.rng.below(5) >= 2).then(|| self.new_value(i));
            writes.push((i, v));
        }
        self.write(writes);
    }

    // ---- reads ----

    fn check_get(&self, k: &[u8]) {
        let got = self.db().get(k).unwrap();
        let want = self.model.get(k);
        if got.as_ref() != want {
            let trace = self.db().get_traced(k).map(|(_, t)| t.steps);
            panic!(
                "get {:?}: got {:?}, want {:?}\n{}\ntrace {trace:?}",
                String::from_utf8_lossy(k),
                got.map(|v| String::from_utf8_lossy(&v).into_owned()),
                want.map(|v| String::from_utf8_lossy(v).into_owned()),
                self.at()
            );
        }
    }

    fn random_key(&mut self) -> Vec<u8> {
        let i = self.rng.below(UNIVERSE);
        if self.rng.below(5) == 0 {
            beside(i)
        } else {
            key(i)
        }
    }

    fn gets(&mut self) {
        for _ in 0..6 {
            let k = self.random_key();
            self.check_get(&k);
            self.counts.gets += 1;
        }
        let snaps = self.snapshots();
        if !snaps.is_empty() {
            let h = &snaps[self.rng.below(snaps.len() as u64) as usize];
            let k = self.random_key();
            assert_eq!(
                h.snapshot.get(&k).unwrap().as_ref(),
                h.model.get(&k),
                "get {:?} at the snapshot of step {}\n{}",
                String::from_utf8_lossy(&k),
                h.taken,
                self.at()
            );
        }
    }

    fn scan(&mut self) {
        self.counts.scans += 1;
        let (lo, hi) = readers::bounds(&mut self.rng);
        let snaps = self.snapshots();
        let (got, want, what) = if !snaps.is_empty() && self.rng.below(3) == 0 {
            let h = &snaps[self.rng.below(snaps.len() as u64) as usize];
            let got = readers::collected(h.snapshot.scan((lo.clone(), hi.clone())));
            (
                got,
                expected(&h.model, &lo, &hi),
                format!("at the snapshot of step {}", h.taken),
            )
        } else {
            let got = readers::collected(self.db().scan((lo.clone(), hi.clone())));
            (
                got,
                expected(&self.model, &lo, &hi),
                "of the store".to_string(),
            )
        };
        if got != want {
            let missing: Vec<_> = want.iter().filter(|p| !got.contains(p)).take(4).collect();
            let extra: Vec<_> = got.iter().filter(|p| !want.contains(p)).take(4).collect();
            panic!(
                "scan {lo:?}..{hi:?} {what}: {} pairs, want {}; missing {missing:?}, extra {extra:?}\n{}",
                got.len(),
                want.len(),
                self.at()
            );
        }
    }

    fn take_snapshot(&mut self) {
        self.counts.snapshots += 1;
        let held = Arc::new(Held {
            snapshot: self.db().snapshot(),
            model: self.model.clone(),
            taken: self.step,
        });
        let mut snaps = self.shared.snapshots.lock();
        snaps.push(held);
        if snaps.len() > 5 {
            snaps.remove(0);
        }
    }

    fn release_snapshot(&mut self) {
        let mut snaps = self.shared.snapshots.lock();
        if !snaps.is_empty() {
            // The oldest, often: its release makes cleanups due.
            let n = if self.rng.below(2) == 0 {
                0
            } else {
                self.rng.below(snaps.len() as u64) as usize
            };
            snaps.remove(n);
        }
    }

    fn open_iter(&mut self) {
        let (lo, hi) = readers::bounds(&mut self.rng);
        let snaps = self.snapshots();
        let (it, want, what) = if !snaps.is_empty() && self.rng.below(2) == 0 {
            let h = &snaps[self.rng.below(snaps.len() as u64) as usize];
            (
                h.snapshot.scan((lo.clone(), hi.clone())).unwrap(),
                expected(&h.model, &lo, &hi),
                format!(
                    "iterator of the snapshot of step {} over {lo:?}..{hi:?}",
                    h.taken
                ),
            )
        } else {
            (
                self.db().scan((lo.clone(), hi.clone())).unwrap(),
                expected(&self.model, &lo, &hi),
                format!("iterator opened at step {} over {lo:?}..{hi:?}", self.step),
            )
        };
        self.iters.push(HeldIter::new(it, want, what));
        if self.iters.len() > 4 {
            self.iters.remove(0);
        }
    }

    fn advance_iters(&mut self) {
        let at = self.at();
        let mut n = 1 + self.rng.below(8);
        self.iters.retain_mut(|h| {
            let finished = h.read(n, &at);
            n += 2;
            !finished
        });
    }

    /// Every key (written, never written, beside) and a full scan, of the
    /// store and of each held snapshot.
    fn check_all(&mut self, what: &str) {
        self.counts.full_checks += 1;
        for i in 0..UNIVERSE {
            self.check_get(&key(i));
            if i % 5 == 0 {
                self.check_get(&beside(i));
            }
        }
        let scanned: Vec<_> = self
            .db()
            .scan::<&[u8], _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let want = expected(&self.model, &Bound::Unbounded, &Bound::Unbounded);
        assert!(scanned == want, "{what}: scan\n{}", self.at());
        for h in self.snapshots() {
            for i in 0..UNIVERSE {
                assert_eq!(
                    h.snapshot.get(&key(i)).unwrap().as_ref(),
                    h.model.get(&key(i)),
                    "{what}: get {i} at the snapshot of step {}\n{}",
                    h.taken,
                    self.at()
                );
            }
            let scanned: Model = h
                .snapshot
                .scan::<&[u8], _>(..)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert!(
                scanned == h.model,
                "{what}: scan at the snapshot of step {}\n{}",
                h.taken,
                self.at()
            );
        }
    }

    // ---- background work and filters ----

    fn flush(&mut self) {
        self.counts.flushes += 1;
        self.db().flush().unwrap();
    }

    /// A filter rebuild to a new policy while snapshots are held (and,
    /// with background work, while compactions and rebalancing run).
    fn rebuild_filters(&mut self) {
        self.counts.rebuilds += 1;
        let policy = draw::policy(&mut self.rng);
        self.db()
            .rebuild_filters(policy.clone())
            .unwrap_or_else(|e| panic!("rebuild_filters({policy:?}): {e}\n{}", self.at()));
        assert!(
            self.db().options().filter_policy == policy,
            "rebuild_filters({policy:?}) left the store reporting {:?}\n{}",
            self.db().options().filter_policy,
            self.at()
        );
        self.policies.push(policy.clone());
        // Every live table now has the new policy's filter (the rebuild's
        // second pass caught the tables flushed during its first; every
        // flush and compaction since planned at the new policy).
        if let Some(bits) = filters_applied::allowed_bits(std::slice::from_ref(&policy)) {
            let at = format!("after rebuild_filters({policy:?}): {}", self.at());
            self.counts.filters_checked +=
                filters_applied::check(self.dir.path(), 0, self.options.filter_kind, &bits, &at);
        }
        if self.rng.below(3) == 0 {
            self.check_all(&format!("after rebuild_filters({policy:?})"));
        } else {
            self.gets();
        }
    }

    fn settle(&mut self) {
        if self.options.background_work && self.rng.below(2) == 0 {
            self.db().wait_for_background_work().unwrap();
        }
        self.check_all("checkpoint");
    }

    // ---- closes and opens ----

    /// Ends the open store: a clean close, a drop, or a close whose first
    /// fsync fails (its WALs left unsealed, as a crash leaves them, while
    /// every byte written stays). Then reads the tree's shape from the
    /// manifest.
    fn end_store(&mut self) {
        self.stop_reader();
        self.counts.reader_reads = self.shared.reads.load(Ordering::Relaxed);
        if self.rng.below(3) == 0 {
            let snapshot = self.shared.snapshots.lock().pop();
            self.stale.push((self.iters.pop(), snapshot));
        }
        self.iters.clear();
        self.shared.snapshots.lock().clear();
        let db = Arc::try_unwrap(self.db.take().unwrap()).unwrap();
        match self.rng.below(10) {
            0..=6 => db.close().unwrap(),
            7 => drop(db),
            _ => {
                self.counts.crash_ends += 1;
                if self.options.background_work {
                    db.wait_for_background_work().unwrap();
                }
                // A background step may take the failing operation instead:
                // the close may then succeed, and writes stopped; either way
                // every write acknowledged is in the files.
                self.fs.fail_only_op(self.fs.ops());
                let _ = db.close();
            }
        }
        let at = format!(
            "seed {} step {} at a close, options {:?}",
            self.seed, self.step, self.options
        );
        let TreeShape {
            fewest_levels: depth,
            levels_in_use: in_use,
        } = check_tree_shape(self.dir.path(), self.options.num_levels, &at);
        if let Some(bits) = filters_applied::allowed_bits(&self.policies) {
            self.counts.filters_checked += filters_applied::check(
                self.dir.path(),
                self.first_number,
                self.options.filter_kind,
                &bits,
                &format!("{at}, policies {:?}", self.policies),
            );
        }
        self.depth = depth;
        self.counts.max_depth = self.counts.max_depth.max(depth);
        self.counts.max_levels_in_use = self.counts.max_levels_in_use.max(in_use);
    }

    /// Closes the store and opens it again with new options; on the way,
    /// now and then, opens that must be refused and a read-only open.
    fn reopen(&mut self) {
        self.end_store();
        self.counts.reopens += 1;
        let next = draw::options(
            &mut self.rng,
            self.work,
            self.direct_ok,
            self.depth,
            self.levels_cap,
        );
        if self.rng.below(3) == 0 {
            for _ in 0..1 + self.rng.below(3) {
                let (bad, expect, what) = refusals::bad_options(&mut self.rng, &next, self.depth);
                if matches!(expect, refusals::Expect::TooFewLevels) {
                    self.counts.too_few_levels += 1;
                }
                let read_only = self.rng.below(3) == 0;
                refusals::attempt(self.dir.path(), bad, &expect, read_only, &what);
                self.counts.refused_opens += 1;
            }
        }
        if self.rng.below(4) == 0 {
            self.read_only_interlude();
        }
        self.options = next;
        self.open();
        self.check_all("after a reopen");
        self.check_stale();
    }

    /// Reads through the iterators and snapshots of closed opens fail with
    /// `Error::Closed` (an iterator may first yield what it must, never
    /// another pair).
    fn check_stale(&mut self) {
        let at = self.at();
        for (it, snap) in &mut self.stale {
            // Half the time left unread: it holds its view (and the old
            // open's tables) until it is dropped, some steps later.
            if self.rng.below(2) == 0
                && let Some(mut h) = it.take()
            {
                loop {
                    match h.it.next() {
                        None => {
                            assert_eq!(h.at, h.want.len(), "{at}: {} after its close", h.what);
                            break;
                        }
                        Some(Ok(pair)) => {
                            assert!(
                                h.want.get(h.at) == Some(&pair),
                                "{at}: {} after its close: item {}",
                                h.what,
                                h.at
                            );
                            h.at += 1;
                        }
                        Some(Err(Error::Closed)) => {
                            assert!(h.it.next().is_none(), "{at}: {} after Closed", h.what);
                            break;
                        }
                        Some(Err(e)) => panic!("{at}: {} after its close: {e}", h.what),
                    }
                }
            }
            if let Some(h) = snap {
                assert!(
                    matches!(h.snapshot.get(&key(0)), Err(Error::Closed)),
                    "{at}"
                );
                assert!(
                    matches!(h.snapshot.scan::<&[u8], _>(..), Err(Error::Closed)),
                    "{at}"
                );
            }
        }
    }

    /// A read-only open with options of its own: every answer the model's,
    /// every change refused with `Error::ReadOnly`.
    fn read_only_interlude(&mut self) {
        self.counts.read_only_opens += 1;
        let options = draw::options(
            &mut self.rng,
            self.work,
            self.direct_ok,
            self.depth,
            self.levels_cap,
        );
        let db = Db::open_read_only(self.dir.path(), options.clone())
            .unwrap_or_else(|e| panic!("read-only open: {e}\nseed {} {options:?}", self.seed));
        let db = Arc::new(db);
        self.db = Some(Arc::clone(&db));
        let snapshot = db.snapshot();
        self.shared.snapshots.lock().push(Arc::new(Held {
            snapshot,
            model: self.model.clone(),
            taken: self.step,
        }));
        self.check_all("read-only");
        let refused = [
            db.put(&key(0), b"x"),
            db.delete(&key(1)),
            db.write({
                let mut b = WriteBatch::new();
                b.put(&key(2), b"y");
                b
            }),
            db.flush(),
            db.compact(),
            db.rebuild_filters(draw::policy(&mut self.rng)),
            db.wait_for_background_work(),
        ];
        for (n, r) in refused.into_iter().enumerate() {
            assert!(
                matches!(r, Err(Error::ReadOnly)),
                "read-only change {n}: {r:?}\nseed {}",
                self.seed
            );
        }
        self.check_all("read-only after refused changes");
        self.shared.snapshots.lock().clear();
        drop(db);
        let db = Arc::try_unwrap(self.db.take().unwrap()).unwrap();
        db.close().unwrap();
    }

    pub fn run(&mut self, ops: u64) {
        self.check_all("first open");
        for step in 0..ops {
            self.step = step;
            self.counts.ops += 1;
            if !self.stale.is_empty() && self.rng.below(60) == 0 {
                self.stale.clear();
            }
            match self.rng.below(1000) {
                0..=379 => self.put_one(),
                380..=509 => self.delete_existing(),
                510..=559 => self.delete_absent(),
                560..=639 => self.batch(),
                640..=699 => self.gets(),
                700..=749 => self.scan(),
                750..=779 => self.take_snapshot(),
                780..=809 => self.release_snapshot(),
                810..=829 => self.open_iter(),
                830..=869 => self.advance_iters(),
                870..=899 => self.flush(),
                900..=914 => self.rebuild_filters(),
                915..=929 => self.settle(),
                930..=936 => self.reopen(),
                _ => {
                    // An overwrite of a live key.
                    let n = self.model.len() as u64;
                    if n == 0 {
                        self.put_one();
                    } else {
                        let k = self
                            .model
                            .keys()
                            .nth(self.rng.below(n) as usize)
                            .unwrap()
                            .clone();
                        let i = (0..KEYS).find(|&i| key(i) == k).unwrap();
                        let v = self.new_value(i);
                        self.counts.puts += 1;
                        self.write(vec![(i, Some(v))]);
                    }
                }
            }
        }
        while !self.iters.is_empty() {
            self.advance_iters();
        }
        self.check_all("end");
        self.reopen();
        self.end_store();
    }
}
