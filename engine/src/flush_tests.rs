//! A flush that finds several frozen memtables waiting writes them into
//! one L0 table (`flush.rs`): one run for absent gets to probe, every
//! version kept (a snapshot between the memtables still reads its own
//! values), and every flushed memtable's WAL retired, across a reopen.

use std::sync::Arc;

use crate::store_files::files_named;
use crate::{Db, Options};

fn options() -> Options {
    Options {
        // The test decides when memtables freeze (none fills up); writers
        // never wait for the frozen ones.
        memtable_bytes: 1 << 20,
        max_immutable_memtables: 8,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Freezes the active memtable (a new one and a new WAL take its place),
/// as a full memtable does, without flushing it.
fn freeze(db: &Db) {
    let mut w = db.inner.write.lock();
    db.inner.rotate_memtable(&mut w).unwrap();
}

fn wal_files(dir: &std::path::Path) -> usize {
    files_named(dir, "wal").len()
}

#[test]
fn a_flush_writes_every_frozen_memtable_waiting_into_one_l0_table() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // The flush thread is held back (as by a slow device) while three
    // memtables freeze: the oldest holds
    // even keys, the next overwrites some and deletes others and adds odd
    // keys, the newest overwrites again.
    let held = db.inner.flush_lock.lock();
    freeze_first(&db);
    let before_second = db.snapshot();
    freeze_second_and_third(&db);
    assert_eq!(db.inner.current.load().imm.len(), 3);
    assert_eq!(wal_files(dir.path()), 4);

    // Whichever flushes first, the flush thread or this call, finds the
    // three waiting.
    drop(held);
    db.inner.flush_all_immutable().unwrap();
    db.wait_for_background_work().unwrap();

    let stats = db.stats();
    assert_eq!(
        stats.levels[0].tables, 1,
        "one L0 table for three memtables"
    );
    assert_eq!(stats.flushes, 1);
    assert!(db.inner.current.load().imm.is_empty());
    assert_eq!(wal_files(dir.path()), 1, "the flushed memtables' WALs go");
    // Every version kept: the table holds the writes of all three.
    assert_eq!(stats.levels[0].entries, 300 + 200 + 150 + 120);

    let expected = |i: u32| -> Option<&'static [u8]> {
        if i.is_multiple_of(5) {
            Some(b"third")
        } else if i % 4 == 1 {
            Some(b"odd")
        } else if i.is_multiple_of(3) {
            if i.is_multiple_of(2) {
                Some(b"second")
            } else {
                None
            }
        } else if i.is_multiple_of(2) {
            Some(b"first")
        } else {
            None
        }
    };
    let check = |db: &Db, when: &str| {
        for i in 0..600 {
            assert_eq!(
                db.get(&key(i)).unwrap().as_deref(),
                expected(i),
                "{when}: key {i}"
            );
        }
    };
    check(&db, "after the flush");
    for i in 0..600u32 {
        let old: Option<&[u8]> = i.is_multiple_of(2).then_some(b"first");
        assert_eq!(
            before_second.get(&key(i)).unwrap().as_deref(),
            old,
            "snapshot: key {i}"
        );
    }
    drop(before_second);

    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    check(&db, "after a reopen");
    assert_eq!(db.stats().levels[0].tables, 1);
}

/// The three memtables of the test above, each frozen (no flush runs:
/// the caller holds the flush lock or the flush thread is held back).
fn freeze_three(db: &Db) {
    freeze_first(db);
    freeze_second_and_third(db);
}

/// The first of [`freeze_three`]'s memtables: even keys.
fn freeze_first(db: &Db) {
    for i in (0..600).step_by(2) {
        db.put(&key(i), b"first").unwrap();
    }
    freeze(db);
}

/// The second and third of [`freeze_three`]'s memtables: overwrites and
/// deletes, odd keys, overwrites again.
fn freeze_second_and_third(db: &Db) {
    for i in (0..600u32).step_by(3) {
        if i.is_multiple_of(2) {
            db.put(&key(i), b"second").unwrap();
        } else {
            db.delete(&key(i)).unwrap();
        }
    }
    for i in (1..600).step_by(4) {
        db.put(&key(i), b"odd").unwrap();
    }
    freeze(db);
    for i in (0..600).step_by(5) {
        db.put(&key(i), b"third").unwrap();
    }
    freeze(db);
}

/// What `freeze_three` leaves for key `i`.
fn after_three(i: u32) -> Option<&'static [u8]> {
    if i.is_multiple_of(5) {
        Some(b"third")
    } else if i % 4 == 1 {
        Some(b"odd")
    } else if i.is_multiple_of(3) {
        i.is_multiple_of(2).then_some(b"second")
    } else {
        i.is_multiple_of(2).then_some(b"first")
    }
}

fn table_files(dir: &std::path::Path) -> usize {
    files_named(dir, "sst").len()
}

/// A power loss at every file-system operation of a merged flush (the
/// table, the manifest, the three WALs' removals) and of the synced writes
/// after it: every acknowledged write is back, no orphan table or WAL is
/// left, and neither the unlinks the power loss undoes (a seeded subset)
/// nor a manifest rename it keeps or undoes changes an answer.
#[test]
fn a_power_loss_anywhere_in_a_merged_flush_loses_no_acknowledged_write() {
    use crate::fs::fault::{FaultFs, RenameFate, Revival};
    use std::sync::Arc;
    let synced = || Options {
        sync: crate::SyncMode::Always,
        ..options()
    };
    // Returns (ops before the flush, ops at the end, writes after the flush acked).
    let run = |dir: &std::path::Path, fs: &FaultFs, crash_after: Option<u64>| {
        let db = Db::open_with_fs(dir, synced(), Arc::new(fs.clone())).unwrap();
        let held = db.inner.flush_lock.lock();
        freeze_three(&db);
        let start = fs.ops();
        if let Some(n) = crash_after {
            fs.fail_from_op(start + n);
        }
        drop(held);
        let _ = db.inner.flush_all_immutable();
        let mut acked = 0;
        for i in 0..20u32 {
            if db.put(&key(1000 + i), b"after").is_err() {
                break;
            }
            acked = i + 1;
        }
        let _ = db.wait_for_background_work();
        drop(db);
        (start, fs.ops(), acked)
    };
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let (start, end, acked) = run(dir.path(), &fs, None);
    assert_eq!(acked, 20);
    // A crash at the directory fsync after the manifest's rename is tried
    // with the rename undone and kept.
    for crash in 0..end - start {
        for fate in [RenameFate::Undone, RenameFate::Kept] {
            let dir = crate::scratch_dirs::scratch_dir();
            let fs = FaultFs::new();
            fs.set_revival(Revival::Seeded(crash));
            fs.set_rename_fate(fate);
            let (_, _, acked) = run(dir.path(), &fs, Some(crash));
            let renamed = fs.pending_renames() > 0;
            fs.simulate_power_loss().unwrap();
            let what = format!("crash at +{crash}, rename {fate:?}");
            let db = Db::open(dir.path(), options())
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
            for i in 0..600 {
                assert_eq!(
                    db.get(&key(i)).unwrap().as_deref(),
                    after_three(i),
                    "{what}: key {i}"
                );
            }
            for i in 0..acked {
                assert_eq!(
                    db.get(&key(1000 + i)).unwrap().as_deref(),
                    Some(&b"after"[..]),
                    "{what}: acknowledged write {i} lost"
                );
            }
            let live = db.stats().total.tables as usize;
            db.close().unwrap();
            assert_eq!(table_files(dir.path()), live, "{what}: orphan table");
            assert_eq!(wal_files(dir.path()), 1, "{what}: WAL left");
            if !renamed {
                break;
            }
        }
    }
}

/// A memtable frozen while the merged table is being written (after the
/// flush read the frozen ones) is left in the view, readable, with its
/// WAL, and goes in the next table: L0 stays in sequence order, a snapshot
/// taken between keeps its answers, and a reopen finds everything.
#[test]
fn a_memtable_frozen_during_a_merged_flush_goes_in_the_next_table() {
    use crate::fs::fault::FaultFs;
    use std::sync::Arc;
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    fs.set_hold_table_files(true);
    freeze_three(&db);
    // The flush thread has the three and waits to create the table.
    let started = std::time::Instant::now();
    while db.inner.flush_lock.try_lock().is_some() {
        assert!(started.elapsed().as_secs() < 10, "the flush never started");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let snap = db.snapshot();
    for i in (0..600).step_by(7) {
        db.delete(&key(i)).unwrap();
    }
    freeze(&db);
    assert_eq!(db.inner.current.load().imm.len(), 4);
    fs.set_hold_table_files(false);
    db.wait_for_background_work().unwrap();
    let sv = db.inner.current.load_full();
    assert!(sv.imm.is_empty());
    let l0 = &sv.version.levels[0];
    assert_eq!(l0.len(), 2, "the three, then the fourth");
    assert!(l0[0].meta.smallest_seq > l0[1].meta.largest_seq);
    drop(sv);
    let expected = |i: u32| {
        if i.is_multiple_of(7) {
            None
        } else {
            after_three(i)
        }
    };
    for i in 0..600 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), expected(i), "key {i}");
        assert_eq!(
            snap.get(&key(i)).unwrap().as_deref(),
            after_three(i),
            "snapshot: key {i}"
        );
    }
    drop(snap);
    assert_eq!(wal_files(dir.path()), 1);
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..600 {
        assert_eq!(
            db.get(&key(i)).unwrap().as_deref(),
            expected(i),
            "reopened: key {i}"
        );
    }
}

/// A merged flush that fails (its table refused) stops writes and leaves
/// the three memtables in the view, readable, with their WALs: no partial
/// table is left, `close` succeeds, and a reopen replays all three.
#[test]
fn a_failed_merged_flush_keeps_every_memtable_and_wal() {
    use crate::fs::fault::FaultFs;
    use std::sync::Arc;
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    let held = db.inner.flush_lock.lock();
    freeze_three(&db);
    fs.set_refuse_table_files(true);
    drop(held);
    // `Db::flush` (which stops writes on its failure, as the flush
    // thread's failure does, whichever of them runs the flush first).
    assert!(db.flush().is_err());
    assert!(matches!(
        db.put(&key(1), b"late"),
        Err(crate::Error::WritesStopped(_))
    ));
    assert_eq!(db.inner.current.load().imm.len(), 3);
    for i in 0..600 {
        assert_eq!(
            db.get(&key(i)).unwrap().as_deref(),
            after_three(i),
            "key {i}"
        );
    }
    assert_eq!(table_files(dir.path()), 0, "a partial table left");
    assert_eq!(wal_files(dir.path()), 4);
    // Writes stopped, so the close leaves no close marker and says why.
    assert!(matches!(db.close(), Err(crate::Error::WritesStopped(_))));
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..600 {
        assert_eq!(
            db.get(&key(i)).unwrap().as_deref(),
            after_three(i),
            "reopened: key {i}"
        );
    }
    assert_eq!(db.stats().levels[0].tables, 1);
}

/// A memtable frozen while a flush of an older one installs is not in that
/// flush, so the manifest the install writes must still name its WAL: the
/// oldest WAL it keeps is the oldest of the memtables left in memory, not
/// the active memtable's. Should the next flush then fail (writes stop,
/// nothing more is installed), a reopen replays that WAL and loses none of
/// the memtable's acknowledged writes. (With the active memtable's WAL
/// named instead, the reopen skipped the frozen one's WAL, deleted it as
/// an orphan, and read the first memtable's values back.)
#[test]
fn a_memtable_frozen_while_a_flush_installs_keeps_its_wal_through_a_failed_flush_and_a_reopen() {
    use crate::fs::fault::FaultFs;
    use std::sync::Arc;
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in 0..300 {
        db.put(&key(i), b"first").unwrap();
    }
    // The flush thread takes the first memtable and waits to create its
    // table (the store's writes go on meanwhile).
    fs.set_hold_table_files(true);
    freeze(&db);
    while fs.table_files_waiting() == 0 {
        std::thread::yield_now();
    }
    for i in (0..300).step_by(2) {
        db.put(&key(i), b"second").unwrap();
    }
    for i in (0..300).step_by(3) {
        db.delete(&key(i)).unwrap();
    }
    freeze(&db);
    assert_eq!(db.inner.current.load().imm.len(), 2);
    // The flush writes its table and reads the view its install edits
    // (the second memtable in it), then stops before the manifest write.
    let (paused, resume) = db.inner.before_manifest_pause.arm_once();
    fs.set_hold_table_files(false);
    paused.recv().unwrap();
    // The second memtable's flush, after the first one's install, fails.
    fs.set_refuse_table_files(true);
    resume.send(()).unwrap();
    assert!(db.wait_for_background_work().is_err());
    let sv = db.inner.current.load_full();
    assert_eq!(sv.version.levels[0].len(), 1, "the first memtable's table");
    assert_eq!(sv.imm.len(), 1, "the second memtable, not flushed");
    drop(sv);
    let expected = |i: u32| -> Option<&'static [u8]> {
        if i.is_multiple_of(3) {
            None
        } else if i.is_multiple_of(2) {
            Some(b"second")
        } else {
            Some(b"first")
        }
    };
    for i in 0..300 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), expected(i), "key {i}");
    }
    assert!(matches!(db.close(), Err(crate::Error::WritesStopped(_))));
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..300 {
        assert_eq!(
            db.get(&key(i)).unwrap().as_deref(),
            expected(i),
            "reopened: key {i}"
        );
    }
}

/// Memtables frozen while the flush fell behind that overwrite the same
/// hot keys: the merged table holds 2,000 distinct keys (its filter is
/// built from those), a smaller run than the 3,000-key level below, so the
/// optimum gives it more than uniform's bits, as it gives each table of a
/// flush per memtable. Planned for the memtables' 8,000 entries instead,
/// it was priced as the largest run and built at 9.47 bits per key, an L0
/// table under uniform's bits (`rebalance_tests` holds L0 to at least b).
#[test]
fn a_merged_flush_of_overwrites_plans_its_filter_for_its_distinct_keys() {
    use std::sync::Arc;
    const BITS: f64 = 10.0;
    let opts = || Options {
        filter_policy: crate::FilterPolicy::Optimized { bits_per_key: BITS },
        ..options()
    };
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..3000 {
        db.put(&key(100_000 + i), b"deep").unwrap();
    }
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    // The L0 table's bits per distinct key as its flush installs it
    // (before any rebalancing rebuild could raise it).
    let at_flush = Arc::new(parking_lot::Mutex::new(None));
    let into = Arc::clone(&at_flush);
    db.inner
        .install_hook
        .set(Some(Arc::new(move |s: &crate::Stats, _: &[Vec<u64>]| {
            let mut seen = into.lock();
            if seen.is_none() && s.levels[0].tables == 1 {
                *seen = Some(s.levels[0].bits_per_key);
            }
        })));
    let held = db.inner.flush_lock.lock();
    for round in 0..4u32 {
        for i in 0..2000 {
            db.put(&key(i), format!("hot{round}").as_bytes()).unwrap();
        }
        freeze(&db);
    }
    drop(held);
    db.inner.flush_all_immutable().unwrap();
    let bits = at_flush.lock().expect("the flush installed one L0 table");
    assert!(
        bits >= BITS,
        "a 2,000-key L0 table over a 3,000-key level got {bits:.2} bits per key, under {BITS}"
    );
    for i in 0..2000 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"hot3"[..]));
    }
}

/// `Db::flush` under a sustained load: writers that freeze a memtable
/// during every flush the call makes must not keep the call going. It
/// writes what was frozen when its flush began (the memtable it froze
/// and every one before it) and returns. Before, it went on while any
/// frozen memtable was left, so under a load that kept freezing them it
/// never returned. Here a hook at the start of each flush step of the
/// calling thread has another thread write (its own inline work then
/// waits for the flush lock this thread holds) and freezes the memtable
/// holding that write, as other writers would; it gives up (and the
/// test fails) at `STEPS` steps.
///
/// Without background threads: a flush thread woken by the call's
/// freeze could take the flush lock first and write the memtable itself,
/// and the call's flush then found nothing to do (0 steps, no write
/// during it: the test failed 15 times in 60 runs that way).
#[test]
fn a_flush_returns_while_writers_keep_freezing_memtables() {
    const STEPS: u32 = 20;
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        background_work: false,
        max_immutable_memtables: 1000,
        l0_slowdown_trigger: 1000,
        l0_stop_trigger: 1000,
        ..options()
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    for i in 0..100 {
        db.put(&key(i), b"before").unwrap();
    }
    let caller = std::thread::current().id();
    let steps = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let others = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let weak = Arc::downgrade(&db);
    let (counted, spawned) = (Arc::clone(&steps), Arc::clone(&others));
    db.inner.flush_pause.set(Some(Arc::new(move || {
        if std::thread::current().id() != caller {
            return;
        }
        let step = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let Some(db) = weak.upgrade() else { return };
        if step < STEPS {
            let before = db.last_sequence();
            let writer = Arc::clone(&db);
            let other = std::thread::spawn(move || {
                writer.put(&key(1000 + step), b"during").unwrap();
            });
            // Its write is in the memtable once visible; its inline work
            // waits for this flush. (A put that failed ends its thread:
            // the join below reports it, rather than this loop spinning.)
            while db.last_sequence() == before && !other.is_finished() {
                std::thread::yield_now();
            }
            spawned.lock().push(other);
            freeze(&db);
        }
    })));
    db.flush().unwrap();
    db.inner.flush_pause.set(None);
    let steps = steps.load(std::sync::atomic::Ordering::SeqCst);
    for other in others.lock().drain(..) {
        other.join().unwrap();
    }
    assert_eq!(
        steps, 1,
        "the flush made {steps} steps while writers froze a memtable in each"
    );
    // What was written before the call is in a table (no memtable holds
    // it), and the writes during the call are readable wherever they are.
    let in_tables: u64 = db.stats().levels.iter().map(|l| l.entries).sum();
    assert!(in_tables >= 100, "{in_tables} entries in tables");
    for i in 0..100 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"before"[..]));
    }
    for step in 0..steps.min(STEPS) {
        let k = key(1000 + step);
        assert_eq!(db.get(&k).unwrap().as_deref(), Some(&b"during"[..]));
    }
    db.wait_for_background_work().unwrap();
}
