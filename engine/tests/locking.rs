//! The directory lock: one open store per directory, across processes and
//! within one, and no false refusals after a close.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};

use bloomlsm::{Db, Error, Options};
use common::child_entry::entry_outcome;
use common::direct_reads_work;

/// Set in a child process: the store directory it tries to open.
const CHILD_DIR_ENV: &str = "BLOOMLSM_LOCK_CHILD_DIR";
/// Set in a child process: "direct" to open with `use_direct_reads`.
const CHILD_MODE_ENV: &str = "BLOOMLSM_LOCK_CHILD_MODE";

fn options(direct: bool) -> Options {
    Options {
        use_direct_reads: direct,
        ..Options::default()
    }
}

/// The body of the child process of `open_in_another_process`; does
/// nothing when run as an ordinary test.
#[test]
fn lock_child_entry() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let direct = std::env::var(CHILD_MODE_ENV).is_ok_and(|m| m == "direct");
    let outcome = match Db::open(Path::new(&dir), options(direct)) {
        Ok(db) => {
            db.close().unwrap();
            "opened".to_string()
        }
        Err(Error::Locked { .. }) => "locked".to_string(),
        Err(e) => format!("error: {e}"),
    };
    println!("CHILD-OUTCOME: {outcome}");
}

/// What `Db::open` of `dir` answers in a separate process: "opened",
/// "locked" or "error: ...".
fn open_in_another_process(dir: &Path, direct: bool) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_child_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_MODE_ENV, if direct { "direct" } else { "cached" })
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-OUTCOME: ").map(|(_, outcome)| outcome))
        .unwrap_or_else(|| panic!("no outcome from the child: {stdout}"))
        .to_string()
}

#[test]
fn another_process_is_refused_while_the_store_is_open() {
    let scratch = tempfile::tempdir().unwrap();
    let mut modes = vec![false];
    if direct_reads_work(scratch.path()) {
        // The open's direct-I/O check must not touch LOCK: closing any
        // descriptor of it would drop this process's record lock.
        modes.push(true);
    }
    for direct in modes {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(direct)).unwrap();
        db.put(b"k", b"v").unwrap();
        assert_eq!(open_in_another_process(dir.path(), direct), "locked");
        // Refused opens in this process, by the same path and by another
        // path to the directory, leave the lock held against others.
        assert!(matches!(
            Db::open(dir.path(), options(direct)),
            Err(Error::Locked { .. })
        ));
        let link = scratch.path().join(format!("link-{direct}"));
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(matches!(
            Db::open(&link, options(direct)),
            Err(Error::Locked { .. })
        ));
        assert_eq!(open_in_another_process(dir.path(), direct), "locked");
        db.close().unwrap();
        assert_eq!(open_in_another_process(dir.path(), direct), "opened");
        let db = Db::open(&link, options(direct)).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(open_in_another_process(dir.path(), direct), "locked");
        drop(db); // a drop releases the lock as a close does
        assert_eq!(open_in_another_process(dir.path(), direct), "opened");
    }
}

/// A child forked while the store is open keeps a copy of every
/// descriptor until it execs or exits (here: until the parent lets it
/// go). The lock is not among what it holds: the parent closes and
/// reopens the store in that window, and another process is refused while
/// the parent has it open, before and after the child exits.
#[test]
fn a_forked_child_does_not_keep_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_end, write_end] = fds;
    // SAFETY: the child calls only async-signal-safe functions (close,
    // read, _exit) before it exits, as a child of a threaded process must.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut byte = 0u8;
        // SAFETY: descriptors from `pipe` above; `byte` outlives the read.
        unsafe {
            libc::close(write_end);
            libc::read(read_end, (&raw mut byte).cast(), 1);
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's copy of the read end is not used again.
    unsafe { libc::close(read_end) };
    db.close().unwrap();
    let reopened = Db::open(dir.path(), Options::default());
    let mut again = None;
    if let Ok(db) = &reopened {
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        again = Some(open_in_another_process(dir.path(), false));
    }
    // Let the child go before any assertion can fail.
    let mut status = 0;
    // SAFETY: closing the write end ends the child's read; `status` is a
    // valid out-parameter for waitpid.
    unsafe {
        libc::close(write_end);
        libc::waitpid(pid, &raw mut status, 0);
    }
    let db = reopened.unwrap();
    assert_eq!(again.as_deref(), Some("locked"));
    // The child's exit closed its copies of the descriptors: the lock the
    // parent took after the fork is still held.
    assert_eq!(open_in_another_process(dir.path(), false), "locked");
    db.close().unwrap();
}

#[test]
fn racing_opens_in_one_process_admit_exactly_one() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let threads = 6;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                let path = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    barrier.wait();
                    Db::open(&path, Options::default())
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let mut open = Vec::new();
        for r in results {
            match r {
                Ok(db) => open.push(db),
                Err(Error::Locked { .. }) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        assert_eq!(open.len(), 1, "round {round}: exactly one open wins");
        let db = open.pop().unwrap();
        db.put(&[round], b"v").unwrap();
        assert_eq!(open_in_another_process(dir.path(), false), "locked");
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for round in 0..20u8 {
        assert_eq!(db.get(&[round]).unwrap(), Some(b"v".to_vec()));
    }
}

/// Set in a child process: the store directory the fork scenario of
/// `a_forked_child_can_open_the_store_once_the_parent_closes_it` uses.
const FORK_DIR_ENV: &str = "BLOOMLSM_LOCK_FORK_DIR";

/// 0 opened (and closed again), 1 locked, 2 any other error.
fn open_code(dir: &Path) -> u8 {
    match Db::open(dir, Options::default()) {
        Ok(db) => match db.close() {
            Ok(()) => 0,
            Err(_) => 2,
        },
        Err(Error::Locked { .. }) => 1,
        Err(_) => 2,
    }
}

fn code_name(code: u8) -> &'static str {
    match code {
        0 => "opened",
        1 => "locked",
        _ => "error",
    }
}

/// The body of the process `a_forked_child_can_open_the_store_once_the_parent_closes_it`
/// starts (one test thread, so no other test holds a lock across the
/// fork); does nothing when run as an ordinary test. It opens a store,
/// forks a child (no exec), and the child tries to open the store while
/// the parent has it open and again after the parent closed it.
#[test]
fn lock_fork_entry() {
    let Ok(dir) = std::env::var(FORK_DIR_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let db = Db::open(dir, Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let (mut to_child, mut to_parent) = ([0; 2], [0; 2]);
    // SAFETY: each array is a valid pair of descriptors for pipe to fill.
    unsafe {
        assert_eq!(libc::pipe(to_child.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(to_parent.as_mut_ptr()), 0);
    }
    // SAFETY: the child never returns into the test harness: it ends with
    // _exit. It opens a store after the fork (glibc's malloc is fork-safe,
    // and this process runs one test, so no thread holds a store lock).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let while_held = open_code(dir);
        let mut byte = 0u8;
        // SAFETY: descriptors from `pipe` above; the buffers outlive the calls.
        unsafe {
            libc::write(to_parent[1], (&raw const while_held).cast(), 1);
            libc::read(to_child[0], (&raw mut byte).cast(), 1);
        }
        let after_close = open_code(dir);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(i32::from(after_close)) };
    }
    let mut while_held = 9u8;
    // SAFETY: descriptors from `pipe` above; `while_held` outlives the read.
    unsafe { libc::read(to_parent[0], (&raw mut while_held).cast(), 1) };
    db.close().unwrap();
    let mut status = 0;
    // SAFETY: the write lets the child go; `status` is a valid out-parameter.
    unsafe {
        libc::write(to_child[1], (&raw const while_held).cast(), 1);
        libc::waitpid(pid, &raw mut status, 0);
    }
    assert!(libc::WIFEXITED(status), "child died: {status}");
    let after_close = libc::WEXITSTATUS(status) as u8;
    println!(
        "CHILD-OUTCOME: {}/{}",
        code_name(while_held),
        code_name(after_close)
    );
}

/// A pre-forking server opens its store, forks workers (no exec) and
/// closes it; a worker then opens the store. The child inherited the
/// parent's table of held locks: it must be refused while the parent holds
/// the store, and admitted once the parent has closed it (no process
/// holds the lock then).
#[test]
fn a_forked_child_can_open_the_store_once_the_parent_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = entry_outcome("lock_fork_entry", FORK_DIR_ENV, dir.path(), "CHILD-OUTCOME");
    assert_eq!(outcome, "locked/opened");
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Each way an open fails after it took the lock (a damaged table, direct
/// I/O refused on an existing store and on a new one, a damaged manifest)
/// releases it at once: another process and an open in this one are not
/// refused `Locked`, and the open that then succeeds holds the store
/// against another process. A new store's failed open leaves nothing.
#[test]
fn every_failed_open_releases_the_lock() {
    use bloomlsm::fs::fault::FaultFs;
    let build = |dir: &Path| {
        let db = Db::open(dir, Options::default()).unwrap();
        for i in 0..2000u32 {
            db.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
        db.close().unwrap();
    };
    let refusing_direct = || {
        let fs = Arc::new(FaultFs::new());
        fs.set_refuse_direct_io(true);
        fs
    };

    // A damaged table (cut short): refused after the lock was taken.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let table = common::only_table(dir.path());
    let whole = std::fs::read(&table).unwrap();
    std::fs::write(&table, &whole[..whole.len() - 10]).unwrap();
    let refused = Db::open(dir.path(), Options::default());
    assert!(refused.is_err() && !matches!(refused, Err(Error::Locked { .. })));
    assert!(open_in_another_process(dir.path(), false).starts_with("error"));
    std::fs::write(&table, &whole).unwrap();
    assert_eq!(open_in_another_process(dir.path(), false), "opened");
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(open_in_another_process(dir.path(), false), "locked");
    db.close().unwrap();

    // Direct I/O refused, on the existing store and on a new one.
    let refused = Db::open_with_fs(dir.path(), options(true), refusing_direct());
    assert!(refused.is_err() && !matches!(refused, Err(Error::Locked { .. })));
    assert_eq!(open_in_another_process(dir.path(), false), "opened");
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(open_in_another_process(dir.path(), false), "locked");
    drop(db);
    let scratch = tempfile::tempdir().unwrap();
    let fresh = scratch.path().join("new");
    let refused = Db::open_with_fs(&fresh, options(true), refusing_direct());
    assert!(refused.is_err() && !matches!(refused, Err(Error::Locked { .. })));
    assert!(!fresh.exists(), "the failed open left its directory");
    assert_eq!(open_in_another_process(&fresh, false), "opened");
    let db = Db::open(&fresh, Options::default()).unwrap();
    assert_eq!(open_in_another_process(&fresh, false), "locked");
    drop(db);

    // A damaged manifest: refused as damage, never as Locked, here and in
    // another process, and the store is not held afterwards.
    let manifest = dir.path().join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&manifest, &bytes).unwrap();
    for _ in 0..2 {
        let refused = Db::open(dir.path(), Options::default());
        assert!(refused.is_err() && !matches!(refused, Err(Error::Locked { .. })));
        let other = open_in_another_process(dir.path(), false);
        assert!(other.starts_with("error"), "{other}");
    }
}

/// Set in the process `a_store_used_after_a_daemonizing_fork_is_not_written_unlocked`
/// starts: the store directory.
const DAEMON_DIR_ENV: &str = "BLOOMLSM_LOCK_DAEMON_DIR";

/// The body of that process: opens a store (no background threads, so a
/// forked copy of the `Db` can work), forks and exits at once without
/// closing it, as a daemon does after its setup. The child waits until
/// its parent is gone, writes through the `Db` it inherited, reports
/// whether the write was accepted, and waits for the test to let it go.
#[test]
fn lock_daemon_entry() {
    let Ok(dir) = std::env::var(DAEMON_DIR_ENV) else {
        return;
    };
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(Path::new(&dir), options).unwrap();
    db.put(b"before", b"fork").unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe to fill.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [parent_gone, parent_alive] = fds;
    // SAFETY: this process runs one test; the parent leaves with _exit, the
    // child with _exit after its report.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid != 0 {
        // SAFETY: the daemon's parent leaves without closing the store.
        unsafe { libc::_exit(0) };
    }
    let mut byte = 0u8;
    // SAFETY: descriptors from `pipe`; the read returns at the parent's exit
    // (end of file once no process holds the write end).
    unsafe {
        libc::close(parent_alive);
        libc::read(parent_gone, (&raw mut byte).cast(), 1);
    }
    let accepted = db.put(b"after", b"fork").is_ok();
    println!(
        "DAEMON-WRITE: {}",
        if accepted { "accepted" } else { "refused" }
    );
    // Wait for the test (stdin closed), then leave without destructors.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    // SAFETY: ends the child without running destructors.
    unsafe { libc::_exit(0) };
}

/// A program opens its store and then daemonizes (forks, the parent
/// exits). The forked child holds no record lock, so another process may
/// open the store: the child's `Db` must then not write to it (two
/// writers would corrupt it). Either the child's writes are refused or
/// the other open is; here: the child's are.
#[test]
fn a_store_used_after_a_daemonizing_fork_is_not_written_unlocked() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut entry = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_daemon_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DAEMON_DIR_ENV, dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = entry.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(entry.stdout.take().unwrap()).lines();
    let write = lines
        .find_map(|l| {
            l.unwrap()
                .split_once("DAEMON-WRITE: ")
                .map(|(_, w)| w.to_string())
        })
        .expect("no report from the daemon child");
    let other = Db::open(dir.path(), Options::default());
    let other_opened = other.is_ok();
    drop(other);
    drop(stdin); // lets the daemon child go
    entry.wait().unwrap();
    assert!(
        !(write == "accepted" && other_opened),
        "the daemon child wrote while another process opened the store"
    );
    assert_eq!(write, "refused");
}

/// Set in the process `forks_while_threads_open_and_close_stores` starts:
/// the directory its stores go in.
const FORK_STORM_DIR_ENV: &str = "BLOOMLSM_LOCK_FORK_STORM_DIR";

/// Forks the body of that process makes.
const STORM_FORKS: usize = 40;

/// The body of that process; does nothing in an ordinary run. Two threads
/// open, write and close stores `a` and `b` in a loop (so the table of held
/// locks, its mutex, and `Db`s are in every state at the forks) while the
/// test thread forks. Each child opens a fresh store of its own, writes and
/// closes it, then tries `a` (opened, written and closed, or refused as
/// locked, never another error), and exits with a code; a child that does
/// not finish in 20 s counts as hung. The child works inline: with
/// background threads it hung about one run in 13 (40 forks each) in
/// Rust's `thread_start`, on the standard library's thread-info mutex a
/// parent thread held at the fork, not on anything of the store's.
#[test]
fn lock_fork_storm_entry() {
    let Ok(base) = std::env::var(FORK_STORM_DIR_ENV) else {
        return;
    };
    let base = std::path::PathBuf::from(base);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cyclers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|name| {
            let (stop, dir) = (Arc::clone(&stop), base.join(name));
            std::thread::spawn(move || {
                let mut opened = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Refused only while a child holds it.
                    if let Ok(db) = Db::open(&dir, Options::default()) {
                        db.put(b"k", &opened.to_le_bytes()).unwrap();
                        db.close().unwrap();
                        opened += 1;
                    }
                }
                opened
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for i in 0..STORM_FORKS {
        let own = base.join(format!("child-{i}"));
        // SAFETY: the child opens stores and ends with _exit; the locks
        // the other threads hold at the fork are the point of the test.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // Inline work: a thread the child started could hang on Rust's
            // own thread registry, which a parent thread starting or ending
            // (as `Db::open` and `close` do) may hold at the fork.
            let inline = Options {
                background_work: false,
                ..Options::default()
            };
            let code = match Db::open(&own, inline.clone()) {
                Ok(db) => match db.put(b"k", b"v").and_then(|()| db.close()) {
                    Ok(()) => match Db::open(base.join("a"), inline) {
                        Ok(db) => match db.put(b"k", b"child").and_then(|()| db.close()) {
                            Ok(()) => 0,
                            Err(_) => 3,
                        },
                        Err(Error::Locked { .. }) => 0,
                        Err(_) => 3,
                    },
                    Err(_) => 2,
                },
                Err(_) => 1,
            };
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let start = std::time::Instant::now();
        let mut status = 0;
        let outcome = loop {
            // SAFETY: `pid` is our child; `status` is a valid out-parameter.
            let done = unsafe { libc::waitpid(pid, &raw mut status, libc::WNOHANG) };
            if done == pid {
                break if libc::WIFEXITED(status) {
                    match libc::WEXITSTATUS(status) {
                        0 => "ok",
                        1 => "own store refused",
                        2 => "own store not written",
                        _ => "shared store error",
                    }
                } else {
                    "died"
                };
            }
            if start.elapsed() > std::time::Duration::from_secs(20) {
                // SAFETY: `pid` is our child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &raw mut status, 0);
                }
                break "hung";
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        outcomes.push(outcome);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened: u64 = cyclers.into_iter().map(|t| t.join().unwrap()).sum();
    let bad: Vec<_> = outcomes.iter().filter(|o| **o != "ok").collect();
    println!("STORM-OUTCOME: {} bad {bad:?} ({opened} opens)", bad.len());
}

/// Forks while other threads open and close stores: every child can open
/// a store (its own, and one the parent cycles) and none hangs on state a
/// parent thread held at the fork.
#[test]
fn forks_while_threads_open_and_close_stores() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = entry_outcome(
        "lock_fork_storm_entry",
        FORK_STORM_DIR_ENV,
        dir.path(),
        "STORM-OUTCOME",
    );
    assert!(outcome.starts_with("0 bad"), "{outcome}");
}

/// Set in the process `a_store_opened_during_a_fork_is_not_written_by_the_child`
/// starts: the store directory it uses.
const FORK_FIRST_OPEN_DIR_ENV: &str = "BLOOMLSM_LOCK_FORK_FIRST_OPEN_DIR";

/// That process's store, opened by a second thread during the fork.
static FIRST_OPEN: std::sync::Mutex<Option<Db>> = std::sync::Mutex::new(None);
/// Armed in that process while the fork under test is made.
static FIRST_OPEN_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set by `slow_prepare` once the fork is in its prepare phase.
static FIRST_OPEN_FORKING: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
/// Set once `FIRST_OPEN` holds the open store.
static FIRST_OPEN_DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A `pthread_atfork` prepare handler, as libraries register them
/// (jemalloc, OpenSSL): it keeps the fork in its prepare phase until the
/// other thread has opened the store, or 2 s.
extern "C" fn slow_prepare() {
    use std::sync::atomic::Ordering::SeqCst;
    if !FIRST_OPEN_ARMED.load(SeqCst) {
        return;
    }
    FIRST_OPEN_FORKING.store(true, SeqCst);
    let start = std::time::Instant::now();
    while !FIRST_OPEN_DONE.load(SeqCst) && start.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::yield_now();
    }
}

/// The body of that process; does nothing in an ordinary run. The
/// process's first store is opened by a second thread while the test
/// thread's fork is under way; the child then writes through its copy of
/// that `Db`, which holds no lock. Exits the child with 0 when the write
/// was refused, 1 when it was accepted.
#[test]
fn lock_fork_during_first_open_entry() {
    use std::sync::atomic::Ordering::SeqCst;
    let Ok(dir) = std::env::var(FORK_FIRST_OPEN_DIR_ENV) else {
        return;
    };
    // SAFETY: registers a prepare handler taking no arguments; it only
    // reads and writes atomics and yields.
    let registered = unsafe { libc::pthread_atfork(Some(slow_prepare), None, None) };
    assert_eq!(registered, 0);
    let opener = std::thread::spawn(move || {
        while !FIRST_OPEN_FORKING.load(SeqCst) {
            std::thread::yield_now();
        }
        let inline = Options {
            background_work: false,
            ..Options::default()
        };
        let db = Db::open(&dir, inline).unwrap();
        *FIRST_OPEN.lock().unwrap() = Some(db);
        FIRST_OPEN_DONE.store(true, SeqCst);
    });
    FIRST_OPEN_ARMED.store(true, SeqCst);
    // SAFETY: the child writes through the inherited `Db` and ends with
    // _exit; the opener released `FIRST_OPEN` before the prepare phase
    // let the fork go on, or the child reports it missing.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match FIRST_OPEN
            .try_lock()
            .ok()
            .and_then(|g| g.as_ref().map(|db| db.put(b"child", b"unlocked").is_ok()))
        {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    FIRST_OPEN_ARMED.store(false, SeqCst);
    opener.join().unwrap();
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-parameter.
    unsafe { libc::waitpid(pid, &raw mut status, 0) };
    let outcome = match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => "refused",
        (true, 1) => "written without the lock",
        (true, _) => "no store at the fork",
        _ => "died",
    };
    let db = FIRST_OPEN.lock().unwrap().take().unwrap();
    db.close().unwrap();
    println!("FIRST-OPEN-OUTCOME: {outcome}");
}

/// A store opened by one thread while another forks (another library's
/// prepare handler running): the child's copy of the `Db` must refuse
/// writes, as any forked child's does. The store's first use registers
/// nothing a fork already under way could miss.
#[test]
fn a_store_opened_during_a_fork_is_not_written_by_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = entry_outcome(
        "lock_fork_during_first_open_entry",
        FORK_FIRST_OPEN_DIR_ENV,
        dir.path(),
        "FIRST-OPEN-OUTCOME",
    );
    assert_eq!(outcome, "refused");
}
