//! Another opener works on the store between an open's first look at the
//! directory and its taking of the lock (another process starting the
//! store, or closing it, in that window). The open must see the store as
//! it is once the lock is held: nothing another holder wrote may be lost.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::fs::{DirLock, FileSystem, FsResult, RealFs};
use bloomlsm::{Db, Options};
use bloomlsm_sstable::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;

use common::real_fs_methods::real_fs_methods;

type Hook = Box<dyn FnOnce() + Send>;

/// The real file system, except that the first `lock` first runs a hook
/// (what another opener does while this open has not yet taken the
/// lock), the first `create` runs one after it, and direct opens may be
/// refused (as a file system without `O_DIRECT` does).
struct BeforeLockFs {
    hook: Mutex<Option<Hook>>,
    after_create: Mutex<Option<Hook>>,
    /// Runs once, right after this file system unlinked a LOCK.
    after_lock_removed: Mutex<Option<Hook>>,
    refuse_direct: bool,
}

impl std::fmt::Debug for BeforeLockFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeLockFs")
    }
}

impl BeforeLockFs {
    fn new(hook: impl FnOnce() + Send + 'static) -> Arc<Self> {
        Arc::new(Self {
            hook: Mutex::new(Some(Box::new(hook))),
            after_create: Mutex::new(None),
            after_lock_removed: Mutex::new(None),
            refuse_direct: false,
        })
    }

    /// Refuses direct opens; runs `before_lock` and `after_create` once.
    fn refusing_direct(
        before_lock: impl FnOnce() + Send + 'static,
        after_create: impl FnOnce() + Send + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            hook: Mutex::new(Some(Box::new(before_lock))),
            after_create: Mutex::new(Some(Box::new(after_create))),
            after_lock_removed: Mutex::new(None),
            refuse_direct: true,
        })
    }
}

impl FileSystem for BeforeLockFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        let file = RealFs.create(path);
        let hook = self.after_create.lock().take();
        if let Some(hook) = hook {
            hook();
        }
        file
    }
    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        if self.refuse_direct {
            return Err(bloomlsm::fs::FsError {
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::Unsupported, "no O_DIRECT"),
            });
        }
        RealFs.open_read_direct(path)
    }
    fn remove(&self, path: &Path) -> FsResult<()> {
        let removed = RealFs.remove(path);
        if path.file_name().is_some_and(|n| n == "LOCK") {
            let hook = self.after_lock_removed.lock().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        removed
    }
    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        let hook = self.hook.lock().take();
        if let Some(hook) = hook {
            hook();
        }
        RealFs.lock(path)
    }
    real_fs_methods!(open_read read_all rename list create_dir_all remove_dir sync_dir exists);
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Another opener's whole session: open, `n` writes from `first` (the
/// first half flushed to a table, the rest only in the WAL), close.
fn session(dir: PathBuf, first: u32, n: u32) -> impl FnOnce() + Send {
    move || {
        let db = Db::open(&dir, Options::default()).unwrap();
        for i in first..first + n / 2 {
            db.put(&key(i), b"v").unwrap();
        }
        db.flush().unwrap();
        for i in first + n / 2..first + n {
            db.put(&key(i), b"v").unwrap();
        }
        db.close().unwrap();
    }
}

fn assert_all(db: &Db, range: std::ops::Range<u32>, when: &str) {
    let missing: Vec<u32> = range
        .filter(|&i| db.get(&key(i)).unwrap().is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "{when}: {} keys lost, from {:?}",
        missing.len(),
        missing.first()
    );
}

/// Two processes start on a new store at once: the other creates it,
/// writes and closes while this open (which saw an empty directory) waits
/// for the lock. This open must not write a new store's manifest over it.
#[test]
fn a_store_created_while_an_open_waits_for_the_lock_is_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    let fs = BeforeLockFs::new(session(dir.clone(), 0, 200));
    let db = Db::open_with_fs(&dir, Options::default(), fs).unwrap();
    assert_all(&db, 0..200, "after the racing open");
    db.close().unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_all(&db, 0..200, "after a reopen");
}

/// A rolling restart: the new process retries its open while the old one
/// runs; the old one reopens, writes and closes (its last writes in its
/// WAL) between the new open's listing and its lock. Those acknowledged
/// writes must be recovered.
#[test]
fn writes_of_a_session_between_listing_and_lock_are_recovered() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    session(dir.clone(), 0, 100)();
    let fs = BeforeLockFs::new(session(dir.clone(), 100, 100));
    let db = Db::open_with_fs(&dir, Options::default(), fs).unwrap();
    assert_all(&db, 0..200, "after the racing open");
    db.close().unwrap();
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_all(&db, 0..200, "after a reopen");
}

/// Set in a child process of `never_two_holders_under_churn`: the store
/// directory, the marker directory and the number of rounds.
const CHURN_ENV: &str = "BLOOMLSM_LOCK_CHURN";

/// One opener's loop until it held the store `rounds` times: each round
/// tries to open it (one round in
/// four with options the open refuses after it took the lock); a holder
/// creates the marker (refused if another holder made it), writes, removes
/// the marker and closes. Returns the rounds that found the marker.
fn churn(dir: &Path, marker: &Path, rounds: u32, tag: u32) -> u32 {
    use bloomlsm::fs::fault::FaultFs;
    let mut violations = 0;
    let (mut held, mut round) = (0, 0u32);
    while held < rounds {
        round += 1;
        let refused = round % 4 == 3;
        let opened = if refused {
            let fs = Arc::new(FaultFs::new());
            fs.set_refuse_direct_io(true);
            let options = Options {
                use_direct_reads: true,
                ..Options::default()
            };
            Db::open_with_fs(dir, options, fs)
        } else {
            Db::open(dir, Options::default())
        };
        let db = match opened {
            Ok(db) => db,
            Err(bloomlsm::Error::Locked { .. }) => continue,
            Err(e) if refused => {
                let _ = e;
                continue;
            }
            Err(e) => panic!("round {round}: {e}"),
        };
        assert!(!refused, "an open with direct I/O refused succeeded");
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(marker)
        {
            Ok(_) => {}
            Err(_) => violations += 1,
        }
        held += 1;
        db.put(&key(tag * 1_000_000 + held), b"v").unwrap();
        let _ = std::fs::remove_file(marker);
        db.close().unwrap();
    }
    violations
}

#[test]
fn lock_churn_child_entry() {
    let Ok(spec) = std::env::var(CHURN_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let violations = churn(
        Path::new(parts[0]),
        Path::new(parts[1]),
        parts[2].parse().unwrap(),
        parts[3].parse().unwrap(),
    );
    println!("CHURN-VIOLATIONS: {violations}");
}

/// Opens and closes from threads of this process and from two other
/// processes, some opens failing after they took the lock, while a thread
/// spawns processes all along (the window in which a `flock` was held by a
/// child between fork and exec): at no moment do two opens hold the store.
#[test]
fn never_two_holders_under_churn() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    let marker = scratch.path().join("HOLDER");
    let rounds = 40u32;
    let spawn_child = |tag: u32| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lock_churn_child_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(
                CHURN_ENV,
                format!("{}|{}|{rounds}|{tag}", dir.display(), marker.display()),
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children: Vec<_> = (10..12).map(spawn_child).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawned_so_far = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let spawner = {
        let (stop, so_far) = (Arc::clone(&stop), Arc::clone(&spawned_so_far));
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::process::Command::new("true").status().unwrap();
                n += 1;
                so_far.store(n, std::sync::atomic::Ordering::Release);
            }
            n
        })
    };
    let threads: Vec<_> = (0..3)
        .map(|tag| {
            let (dir, marker) = (dir.clone(), marker.clone());
            std::thread::spawn(move || churn(&dir, &marker, rounds, tag))
        })
        .collect();
    // A spawn has run (or the spawner ended: its join reports why) before
    // the churn is awaited, so spawns race it whatever the scheduler does:
    // left to it, a spawner that got no CPU before the churn ended spawned
    // nothing and failed the check below.
    while spawned_so_far.load(std::sync::atomic::Ordering::Acquire) == 0 && !spawner.is_finished() {
        std::thread::yield_now();
    }
    let mut violations: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {stdout}");
        violations += stdout
            .lines()
            .find_map(|l| l.split_once("CHURN-VIOLATIONS: "))
            .map(|(_, n)| n.trim().parse::<u32>().unwrap())
            .unwrap_or_else(|| panic!("no outcome: {stdout}"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let spawned = spawner.join().unwrap();
    assert!(spawned > 0);
    assert_eq!(violations, 0, "two holders at once");
    let db = Db::open(&dir, Options::default()).unwrap();
    for tag in [0, 1, 2, 10, 11] {
        for held in 1..=rounds {
            assert!(db.get(&key(tag * 1_000_000 + held)).unwrap().is_some());
        }
    }
}

/// Two first opens of a new store, both refused after taking the lock
/// (direct I/O refused). The second lists the directory while the first
/// holds the LOCK it created, so the LOCK the second finds once the first
/// removed it is one the second creates. Neither may leave a file behind.
#[test]
fn racing_failed_opens_leave_no_lock_file() {
    use std::sync::mpsc::channel;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    std::fs::create_dir(&dir).unwrap();
    let options = Options {
        use_direct_reads: true,
        ..Options::default()
    };
    // first_holds: the first open holds its LOCK; second_waits: the second
    // has listed and waits to lock; first_done: the first open returned.
    let (first_holds_tx, first_holds_rx) = channel::<()>();
    let (second_waits_tx, second_waits_rx) = channel::<()>();
    let (first_done_tx, first_done_rx) = channel::<()>();
    let second = {
        let (dir, options) = (dir.clone(), options.clone());
        std::thread::spawn(move || {
            first_holds_rx.recv().unwrap();
            let fs = BeforeLockFs::refusing_direct(
                move || {
                    second_waits_tx.send(()).unwrap();
                    first_done_rx.recv().unwrap();
                },
                || {},
            );
            Db::open_with_fs(&dir, options, fs).map(|_| ())
        })
    };
    let fs = BeforeLockFs::refusing_direct(
        || {},
        move || {
            first_holds_tx.send(()).unwrap();
            second_waits_rx.recv().unwrap();
        },
    );
    assert!(Db::open_with_fs(&dir, options, fs).is_err());
    first_done_tx.send(()).unwrap();
    assert!(second.join().unwrap().is_err());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "failed opens left {left:?}");
}

/// Set in a child process: the store directory `other_process_open` tries.
const OTHER_DIR_ENV: &str = "BLOOMLSM_LOCK_RACES_OTHER_DIR";

#[test]
fn lock_races_other_entry() {
    let Ok(dir) = std::env::var(OTHER_DIR_ENV) else {
        return;
    };
    let outcome = match Db::open(Path::new(&dir), Options::default()) {
        Ok(db) => {
            db.close().unwrap();
            "opened".to_string()
        }
        Err(bloomlsm::Error::Locked { .. }) => "locked".to_string(),
        Err(e) => format!("error: {e}"),
    };
    println!("OTHER-OUTCOME: {outcome}");
}

/// What an open of `dir` in another process answers.
fn other_process_open(dir: &Path) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_races_other_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(OTHER_DIR_ENV, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("OTHER-OUTCOME: ").map(|(_, o)| o.to_string()))
        .unwrap_or_else(|| panic!("no outcome: {stdout}"))
}

/// A first open of a new store fails after it created the directory and
/// LOCK; right after it unlinked LOCK (still holding that file, released
/// only after the undo) an open in this process takes the store and
/// writes. The failed open's release of the unlinked file and its removal
/// of the directory must leave that store whole and held.
#[test]
fn an_open_between_a_failed_opens_unlink_and_release_keeps_the_store() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("store");
    let slot: Arc<Mutex<Option<Db>>> = Arc::new(Mutex::new(None));
    let fs = Arc::new(BeforeLockFs {
        hook: Mutex::new(None),
        after_create: Mutex::new(None),
        after_lock_removed: Mutex::new(Some(Box::new({
            let (dir, slot) = (dir.clone(), Arc::clone(&slot));
            move || {
                let db = Db::open(&dir, Options::default()).unwrap();
                for i in 0..100 {
                    db.put(&key(i), b"v").unwrap();
                }
                *slot.lock() = Some(db);
            }
        }))),
        refuse_direct: true,
    });
    let options = Options {
        use_direct_reads: true,
        ..Options::default()
    };
    assert!(Db::open_with_fs(&dir, options, fs).is_err());
    let db = slot.lock().take().expect("the open in the window");
    assert!(matches!(
        Db::open(&dir, Options::default()),
        Err(bloomlsm::Error::Locked { .. })
    ));
    assert_eq!(other_process_open(&dir), "locked");
    assert_all(&db, 0..100, "while held");
    db.close().unwrap();
    assert_eq!(other_process_open(&dir), "opened");
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_all(&db, 0..100, "after a reopen");
}
