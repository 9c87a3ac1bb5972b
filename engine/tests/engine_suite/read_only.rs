//! `Db::open_read_only`: a deep, narrow store with heavy deletes and
//! overwrites, writes and deletes left only in the WAL, a torn WAL tail
//! and a damaged filter, opened read-only: every answer is a read-write
//! open's, every change is refused with `Error::ReadOnly`, and the
//! directory is byte-for-byte what it was (names, sizes, contents,
//! modification times), while open and after close.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bloomlsm::{
    CorruptFilterPolicy, Db, Error, FilterPolicy, Options, SyncMode, TraceSource, WalRecovery,
    WriteBatch,
};

/// The store's options: small memtables and tables, ratio 2, static level
/// budgets, so a few thousand writes reach five or more levels.
fn deep_options() -> Options {
    Options {
        background_work: false,
        memtable_bytes: 4096,
        target_file_bytes: 1024,
        l1_bytes: 2048,
        level_size_ratio: 2,
        dynamic_level_bytes: false,
        l0_compaction_trigger: 2,
        block_size: 256,
        num_levels: 7,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Keys `0..KEYS` are written in tables; `WAL_ONLY..` only in the WAL.
const KEYS: u64 = 700;
const WAL_ONLY: u64 = 50_000;
/// Written last, then torn off the WAL: never visible.
const TORN: &[u8] = b"torn-tail-key";

/// What the store must hold: key -> newest value, `None` for a tombstone.
type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// A deterministic generator (no dependency for one test).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below
    }
}

/// Builds the store in `dir` and returns its model. The tables hold many
/// versions per key (overwrites, deletes, batches) over several levels;
/// then, after a flush, puts of new keys, deletes and overwrites of table
/// keys, and a put then delete of one key stay in the WAL only; the very
/// last record is torn (cut 3 bytes short), as by a crash mid-append.
fn build(dir: &Path) -> Model {
    let mut model = Model::new();
    let mut rng = Lcg(42);
    let db = Db::open(dir, deep_options()).unwrap();
    for round in 0..9000u64 {
        let k = key(rng.next(KEYS));
        match rng.next(10) {
            0..=5 => {
                let v = format!("v{round}-{}", "x".repeat(rng.next(24) as usize)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, Some(v));
            }
            6..=8 => {
                db.delete(&k).unwrap();
                model.insert(k, None);
            }
            _ => {
                let mut batch = WriteBatch::new();
                let other = key(rng.next(KEYS));
                let v = format!("b{round}").into_bytes();
                batch.put(&k, &v).delete(&other);
                db.write(batch).unwrap();
                model.insert(k, Some(v));
                model.insert(other, None);
            }
        }
    }
    db.flush().unwrap();
    let flushes = db.stats().flushes;
    let levels = db
        .stats()
        .levels
        .iter()
        .rposition(|l| l.tables > 0)
        .unwrap();
    assert!(levels >= 4, "a deep tree: deepest level {levels}");
    let shape: Vec<u64> = db.stats().levels.iter().map(|l| l.tables).collect();
    println!("tables per level: {shape:?}");
    // The WAL-only tail: small enough that the memtable is not frozen.
    for i in 0..8 {
        let k = key(WAL_ONLY + i);
        db.put(&k, b"wal-only").unwrap();
        model.insert(k, Some(b"wal-only".to_vec()));
    }
    let present: Vec<Vec<u8>> = model
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.clone())
        .take(6)
        .collect();
    for (i, k) in present.into_iter().enumerate() {
        if i % 2 == 0 {
            db.delete(&k).unwrap();
            model.insert(k, None);
        } else {
            db.put(&k, b"overwritten in the WAL").unwrap();
            model.insert(k, Some(b"overwritten in the WAL".to_vec()));
        }
    }
    let gone = key(WAL_ONLY + 100);
    db.put(&gone, b"short-lived").unwrap();
    db.delete(&gone).unwrap();
    model.insert(gone, None);
    db.put(TORN, b"never acknowledged after the crash").unwrap();
    assert_eq!(db.stats().flushes, flushes, "the tail stayed in the WAL");
    db.close().unwrap();
    let wal = common::newest_wal(dir);
    // Before the close marker that follows it, under the header a crash
    // leaves (the close never ran).
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.truncate(common::close_marker_offset(&bytes) - 3);
    common::as_if_never_closed(&mut bytes);
    std::fs::write(&wal, &bytes).unwrap();
    model
}

/// Flips a byte inside the filter block of the `count` tables with the
/// lowest file numbers: a checksum failure, read around as "maybe".
fn damage_filters(dir: &Path, count: usize) {
    let mut tables: Vec<PathBuf> = common::listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| dir.join(n))
        .collect();
    tables.sort();
    assert!(tables.len() > count);
    for path in tables.iter().take(count) {
        let t = bloomlsm_sstable::Table::open_path(path, 0, None).unwrap();
        let filter = t.footer().filter;
        assert!(filter.size > 8, "{} has a filter", path.display());
        let at = (filter.offset + filter.size / 2) as usize;
        drop(t);
        let mut bytes = std::fs::read(path).unwrap();
        bytes[at] ^= 0x5a;
        std::fs::write(path, bytes).unwrap();
    }
}

/// Every file of `dir`: name -> (size, contents, modification time).
type DirImage = BTreeMap<String, (u64, Vec<u8>, SystemTime)>;

/// `LOCK` is compared by size and modification time, never opened: this
/// process may hold its record lock, which closing any descriptor of the
/// file would drop (`engine/src/fs/dir_lock.rs`).
fn image(dir: &Path) -> DirImage {
    common::listing(dir)
        .into_iter()
        .map(|name| {
            let path = dir.join(&name);
            let meta = std::fs::metadata(&path).unwrap();
            assert!(meta.is_file(), "{name} is a file");
            let bytes = if name == "LOCK" {
                Vec::new()
            } else {
                std::fs::read(&path).unwrap()
            };
            (name, (meta.len(), bytes, meta.modified().unwrap()))
        })
        .collect()
}

fn assert_unchanged(dir: &Path, before: &DirImage, when: &str) {
    let after = image(dir);
    let names = |i: &DirImage| i.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&after), names(before), "{when}: file names");
    for (name, (size, bytes, mtime)) in before {
        let (size2, bytes2, mtime2) = &after[name];
        assert_eq!(size, size2, "{when}: size of {name}");
        assert!(bytes == bytes2, "{when}: contents of {name}");
        assert_eq!(mtime, mtime2, "{when}: modification time of {name}");
    }
}

/// Copies every file of `from` into a new directory, `LOCK` included
/// unless `with_lock` is false.
fn copy_store(from: &Path, with_lock: bool) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    for name in common::listing(from) {
        if with_lock || name != "LOCK" {
            std::fs::copy(from.join(&name), to.path().join(&name)).unwrap();
        }
    }
    to
}

/// Everything a reader can ask, as one comparable value.
#[derive(Debug, PartialEq)]
struct Answers {
    gets: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    traced: Vec<Option<Vec<u8>>>,
    scans: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    snapshot_gets: Vec<Option<Vec<u8>>>,
    snapshot_scan: Vec<(Vec<u8>, Vec<u8>)>,
    last_sequence: u64,
}

/// Every model key (present, deleted), keys never written between and
/// past them, the torn key; full and bounded scans; the same through a
/// snapshot.
fn probe_keys(model: &Model) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for i in (0..KEYS + 20).step_by(3) {
        let mut k = key(i);
        k.push(b'~'); // between two written keys
        keys.push(k);
    }
    keys.extend((0..KEYS).filter(|i| !model.contains_key(&key(*i))).map(key));
    keys.push(key(WAL_ONLY + 99));
    keys.push(b"a".to_vec());
    keys.push(b"zzz".to_vec());
    keys.push(TORN.to_vec());
    keys
}

fn answers(db: &Db, model: &Model) -> Answers {
    let keys = probe_keys(model);
    let scan = |from: &[u8], to: Option<&[u8]>| -> Vec<(Vec<u8>, Vec<u8>)> {
        let iter = match to {
            Some(to) => db.scan(from.to_vec()..to.to_vec()).unwrap(),
            None => db.scan(from.to_vec()..).unwrap(),
        };
        iter.collect::<Result<_, _>>().unwrap()
    };
    let snapshot = db.snapshot();
    Answers {
        gets: keys
            .iter()
            .map(|k| (k.clone(), db.get(k).unwrap()))
            .collect(),
        traced: keys.iter().map(|k| db.get_traced(k).unwrap().0).collect(),
        scans: vec![
            db.scan::<&[u8], _>(..)
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap(),
            scan(&key(100), Some(&key(400))),
            scan(&key(KEYS - 5), None),
            scan(b"k", Some(b"k0")),
        ],
        snapshot_gets: keys.iter().map(|k| snapshot.get(k).unwrap()).collect(),
        snapshot_scan: snapshot
            .scan::<&[u8], _>(..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap(),
        last_sequence: db.last_sequence(),
    }
}

fn check_model(a: &Answers, model: &Model) {
    for (k, got) in &a.gets {
        let want = model.get(k).cloned().flatten();
        assert_eq!(got, &want, "get {}", k.escape_ascii());
    }
    let present: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    assert_eq!(a.scans[0], present, "full scan");
    assert_eq!(a.snapshot_scan, present, "snapshot scan");
    assert!(a.gets.iter().any(|(_, v)| v.is_none()));
}

fn assert_read_only<T: std::fmt::Debug>(result: bloomlsm::Result<T>, what: &str) {
    assert!(
        matches!(result, Err(Error::ReadOnly)),
        "{what} on a read-only store: {result:?}"
    );
}

/// Every call that would change the store.
fn try_every_change(db: &Db) {
    assert_read_only(db.put(b"new", b"v"), "put");
    assert_read_only(db.put(&key(1), b"v"), "put over a stored key");
    assert_read_only(db.put(b"", b"v"), "put of an invalid key");
    assert_read_only(db.delete(&key(2)), "delete");
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"y").delete(&key(3));
    assert_read_only(db.write(batch), "write");
    assert_read_only(db.write(WriteBatch::new()), "empty write");
    assert_read_only(db.flush(), "flush");
    assert_read_only(db.compact(), "compact");
    assert_read_only(
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 3.0 }),
        "rebuild_filters",
    );
    assert_read_only(
        db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 10.0 }),
        "rebuild_filters (optimized)",
    );
    assert_read_only(db.wait_for_background_work(), "wait_for_background_work");
}

#[test]
fn a_read_only_open_answers_as_a_read_write_open_and_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    damage_filters(dir.path(), 2);
    let before = image(dir.path());
    assert!(before.contains_key("LOCK"));

    // As the command-line tools open it: default options, whose
    // background work, level budgets and memtable size are not the store's.
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(db.is_read_only());
    assert_unchanged(dir.path(), &before, "right after the read-only open");
    let ro = answers(&db, &model);
    check_model(&ro, &model);
    let stats = db.stats();
    // The WAL-only writes are in memory, not in a new table.
    let (value, trace) = db.get_traced(&key(WAL_ONLY)).unwrap();
    assert_eq!(value, Some(b"wal-only".to_vec()));
    assert_eq!(trace.steps[0].source, TraceSource::Memtable);
    let (value, trace) = db.get_traced(&key(WAL_ONLY + 100)).unwrap();
    assert_eq!(value, None);
    assert_eq!(trace.steps.len(), 1, "the delete is found in the memtable");
    assert_eq!(trace.steps[0].source, TraceSource::Memtable);
    assert_eq!(stats.flushes, 0);
    assert_eq!(stats.compactions, 0);
    assert_eq!(stats.filters_built, 0);
    assert_eq!(stats.total.tables_without_usable_filter, 2, "read around");
    let policy = db.options().filter_policy;
    let held = db.snapshot();
    try_every_change(&db);
    assert_eq!(answers(&db, &model), ro, "refused changes changed nothing");
    assert_eq!(
        held.get(&key(WAL_ONLY)).unwrap(),
        Some(b"wal-only".to_vec())
    );
    assert_eq!(db.options().filter_policy, policy);
    assert_eq!(db.last_sequence(), ro.last_sequence);
    assert_unchanged(dir.path(), &before, "after every change was refused");
    let iter = db.scan::<&[u8], _>(..).unwrap();
    db.close().unwrap();
    assert!(matches!(
        iter.into_iter().next(),
        Some(Err(Error::Closed)) | None
    ));
    drop(held);
    assert_unchanged(dir.path(), &before, "after close");

    // Under the store's own options, with a policy that would rebuild
    // damaged filters in a read-write open, and with one table file open
    // at a time (every read reopens through the read-only file system):
    // still nothing written, the same answers.
    for options in [
        deep_options(),
        Options {
            on_corrupt_filter: CorruptFilterPolicy::Rebuild,
            background_work: true,
            ..deep_options()
        },
        Options {
            max_open_files: Some(1),
            ..deep_options()
        },
    ] {
        let db = Db::open_read_only(dir.path(), options).unwrap();
        assert_eq!(answers(&db, &model), ro);
        try_every_change(&db);
        drop(db); // Drop closes as close does
        assert_unchanged(dir.path(), &before, "after a second read-only open");
    }

    // A read-write open answers the same (it flushes the WAL to a new L0
    // table and may compact: the tree it reads is not the one on disk).
    let rw = Db::open(dir.path(), deep_options()).unwrap();
    assert!(!rw.is_read_only());
    assert_eq!(answers(&rw, &model), ro, "read-write open's answers");
    let rw_stats = rw.stats();
    assert_eq!(
        rw_stats.total.tables_without_usable_filter,
        stats.total.tables_without_usable_filter
    );
    // Its tree is the manifest's plus one L0 table of the replayed WAL.
    assert_eq!(rw_stats.levels[0].tables, stats.levels[0].tables + 1);
    for (l, (a, b)) in rw_stats
        .levels
        .iter()
        .zip(&stats.levels)
        .enumerate()
        .skip(1)
    {
        assert_eq!(
            (a.tables, a.entries, a.file_bytes, a.filter_bytes),
            (b.tables, b.entries, b.file_bytes, b.filter_bytes),
            "level {l}"
        );
    }
    rw.close().unwrap();
    assert_ne!(
        image(dir.path()),
        before,
        "a read-write open does change it"
    );
}

#[test]
fn a_read_only_open_and_a_writer_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
    }
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open_read_only(dir.path(), Options::default()).unwrap_err();
    assert!(
        matches!(&err, Error::Locked { path } if path == dir.path()),
        "{err}"
    );
    writer.close().unwrap();

    let before = image(dir.path());
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "{err}");
    let err = Db::open_read_only(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "one holder: {err}");
    assert_eq!(reader.get(b"k").unwrap(), Some(b"v".to_vec()));
    reader.close().unwrap();
    assert_unchanged(dir.path(), &before, "after the refused opens");
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(writer.get(b"k").unwrap(), Some(b"v".to_vec()));
    writer.close().unwrap();
}

/// A store copied without its `LOCK`: the read-only open must create one
/// to exclude writers, and unlinks it again when it closes.
#[test]
fn a_store_without_lock_is_left_without_lock() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), deep_options()).unwrap();
        common::fill(&db, 300);
        db.close().unwrap();
    }
    let copy = copy_store(dir.path(), false);
    let before = image(copy.path());
    assert!(!before.contains_key("LOCK"));
    let reader = Db::open_read_only(copy.path(), Options::default()).unwrap();
    let err = Db::open(copy.path(), Options::default()).unwrap_err();
    assert!(matches!(&err, Error::Locked { .. }), "{err}");
    common::all_present(&reader, 300);
    reader.close().unwrap();
    assert_unchanged(copy.path(), &before, "after close");
    // And a failed read-only open does the same.
    std::fs::write(copy.path().join("MANIFEST"), b"not a manifest").unwrap();
    let before = image(copy.path());
    let err = Db::open_read_only(copy.path(), Options::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert_unchanged(copy.path(), &before, "after a refused open");
}

#[test]
fn a_read_only_open_refuses_what_is_not_a_store_and_creates_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("no").join("such").join("store");
    let err = Db::open_read_only(&missing, Options::default()).unwrap_err();
    assert!(
        matches!(&err, Error::NoManifest { path } if *path == missing),
        "{err}"
    );
    assert!(!parent.path().join("no").exists(), "no directory created");

    let empty = tempfile::tempdir().unwrap();
    let err = Db::open_read_only(empty.path(), Options::default()).unwrap_err();
    assert!(
        matches!(&err, Error::NoManifest { path } if path == empty.path()),
        "{err}"
    );
    assert!(common::listing(empty.path()).is_empty(), "no LOCK created");

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"not a store").unwrap();
    std::fs::write(other.path().join("000007.sst"), b"not a table").unwrap();
    let before = image(other.path());
    let err = Db::open_read_only(other.path(), Options::default()).unwrap_err();
    assert!(matches!(&err, Error::NoManifest { .. }), "{err}");
    assert!(err.to_string().contains("MANIFEST"), "{err}");
    assert_unchanged(other.path(), &before, "a refused directory");

    let file = other.path().join("notes.txt");
    let err = Db::open_read_only(&file, Options::default()).unwrap_err();
    assert!(matches!(&err, Error::NoManifest { .. }), "{err}");
    assert_unchanged(other.path(), &before, "a file given as the store");
}

/// The WAL's damage is judged as a read-write open judges it, in both
/// modes, and a refused read-only open changes nothing either.
#[test]
fn wal_damage_is_reported_as_a_read_write_open_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        // Each record fsynced: damage before intact records is corruption.
        let synced = Options {
            sync: SyncMode::Always,
            ..Options::default()
        };
        let db = Db::open(dir.path(), synced).unwrap();
        common::fill(&db, 50);
        db.close().unwrap();
    }
    // Damage the 10th record's payload: intact records follow it.
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let at = common::wal_record_offset(&bytes, 10);
    bytes[at + 12] ^= 0xff;
    std::fs::write(&wal, bytes).unwrap();
    let before = image(dir.path());

    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap_err();
    let copy = copy_store(dir.path(), true);
    let rw = Db::open(copy.path(), Options::default()).unwrap_err();
    match (&ro, &rw) {
        (
            Error::Corruption {
                path: p1,
                offset: o1,
                reason: r1,
            },
            Error::Corruption {
                path: p2,
                offset: o2,
                reason: r2,
            },
        ) => {
            assert_eq!(p1.file_name(), p2.file_name());
            assert_eq!((o1, r1.to_string()), (o2, r2.to_string()));
            assert_eq!(*o1, at as u64);
        }
        _ => panic!("read-only {ro}, read-write {rw}"),
    }
    assert_unchanged(dir.path(), &before, "after a refused read-only open");

    let pit = Options {
        wal_recovery: WalRecovery::PointInTime,
        ..Options::default()
    };
    let ro = Db::open_read_only(dir.path(), pit.clone()).unwrap();
    let ro_all: Vec<_> = ro
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ro_all.len(), 10, "the prefix before the damage");
    ro.close().unwrap();
    assert_unchanged(dir.path(), &before, "after a point-in-time read-only open");
    let rw = Db::open(copy.path(), pit).unwrap();
    let rw_all: Vec<_> = rw
        .scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ro_all, rw_all);
}

/// In a WAL written without fsync (the default `SyncMode::Never`) and
/// never sealed by a clean close, damage before intact records is what a
/// power loss leaves when pages reach the disk out of order: both opens
/// end the log at the damaged record, and recover the same prefix. (After
/// a clean close both refuse it: `sealed_wal.rs`.)
#[test]
fn unsynced_wal_damage_ends_the_log_alike_in_both_opens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let fs = bloomlsm::fs::fault::FaultFs::new();
        let db = Db::open_with_fs(
            dir.path(),
            Options::default(),
            std::sync::Arc::new(fs.clone()),
        )
        .unwrap();
        common::fill(&db, 50);
        common::close_unsealed(db, &fs);
    }
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let at = common::wal_record_offset(&bytes, 10);
    // The 11th record's page never reached the disk.
    bytes[at..at + 40].fill(0);
    std::fs::write(&wal, bytes).unwrap();
    let before = image(dir.path());
    let all = |db: &Db| -> Vec<_> {
        db.scan::<&[u8], _>(..)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let cut = |db: &Db| {
        let c = db.stats().wal_replay_cut.unwrap();
        (
            c.path.file_name().map(|n| n.to_owned()),
            c.offset,
            c.bytes_not_replayed,
            c.cause,
        )
    };
    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let ro_all = all(&ro);
    assert_eq!(ro_all.len(), 10, "the prefix before the damage");
    let ro_cut = cut(&ro);
    assert_eq!(ro_cut.1, at as u64, "the damaged record");
    assert_eq!(ro_cut.3, bloomlsm::WalCutCause::UnsyncedWal);
    ro.close().unwrap();
    assert_unchanged(dir.path(), &before, "after a read-only open");
    let copy = copy_store(dir.path(), true);
    let rw = Db::open(copy.path(), Options::default()).unwrap();
    assert_eq!(all(&rw), ro_all);
    assert_eq!(cut(&rw), ro_cut);
}

/// `CorruptFilterPolicy::Fail` refuses a read-only open as it refuses a
/// read-write one.
#[test]
fn a_damaged_filter_under_fail_refuses_the_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), deep_options()).unwrap();
        common::fill(&db, 400);
        db.close().unwrap();
    }
    damage_filters(dir.path(), 1);
    let before = image(dir.path());
    let fail = Options {
        on_corrupt_filter: CorruptFilterPolicy::Fail,
        ..deep_options()
    };
    let err = Db::open_read_only(dir.path(), fail).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Corruption {
                reason: bloomlsm::Damage::Filter(_),
                ..
            }
        ),
        "{err}"
    );
    assert_unchanged(dir.path(), &before, "after the refusal");
    let db = Db::open_read_only(dir.path(), deep_options()).unwrap();
    common::all_present(&db, 400);
    assert_eq!(db.stats().total.tables_without_usable_filter, 1);
}

/// Under `use_direct_reads`, a file system that refuses `O_DIRECT` fails
/// the read-only open naming a path of the store, as it fails `open`, also
/// when the store holds no table yet (only its WAL), and changes nothing.
#[test]
fn a_read_only_open_checks_direct_reads_as_open_does() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"k", b"only in the WAL").unwrap();
        db.close().unwrap();
    }
    assert!(
        !common::listing(dir.path())
            .iter()
            .any(|n| n.ends_with(".sst"))
    );
    let before = image(dir.path());
    let fs = bloomlsm::fs::fault::FaultFs::new();
    fs.set_refuse_direct_io(true);
    let direct = Options {
        use_direct_reads: true,
        ..Options::default()
    };
    let err = Db::open_read_only_with_fs(dir.path(), direct, std::sync::Arc::new(fs.clone()))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Io { path, .. } if path.starts_with(dir.path())),
        "{err}"
    );
    assert_unchanged(dir.path(), &before, "after the refusal");
    let db = Db::open_read_only_with_fs(dir.path(), Options::default(), std::sync::Arc::new(fs))
        .unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"only in the WAL".to_vec()));
    db.close().unwrap();
    assert_unchanged(dir.path(), &before, "after a cached read-only open");
}
