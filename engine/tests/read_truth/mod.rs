//! Ground truth for the read-path numbers (`Db::stats`, `LookupTrace`):
//! a file system that logs every positioned read of a table file, and a
//! model of the tree read from the manifest and the table files themselves
//! (each filter probed here, each table's entries listed here), so a get's
//! expected path is computed without the engine's read path. `check_get`
//! compares one get's trace, the counters' deltas and the reads logged.
#![allow(dead_code)] // Not every test binary uses every helper.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::filter::{Filter, KeyHash};
use bloomlsm::fs::{FileSystem, FsResult, RealFs};
use bloomlsm::sstable::format::FOOTER_LEN;
use bloomlsm::sstable::{EntryKind, Footer, RandomAccessFile, Table, TableIter};
use bloomlsm::{
    BlockSource, Db, FilterVerdict, LevelStats, LookupTrace, Options, Snapshot, Stats, TraceResult,
    TraceSource,
};
use parking_lot::Mutex;

use crate::common::real_fs_methods::real_fs_methods;

/// One positioned read of a table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub number: u64,
    pub offset: u64,
    pub len: usize,
    /// Through `read_exact_at_bulk` (a pass over the table), not a point read.
    pub bulk: bool,
    /// Within the table's data region, as the first footer of this table
    /// read through any handle says (false for the footer, properties,
    /// index and filter reads of an open; a file reopened under
    /// `max_open_files` reads no footer, an earlier handle's says).
    pub in_data: bool,
}

/// `RealFs` that logs every read of every `.sst` file it opens, and every
/// open of one.
#[derive(Debug, Default)]
pub struct CountingFs {
    log: Arc<Mutex<Vec<Read>>>,
    opens: Mutex<Vec<u64>>,
    /// Where each table's data region ends (by number), from the first
    /// footer read of it: a rebuild in place appends after it, so later
    /// footers say more.
    data_ends: Arc<Mutex<HashMap<u64, u64>>>,
}

impl CountingFs {
    /// The reads logged since the last call, and a fresh log.
    pub fn take(&self) -> Vec<Read> {
        std::mem::take(&mut *self.log.lock())
    }

    /// The table files (by number) opened since the last call, in order.
    pub fn take_opens(&self) -> Vec<u64> {
        std::mem::take(&mut *self.opens.lock())
    }

    fn wrap(&self, path: &Path, inner: Arc<dyn RandomAccessFile>) -> Arc<dyn RandomAccessFile> {
        match table_number(path) {
            Some(number) => {
                self.opens.lock().push(number);
                Arc::new(CountingFile {
                    inner,
                    number,
                    log: Arc::clone(&self.log),
                    data_ends: Arc::clone(&self.data_ends),
                })
            }
            None => inner,
        }
    }
}

fn table_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".sst")?.parse().ok()
}

#[derive(Debug)]
struct CountingFile {
    inner: Arc<dyn RandomAccessFile>,
    number: u64,
    log: Arc<Mutex<Vec<Read>>>,
    data_ends: Arc<Mutex<HashMap<u64, u64>>>,
}

impl CountingFile {
    fn note(&self, buf: &[u8], offset: u64, bulk: bool) {
        let mut ends = self.data_ends.lock();
        if buf.len() == FOOTER_LEN
            && let Ok(f) = Footer::decode(buf)
        {
            let end = [f.filter, f.index, f.properties]
                .iter()
                .filter(|h| !h.is_null())
                .map(|h| h.offset)
                .min()
                .unwrap_or(0);
            ends.entry(self.number).or_insert(end);
        }
        let in_data = ends
            .get(&self.number)
            .is_some_and(|&end| offset + buf.len() as u64 <= end);
        drop(ends);
        self.log.lock().push(Read {
            number: self.number,
            offset,
            len: buf.len(),
            bulk,
            in_data,
        });
    }
}

impl RandomAccessFile for CountingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.inner.read_exact_at(buf, offset);
        self.note(buf, offset, false);
        r
    }
    fn read_exact_at_bulk(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.inner.read_exact_at_bulk(buf, offset);
        self.note(buf, offset, true);
        r
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for CountingFs {
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        Ok(self.wrap(path, RealFs.open_read(path)?))
    }
    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        Ok(self.wrap(path, RealFs.open_read_direct(path)?))
    }
    real_fs_methods!(create append_at overwrite read_all rename remove list create_dir_all
        remove_dir sync_dir exists lock lock_shared);
}

/// One table as its own file says, opened here (no cache, plain reads).
pub struct ModelTable {
    pub level: usize,
    pub number: u64,
    pub largest_seq: u64,
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    /// (user key, sequence, tombstone?) in table order.
    pub entries: Vec<(Vec<u8>, u64, bool)>,
    /// End of the data region (data blocks with their trailers).
    pub data_bytes: u64,
    pub table: Table,
}

/// The live tree: L0 newest first, then each deeper level in key order.
pub struct Tree {
    pub levels: Vec<Vec<ModelTable>>,
}

impl Tree {
    /// The tree the manifest of the store in `dir` records now. REQUIRES:
    /// no background work (the manifest is the view readers use).
    pub fn read(dir: &Path) -> Self {
        let mut levels: Vec<Vec<ModelTable>> = Vec::new();
        for meta in bloomlsm::table_records(dir).unwrap() {
            let path: PathBuf = dir.join(format!("{:06}.sst", meta.number));
            let table = Table::open_at(
                Arc::new(std::fs::File::open(&path).unwrap()),
                &path,
                meta.file_size,
                meta.number,
                None,
            )
            .unwrap();
            let own = Arc::new(
                Table::open_at(
                    Arc::new(std::fs::File::open(&path).unwrap()),
                    &path,
                    meta.file_size,
                    meta.number,
                    None,
                )
                .unwrap(),
            );
            let entries = TableIter::new(own, false)
                .map(|e| {
                    let e = e.unwrap();
                    (e.user_key, e.seq, e.kind == EntryKind::Delete)
                })
                .collect();
            while levels.len() <= meta.level {
                levels.push(Vec::new());
            }
            levels[meta.level].push(ModelTable {
                level: meta.level,
                number: meta.number,
                largest_seq: meta.largest_seq,
                smallest: meta.smallest_key.clone(),
                largest: meta.largest_key.clone(),
                entries,
                data_bytes: table.properties().data_bytes,
                table,
            });
        }
        if let Some(l0) = levels.first_mut() {
            l0.sort_by_key(|t| std::cmp::Reverse(t.largest_seq));
        }
        for level in levels.iter_mut().skip(1) {
            level.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        }
        Self { levels }
    }

    pub fn table(&self, number: u64) -> &ModelTable {
        self.levels
            .iter()
            .flatten()
            .find(|t| t.number == number)
            .unwrap()
    }

    /// The table steps a get of `key` at `seq` must take, each with the
    /// verdict, whether a data block is needed, and the result; memtables
    /// not included (the caller flushed them).
    pub fn expected(&self, key: &[u8], seq: u64) -> Vec<Expected> {
        let mut out = Vec::new();
        let hash = KeyHash::of(key);
        for (level, tables) in self.levels.iter().enumerate() {
            let candidates: Vec<&ModelTable> = if level == 0 {
                tables.iter().collect()
            } else {
                tables
                    .iter()
                    .filter(|t| t.smallest.as_slice() <= key && key <= t.largest.as_slice())
                    .collect()
            };
            for t in candidates {
                let step = t.expected(key, hash, seq);
                let last = step.result != TraceResult::Missing;
                out.push(step);
                if last {
                    return out;
                }
            }
        }
        out
    }
}

/// One table step a get must take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub level: usize,
    pub number: u64,
    pub filter: FilterVerdict,
    pub block: bool,
    pub result: TraceResult,
}

impl ModelTable {
    fn expected(&self, key: &[u8], hash: KeyHash, seq: u64) -> Expected {
        let step = |filter, block, result| Expected {
            level: self.level,
            number: self.number,
            filter,
            block,
            result,
        };
        if key < self.smallest.as_slice() || key > self.largest.as_slice() {
            // Fence pointers: no probe, no read.
            return step(FilterVerdict::NotAsked, false, TraceResult::Missing);
        }
        let versions: Vec<&(Vec<u8>, u64, bool)> =
            self.entries.iter().filter(|e| e.0 == key).collect();
        let filter = match self.table.filter() {
            Some(f) if !f.contains_hash(hash) => {
                assert!(versions.is_empty(), "a filter false negative");
                return step(FilterVerdict::Negative, false, TraceResult::Missing);
            }
            Some(_) if versions.is_empty() => FilterVerdict::FalsePositive,
            Some(_) => FilterVerdict::TruePositive,
            None => FilterVerdict::NoFilter,
        };
        let visible = versions.iter().filter(|e| e.1 <= seq).max_by_key(|e| e.1);
        let result = match visible {
            Some(e) if e.2 => TraceResult::Deleted,
            Some(_) => TraceResult::Value,
            None => TraceResult::Missing,
        };
        // Filter said maybe (or no filter): the one block that can hold
        // the key is searched. (Every separator of this build's tables
        // sorts at or after the table's last version of its key, so there
        // is always such a block.)
        let block = true;
        step(filter, block, result)
    }
}

/// One level's read counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub probes: u64,
    pub negatives: u64,
    pub true_positives: u64,
    pub false_positives: u64,
    pub no_filter: u64,
    pub from_file: u64,
    pub from_cache: u64,
}

impl Counts {
    pub fn of(l: &LevelStats) -> Self {
        Self {
            probes: l.table_probes,
            negatives: l.filter_negatives,
            true_positives: l.filter_true_positives,
            false_positives: l.filter_false_positives,
            no_filter: l.probes_without_filter,
            from_file: l.data_blocks_read,
            from_cache: l.block_cache_hits,
        }
    }

    pub fn minus(self, o: Self) -> Self {
        Self {
            probes: self.probes - o.probes,
            negatives: self.negatives - o.negatives,
            true_positives: self.true_positives - o.true_positives,
            false_positives: self.false_positives - o.false_positives,
            no_filter: self.no_filter - o.no_filter,
            from_file: self.from_file - o.from_file,
            from_cache: self.from_cache - o.from_cache,
        }
    }

    /// Adds one traced table step.
    pub fn add(&mut self, filter: FilterVerdict, block: Option<BlockSource>) {
        if filter == FilterVerdict::NotAsked {
            assert_eq!(block, None, "a block read for a table not asked");
            return;
        }
        self.probes += 1;
        match filter {
            FilterVerdict::Negative => self.negatives += 1,
            FilterVerdict::TruePositive => self.true_positives += 1,
            FilterVerdict::FalsePositive => self.false_positives += 1,
            FilterVerdict::NoFilter => self.no_filter += 1,
            FilterVerdict::NotAsked => unreachable!(),
        }
        match block {
            Some(BlockSource::File) => self.from_file += 1,
            Some(BlockSource::Cache) => self.from_cache += 1,
            None => {}
        }
    }
}

/// Per level, what `trace`'s table steps add to the counters.
pub fn counts_of_trace(trace: &LookupTrace, levels: usize) -> Vec<Counts> {
    let mut out = vec![Counts::default(); levels];
    for s in &trace.steps {
        if let TraceSource::Table { level, .. } = s.source {
            out[level].add(s.filter.unwrap(), s.block);
        }
    }
    out
}

/// Per level, the counters' deltas from `before` to `after`.
pub fn delta(before: &Stats, after: &Stats) -> Vec<Counts> {
    after
        .levels
        .iter()
        .zip(&before.levels)
        .map(|(a, b)| Counts::of(a).minus(Counts::of(b)))
        .collect()
}

/// Where a get reads: the store or a snapshot of it.
pub enum At<'a> {
    Latest,
    Snapshot(&'a Snapshot),
}

/// Gets `key` traced and checks, against the tree's files and the reads
/// logged: every table step (which tables, in order; each verdict, block
/// needed or not, and result), that every block from a file is exactly one
/// point read of that table's data region and nothing else is read, and
/// that the counters moved by exactly the trace's steps (one get, no
/// memtable hit). REQUIRES: the memtables hold nothing (the caller
/// flushed), no background work, no other reader.
pub fn check_get(db: &Db, fs: &CountingFs, tree: &Tree, key: &[u8], at: &At) -> LookupTrace {
    let seq = match at {
        At::Latest => db.last_sequence(),
        At::Snapshot(s) => s.sequence(),
    };
    let before = db.stats();
    fs.take();
    fs.take_opens();
    let (value, trace) = match at {
        At::Latest => db.get_traced(key).unwrap(),
        At::Snapshot(s) => s.get_traced(key).unwrap(),
    };
    let reads = fs.take();
    let opens = fs.take_opens();
    let after = db.stats();
    let name = String::from_utf8_lossy(key);
    assert_eq!(trace.snapshot_seq, seq, "{name}: the trace's sequence");
    assert_eq!(trace.key_hash, KeyHash::of(key).raw(), "{name}: hash");

    // The steps: memtables (empty, each Missing), then the tables.
    let table_steps: Vec<_> = trace
        .steps
        .iter()
        .filter(|s| matches!(s.source, TraceSource::Table { .. }))
        .collect();
    for s in trace.steps.iter().filter(|s| s.filter.is_none()) {
        assert_eq!(s.result, TraceResult::Missing, "{name}: a memtable step");
        assert_eq!(s.block, None);
    }
    let got: Vec<Expected> = table_steps
        .iter()
        .map(|s| {
            let TraceSource::Table { level, number } = s.source else {
                unreachable!()
            };
            Expected {
                level,
                number,
                filter: s.filter.unwrap(),
                block: s.block.is_some(),
                result: s.result.clone(),
            }
        })
        .collect();
    let want = tree.expected(key, seq);
    assert_eq!(got, want, "{name} at {seq}: the steps");
    let want_value = matches!(want.last().map(|e| &e.result), Some(TraceResult::Value));
    assert_eq!(value.is_some(), want_value, "{name}: found or not");

    // Every block from a file is one point read of that table's data
    // region, in step order; nothing else is read.
    let from_file: Vec<u64> = table_steps
        .iter()
        .filter(|s| s.block == Some(BlockSource::File))
        .map(|s| match s.source {
            TraceSource::Table { number, .. } => number,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(
        reads.iter().map(|r| r.number).collect::<Vec<_>>(),
        from_file,
        "{name}: reads logged vs blocks the trace says came from files: {reads:?}"
    );
    for r in &reads {
        assert!(
            !r.bulk && r.in_data,
            "{name}: a get's read is a point read of data"
        );
        let t = tree.table(r.number);
        assert!(
            r.offset + r.len as u64 <= t.data_bytes,
            "{name}: read {r:?} is outside the data region ({})",
            t.data_bytes
        );
    }
    assert_eq!(trace.blocks_read_from_files(), reads.len());

    // A get opens a table's file only to read a block from it (a file
    // closed under `max_open_files`; filters and indexes stay in memory),
    // at most once per block, and `table_file_opens` counts each open.
    for n in &opens {
        assert!(
            from_file.contains(n),
            "{name}: table {n} opened, but no block of it read from its file: {opens:?} vs {from_file:?}"
        );
    }
    assert!(opens.len() <= from_file.len(), "{name}: {opens:?}");
    assert_eq!(
        after.table_file_opens - before.table_file_opens,
        opens.len() as u64,
        "{name}: table_file_opens vs the opens logged"
    );
    if before.open_table_files.is_none() {
        assert!(opens.is_empty(), "{name}: an open without a bound");
    }

    // The counters moved by exactly this get's steps.
    assert_eq!(after.gets - before.gets, 1, "{name}: gets");
    assert_eq!(
        after.memtable_hits, before.memtable_hits,
        "{name}: memtable hits"
    );
    assert_eq!(
        delta(&before, &after),
        counts_of_trace(&trace, after.levels.len()),
        "{name}: counter deltas vs the trace"
    );
    assert_eq!(
        after.total.data_blocks_read - before.total.data_blocks_read,
        reads.len() as u64,
        "{name}: data blocks read vs reads logged"
    );
    trace
}

/// The narrow tree the read-counter tests build: 16 KiB memtables, 2 KiB
/// tables of 256-byte blocks, an L1 of 8 KiB at size ratio 2 with static
/// level budgets, work done inline. Each test sets its filter and block
/// cache, and any size it changes.
pub fn narrow_tree_options() -> Options {
    Options {
        block_size: 256,
        memtable_bytes: 16 << 10,
        target_file_bytes: 2 << 10,
        l1_bytes: 8 << 10,
        level_size_ratio: 2,
        dynamic_level_bytes: false,
        background_work: false,
        ..Options::default()
    }
}

/// Round `r` of `rounds` puts every key `i < n` with `i % (r + 2) == 0`
/// (value `{prefix}{i}-{r}`), deletes every key with `i % every == r` for
/// `deletes: Some(every)`, and flushes: compactions push the early rounds
/// down level by level (deep keys are the ones only early rounds wrote).
pub fn write_rounds(
    db: &Db,
    key: impl Fn(u64) -> Vec<u8>,
    n: u64,
    rounds: u64,
    deletes: Option<u64>,
    prefix: &str,
) {
    for r in 0..rounds {
        for i in (0..n).filter(|i| i % (r + 2) == 0) {
            db.put(&key(i), format!("{prefix}{i}-{r}").as_bytes())
                .unwrap();
        }
        if let Some(every) = deletes {
            for i in (0..n).filter(|i| i % every == r) {
                db.delete(&key(i)).unwrap();
            }
        }
        db.flush().unwrap();
    }
}
