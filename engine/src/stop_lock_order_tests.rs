//! Every stop made outside the write path takes the write lock
//! (`DbInner::stop_writes_outside_writes`: a failed job, a failed manifest
//! write, an install's panic), and the write lock is not reentrant. So no
//! thread may reach such a stop while it holds the write lock, nor while
//! it holds a lock that a thread holding the write lock waits for. This
//! drives every caller at once (writers, `flush`, `wait_for_background_work`,
//! `rebuild_filters`, snapshots, inline and background work, both sync
//! modes) on a deep tree of narrow tables while a failure or a panic is
//! injected at a file operation or a pause point on every path that
//! stops: a file system failing from some operation on, or at one
//! operation only (WAL appends, rotations, table writes, manifest writes), or a panic in a write's
//! insert, a rotation, a flush, a merge, a filter rebuild, or an install
//! before or after its manifest write. Each run must end (a watchdog
//! names the case that hangs), refuse writes afterwards, and a reopen
//! must hold every acknowledged write.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::fs::fault::FaultFs;
use crate::inner::DbInner;
use crate::test_hooks::ReadPause;
use crate::{Db, Error, FilterPolicy, Options, SyncMode};

fn options(sync: SyncMode, background_work: bool) -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        block_size: 256,
        l1_bytes: 16 << 10,
        sync,
        background_work,
        ..Options::default()
    }
}

/// What goes wrong.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Every file operation from this many after the start fails.
    FsFrom(u64),
    /// Only the file operation this many after the start fails (others
    /// go on: jobs in flight install after the stop).
    FsOnly(u64),
    /// The `n`th thread through this pause point panics.
    Panic(Point, u64),
}

#[derive(Clone, Copy, Debug)]
enum Point {
    Insert,
    Rotate,
    Flush,
    Merge,
    Rebuild,
    BeforeManifest,
    AfterManifest,
}

fn pause(inner: &DbInner, point: Point) -> &ReadPause {
    match point {
        Point::Insert => &inner.insert_pause,
        Point::Rotate => &inner.rotate_pause,
        Point::Flush => &inner.flush_pause,
        Point::Merge => &inner.merge_pause,
        Point::Rebuild => &inner.rebuild_pause,
        Point::BeforeManifest => &inner.before_manifest_pause,
        Point::AfterManifest => &inner.after_manifest_pause,
    }
}

fn value(thread: usize, i: u32) -> Vec<u8> {
    format!("{thread}-{i}-")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(150)
        .collect()
}

/// Runs the workload with `fault`; returns the acknowledged writes.
fn workload(db: &Arc<Db>, fs: &FaultFs, fault: Fault) -> Vec<(Vec<u8>, Vec<u8>)> {
    match fault {
        Fault::FsFrom(k) => fs.fail_from_op(fs.ops() + k),
        Fault::FsOnly(k) => fs.fail_only_op(fs.ops() + k),
        Fault::Panic(point, n) => {
            let seen = AtomicU64::new(0);
            pause(&db.inner, point).set(Some(Arc::new(move || {
                if seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    panic!("injected panic");
                }
            })));
        }
    }
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let db = Arc::clone(db);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..800u32 {
                    let key = format!("k{:05}-{t}", (i * 7919 + t as u32 * 13) % 3000).into_bytes();
                    let v = value(t, i);
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        db.put(&key, &v)
                    })) {
                        Ok(Ok(())) => acked.push((key, v)),
                        Ok(Err(Error::WritesStopped(_))) => break,
                        // The failing write itself: its own error.
                        Ok(Err(_)) | Err(_) => {}
                    }
                }
                acked
            })
        })
        .collect();
    let maintainer = {
        let db = Arc::clone(db);
        std::thread::spawn(move || {
            for round in 0..200u32 {
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match round % 4 {
                        0 | 2 => db.flush(),
                        1 => db.wait_for_background_work(),
                        _ => db.rebuild_filters(FilterPolicy::Uniform {
                            bits_per_key: if round % 8 == 3 { 6.0 } else { 10.0 },
                        }),
                    }));
                if let Ok(Err(Error::WritesStopped(_))) = result {
                    break;
                }
            }
        })
    };
    let reader = {
        let db = Arc::clone(db);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for i in 0..300u32 {
                held.push(db.snapshot());
                if held.len() > 4 {
                    let s = held.remove((i as usize * 3) % held.len());
                    let _ = s.get(b"k00001-0");
                }
                let _ = db.get(format!("k{:05}-1", i % 3000).as_bytes());
                if db.inner.write_error.lock().is_some() && i > 50 {
                    break;
                }
            }
        })
    };
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.join().unwrap());
    }
    maintainer.join().unwrap();
    reader.join().unwrap();
    acked
}

fn run(fault: Fault, sync: SyncMode, background_work: bool) {
    let case = format!("{fault:?} {sync:?} background_work {background_work}");
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let opts = options(sync, background_work);
    let db = Arc::new(Db::open_with_fs(dir.path(), opts.clone(), Arc::new(fs.clone())).unwrap());
    // A deep tree of narrow tables first.
    for i in 0..1500u32 {
        db.put(
            format!("k{:05}-9", (i * 104_729) % 3000).as_bytes(),
            &value(9, i),
        )
        .unwrap();
    }
    db.wait_for_background_work().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let runner = {
        let db = Arc::clone(&db);
        let fs = fs.clone();
        std::thread::spawn(move || {
            let acked = workload(&db, &fs, fault);
            done_tx.send(()).unwrap();
            acked
        })
    };
    // Not a timing assertion: a run takes seconds; only a deadlock
    // takes this long.
    if done_rx.recv_timeout(Duration::from_secs(300)).is_err() {
        panic!("{case}: hung (a thread waits for the write lock it or a waiter holds)");
    }
    let acked = runner.join().unwrap();
    eprintln!(
        "{case}: {} acked, stopped {:?}, levels {:?}",
        acked.len(),
        db.inner.write_error.lock().as_ref().map(|s| s.to_string()),
        db.stats()
            .levels
            .iter()
            .map(|l| l.tables)
            .collect::<Vec<_>>()
    );
    for p in [
        Point::Insert,
        Point::Rotate,
        Point::Flush,
        Point::Merge,
        Point::Rebuild,
        Point::BeforeManifest,
        Point::AfterManifest,
    ] {
        pause(&db.inner, p).set(None);
    }
    fs.heal();
    let _ = Arc::try_unwrap(db)
        .unwrap_or_else(|_| panic!("{case}: Db still shared"))
        .close();
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(fs.clone())).unwrap();
    // Later writes of a key win: check the last acknowledged value.
    let mut last = std::collections::BTreeMap::new();
    for (k, v) in acked {
        last.insert(k, v);
    }
    for (k, v) in &last {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(&v[..]),
            "{case}: acknowledged write of {} lost",
            String::from_utf8_lossy(k)
        );
    }
    db.close().unwrap();
}

#[test]
fn no_stop_deadlocks_on_the_write_lock_whatever_fails() {
    let faults = [
        Fault::FsFrom(3),
        Fault::FsFrom(40),
        Fault::FsFrom(150),
        Fault::FsOnly(2),
        Fault::FsOnly(17),
        Fault::FsOnly(45),
        Fault::FsOnly(90),
        Fault::FsOnly(160),
        Fault::FsOnly(260),
        Fault::Panic(Point::Insert, 300),
        Fault::Panic(Point::Rotate, 6),
        Fault::Panic(Point::Flush, 5),
        Fault::Panic(Point::Merge, 3),
        Fault::Panic(Point::Rebuild, 2),
        Fault::Panic(Point::BeforeManifest, 8),
        Fault::Panic(Point::AfterManifest, 8),
    ];
    for background_work in [true, false] {
        for sync in [SyncMode::Always, SyncMode::Never] {
            for fault in faults {
                run(fault, sync, background_work);
            }
        }
    }
}
