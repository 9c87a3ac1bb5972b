//! The store directory's `LOCK`: one `Db` per directory, across processes
//! and within one.
//!
//! Across processes the lock is a POSIX record lock (`fcntl(F_SETLK)`) on
//! the whole file, as LevelDB and RocksDB take it. Such a lock belongs to
//! the process, so a child forked while a store is open does not hold it:
//! a `flock`, which belongs to the open file description, would stay with
//! every child between its fork and its exec (a close and a reopen in the
//! parent in that window would be refused).
//!
//! Within one process a record lock refuses nothing (a process may lock
//! what it already holds), and closing ANY descriptor of the file drops it.
//! So a process-wide table of held LOCK files (by device and inode) refuses
//! a second open, and no code path here opens a LOCK this process holds:
//! the table is consulted before the open, under one mutex that also
//! covers taking the lock and (in `Drop`) releasing it before the entry is
//! removed. Invariant: an inode is in the table exactly while this process
//! holds its record lock through a live [`HeldLock`]. A child forked
//! without exec inherits the table and the parent's `HeldLock`s but none
//! of its record locks: each table belongs to one process (by the fork
//! count of `forks.rs`, which a `Db` also uses) and a child makes its own
//! (`held`), and dropping an inherited `HeldLock` never closes a
//! descriptor of a file the child has locked itself.
//!
//! Nothing else in the store opens `LOCK` while a `Db` holds it (the
//! direct-I/O check at open reads another file for this reason). A caller
//! that opens and closes a store's `LOCK` itself (copying the directory,
//! say) drops the lock as POSIX defines, as it would under LevelDB.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

use parking_lot::Mutex;

use super::forks::forks_seen;
use super::{AtPath, DirLock, FsResult};

/// A file by device and inode number.
type FileId = (u64, u64);

/// The table of held LOCK files of one process.
#[derive(Debug)]
struct Table {
    /// `forks::forks_seen()` of the process whose locks `ids` lists.
    process: u64,
    ids: Mutex<HashSet<FileId>>,
}

/// The table of the running process: the one it made, or a fresh one.
static CURRENT: AtomicPtr<Table> = AtomicPtr::new(std::ptr::null_mut());

/// The table of held LOCK files of this process (see the module's
/// invariant). A child forked without exec inherits its parent's table
/// but none of its record locks, and its mutex as it was at the fork:
/// possibly locked by a parent thread that does not exist in the child.
/// So a child never touches it: on its first use it makes a table of its
/// own and leaves the inherited one (one small allocation per fork that
/// uses a store). Without this a child forked while another thread was
/// opening or closing a store would hang on its first open, and one
/// forked after the parent closed a store would be refused it.
fn held() -> &'static Table {
    let process = forks_seen();
    loop {
        let current = CURRENT.load(Ordering::Acquire);
        // SAFETY: `CURRENT` holds null or a pointer from `Box::into_raw`
        // below that was published and is never freed.
        if let Some(table) = unsafe { current.as_ref() }
            && table.process == process
        {
            return table;
        }
        let fresh = Box::into_raw(Box::new(Table {
            process,
            ids: Mutex::new(HashSet::new()),
        }));
        match CURRENT.compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: published, so never freed (the previous table is
            // left to its process: a parent thread may still hold it).
            Ok(_) => return unsafe { &*fresh },
            // SAFETY: another thread published its table first; `fresh`
            // was never shared.
            Err(_) => drop(unsafe { Box::from_raw(fresh) }),
        }
    }
}

/// Times [`lock`] tries again when the file it locked was unlinked
/// meanwhile; each retry needs another failed open racing this one.
const LOCK_ATTEMPTS: usize = 16;

/// A held `LOCK`: released (closed, then forgotten by the table) on drop.
#[derive(Debug)]
struct HeldLock {
    /// `None` only inside `drop`.
    file: Option<File>,
    id: FileId,
    /// `forks::forks_seen()` of the process that took the lock.
    process: u64,
    /// Whether the open that took it created the file.
    created: bool,
    /// The path it was taken through (which named `file` then).
    path: PathBuf,
}

impl DirLock for HeldLock {
    fn created_file(&self) -> Option<bool> {
        Some(self.created)
    }

    /// Converts a read lock to a write lock in place (`F_SETLK` replaces
    /// the process's own lock, or fails leaving it as it was when another
    /// process holds one); `true` only if the path still names the file
    /// locked too: one renamed over it (by a tool outside the store) may
    /// be a writer's lock, which the caller would unlink. A failed system
    /// call answers `false`: the caller then leaves the file, which is
    /// harmless.
    fn try_exclusive(&self) -> bool {
        // Under the table's mutex, like every other use of the descriptor.
        let _table = held().ids.lock();
        match &self.file {
            Some(file) if self.process == forks_seen() => {
                try_record_lock(file, true).unwrap_or(false)
                    && still_named(file, &self.path).unwrap_or(false)
            }
            // A forked child's inherited copy holds no record lock.
            _ => false,
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let table = held();
        let mut held = table.ids.lock();
        if self.process != table.process {
            // A copy a forked child inherited: it holds no record lock,
            // but the child may hold its own on the same file (taken after
            // the fork), which closing any descriptor of the file would
            // drop. Then the descriptor stays open.
            if held.contains(&self.id) {
                std::mem::forget(self.file.take());
            }
            return;
        }
        // Closing releases the record lock; only then may another open in
        // this process open the file (its close could not drop ours).
        drop(self.file.take());
        held.remove(&self.id);
    }
}

/// A read-only open's "lock" where `LOCK` is missing and cannot be
/// created (a store copied without it onto a read-only medium): there is
/// no file to lock, and none can be made, so nothing is held (as
/// RocksDB's read-only open never locks). A writer reaching the same
/// directory by a writable path is not excluded.
#[derive(Debug)]
struct NothingToLock;

impl DirLock for NothingToLock {
    fn created_file(&self) -> Option<bool> {
        Some(false)
    }
}

/// Takes the lock on `path` (creating the file if missing); `Ok(None)` when
/// another process holds a conflicting lock or another open in this one
/// holds it. Exclusive (`F_WRLCK`) for a writer; `shared` (a read-only
/// open): a read lock (`F_RDLCK`), which a writer's `F_WRLCK` conflicts
/// with and other processes' read-only opens share; in this process the
/// table refuses every second open either way. A shared open of an
/// existing file that cannot be opened for writing (`EROFS`, `EACCES`,
/// `EPERM`) opens it for reading; a missing one that cannot be created
/// because the file system is read-only (`EROFS`) is `NothingToLock`;
/// refused for want of permission, an error.
pub(super) fn lock(path: &Path, shared: bool) -> FsResult<Option<Box<dyn DirLock>>> {
    let table = held();
    let mut held = table.ids.lock();
    // A failed open unlinks the LOCK it created while still holding it. An
    // opener that opened that file just before the unlink then locks an
    // inode no path names, while a third creates a new LOCK: two holders.
    // So a lock counts only if the path still names the very file locked;
    // otherwise try again on what the path names now.
    for _ in 0..LOCK_ATTEMPTS {
        match fs::metadata(path) {
            Ok(named) if held.contains(&(named.dev(), named.ino())) => return Ok(None),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).at(path),
        }
        let (file, created, write_lock) = match open_or_create(path) {
            Ok((file, created)) => (file, created, !shared),
            Err(e) if shared && cannot_write(&e) => match File::open(path) {
                Ok(file) => (file, false, false),
                // Only a read-only medium has nothing to lock: where the
                // create was refused for want of permission (`EACCES`,
                // `EPERM`) the file system is writable, and its owner can
                // create `LOCK` and open read-write beside this open.
                Err(not_found)
                    if not_found.kind() == io::ErrorKind::NotFound
                        && e.raw_os_error() == Some(libc::EROFS) =>
                {
                    return Ok(Some(Box::new(NothingToLock)));
                }
                // Missing: the refused create says why it cannot be made.
                Err(not_found) if not_found.kind() == io::ErrorKind::NotFound => {
                    return Err(e).at(path);
                }
                Err(e) => return Err(e).at(path),
            },
            Err(e) => return Err(e).at(path),
        };
        let meta = file.metadata().at(path)?;
        let id = (meta.dev(), meta.ino());
        if held.contains(&id) {
            // The path was renamed onto a LOCK this process holds between
            // the metadata call and the open. Closing this descriptor would
            // drop that lock, so it stays open (a descriptor leaked in a
            // race no store operation makes).
            std::mem::forget(file);
            return Ok(None);
        }
        if !try_record_lock(&file, write_lock).at(path)? {
            return Ok(None);
        }
        if still_named(&file, path).at(path)? {
            held.insert(id);
            return Ok(Some(Box::new(HeldLock {
                file: Some(file),
                id,
                process: table.process,
                created,
                path: path.to_path_buf(),
            })));
        }
        // Not in the table, so closing drops only this attempt's lock.
        drop(file);
    }
    Ok(None)
}

/// Opens `path` for reading and writing, creating it if missing; the file
/// and whether this call created it. When the name exists but the open
/// finds nothing (it was unlinked in between, or it is a dangling symlink,
/// which `O_EXCL` never follows), the file is opened creating as needed and
/// reported as not created: at worst a failed open leaves that LOCK.
fn open_or_create(path: &Path) -> io::Result<(File, bool)> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    match options.clone().create_new(true).open(path) {
        Ok(file) => return Ok((file, true)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    match options.open(path) {
        Ok(file) => Ok((file, false)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Ok((options.create(true).truncate(false).open(path)?, false))
        }
        Err(e) => Err(e),
    }
}

/// Whether opening for writing failed for want of write access (the file
/// may still be read).
fn cannot_write(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EROFS | libc::EACCES | libc::EPERM)
    )
}

/// `fcntl(F_SETLK)`: a record lock on the whole file, exclusive (`write`)
/// or shared, without waiting. `Ok(false)` when another process holds a
/// conflicting lock.
fn try_record_lock(file: &File, write: bool) -> io::Result<bool> {
    // SAFETY: `flock` is a plain C struct of integers; all zeroes is a
    // valid value of it, and the fields the call reads are set below.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = if write { libc::F_WRLCK } else { libc::F_RDLCK } as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    request.l_start = 0;
    request.l_len = 0; // to the end of the file, however long it grows
    // SAFETY: the descriptor is open for as long as `file` lives, and
    // `request` is a valid `flock` the call only reads.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &request) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EAGAIN) => Ok(false),
        _ => Err(e),
    }
}

/// Whether `path` names `file` (the same inode on the same device).
fn still_named(file: &File, path: &Path) -> io::Result<bool> {
    let held = file.metadata()?;
    match fs::metadata(path) {
        Ok(named) => Ok(named.dev() == held.dev() && named.ino() == held.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    #[test]
    fn a_lock_counts_only_while_its_path_names_the_locked_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let held_lock = lock(&path, false).unwrap().unwrap();
        assert!(lock(&path, false).unwrap().is_none(), "held: refused");
        // An opener that opened LOCK just before a failed open unlinked it
        // would lock a file no path names: that is not the store's lock.
        let early = File::open(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert!(!still_named(&early, &path).unwrap());
        // Locking goes to what the path names now.
        let now = lock(&path, false).unwrap().unwrap();
        assert!(path.exists());
        assert!(lock(&path, false).unwrap().is_none());
        fs::remove_file(&path).unwrap();
        fs::write(&path, b"").unwrap();
        assert!(
            !still_named(&early, &path).unwrap(),
            "another file at the path"
        );
        drop(now);
        drop(held_lock);
    }

    /// Set in the process `a_forked_child_locks_afresh_and_keeps_its_own_lock`
    /// starts: the LOCK path it uses.
    const FORK_PATH_ENV: &str = "BLOOMLSM_DIR_LOCK_FORK_PATH";

    /// The body of that process (one test thread, so no lock of the table
    /// is held across the fork); does nothing in an ordinary run. It locks,
    /// forks, and releases; the child then locks the same file and drops
    /// its inherited copy of the parent's lock. The parent reports whether
    /// the child got the lock and whether it still holds it after the drop.
    #[test]
    fn dir_lock_fork_entry() {
        let Ok(path) = std::env::var(FORK_PATH_ENV) else {
            return;
        };
        let path = Path::new(&path);
        let parents = lock(path, false).unwrap().unwrap();
        let (mut to_child, mut to_parent) = ([0; 2], [0; 2]);
        // SAFETY: each array is a valid pair of descriptors for pipe to fill.
        unsafe {
            assert_eq!(libc::pipe(to_child.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(to_parent.as_mut_ptr()), 0);
        }
        // SAFETY: the child ends with _exit; this process runs one test,
        // so no thread holds the table's mutex across the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut byte = 0u8;
            // SAFETY: descriptors from `pipe`; `byte` outlives the call.
            unsafe { libc::read(to_child[0], (&raw mut byte).cast(), 1) };
            let own = lock(path, false);
            let got: u8 = u8::from(matches!(own, Ok(Some(_))));
            drop(parents); // the inherited copy
            // SAFETY: as above; then the child waits for the parent's check.
            unsafe {
                libc::write(to_parent[1], (&raw const got).cast(), 1);
                libc::read(to_child[0], (&raw mut byte).cast(), 1);
                libc::_exit(0);
            }
        }
        drop(parents);
        let mut got = 9u8;
        // SAFETY: descriptors from `pipe`; `got` outlives the calls.
        unsafe {
            libc::write(to_child[1], (&raw const got).cast(), 1);
            libc::read(to_parent[0], (&raw mut got).cast(), 1);
        }
        let child_holds = lock(path, false).unwrap().is_none();
        let mut status = 0;
        // SAFETY: lets the child exit; `status` is a valid out-parameter.
        unsafe {
            libc::write(to_child[1], (&raw const got).cast(), 1);
            libc::waitpid(pid, &raw mut status, 0);
        }
        println!(
            "FORK-OUTCOME: child locked {} / child still holds {child_holds}",
            got == 1
        );
    }

    /// Runs the fork scenario `entry` in a process of its own (one test
    /// thread), with `env` set to a LOCK path in a fresh directory; its
    /// `FORK-OUTCOME` line.
    fn fork_outcome(entry: &str, env: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &format!("fs::dir_lock::tests::{entry}"),
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(env, dir.path().join("LOCK"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "fork scenario failed: {stdout}");
        stdout
            .lines()
            .find_map(|l| l.split_once("FORK-OUTCOME: ").map(|(_, o)| o))
            .unwrap_or_else(|| panic!("no outcome: {stdout}"))
            .to_owned()
    }

    #[test]
    fn a_forked_child_locks_afresh_and_keeps_its_own_lock() {
        assert_eq!(
            fork_outcome("dir_lock_fork_entry", FORK_PATH_ENV),
            "child locked true / child still holds true"
        );
    }

    /// What forked child `pid` wrote on `fd` (1: it locked), waiting at
    /// most `timeout_ms`; 9 when it wrote nothing by then (it hung, and is
    /// killed). The child is reaped either way.
    fn child_answer(pid: libc::pid_t, fd: libc::c_int, timeout_ms: libc::c_int) -> u8 {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut got = 9u8;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&raw mut poll, 1, timeout_ms) } == 1 {
            // SAFETY: descriptor from `pipe`; `got` outlives the call.
            unsafe { libc::read(fd, (&raw mut got).cast(), 1) };
        } else {
            // SAFETY: `pid` is our child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: `status` is a valid out-parameter.
        unsafe { libc::waitpid(pid, &raw mut status, 0) };
        got
    }

    fn answer_words(got: u8) -> &'static str {
        match got {
            1 => "child locked",
            9 => "child hung",
            _ => "child refused",
        }
    }

    /// Set in the process `a_child_forked_while_a_thread_holds_the_table_can_lock`
    /// starts: the LOCK path it uses.
    const FORK_HELD_PATH_ENV: &str = "BLOOMLSM_DIR_LOCK_FORK_HELD_PATH";

    /// The body of that process; does nothing in an ordinary run. A second
    /// thread holds the table's mutex (as one opening or closing a store
    /// does) while the test thread forks; the child then locks a store.
    /// Reports whether the child got the lock, or hung (killed after 20 s).
    #[test]
    fn dir_lock_fork_while_held_entry() {
        let Ok(path) = std::env::var(FORK_HELD_PATH_ENV) else {
            return;
        };
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let guard = held().ids.lock();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        held_rx.recv().unwrap();
        let mut to_parent = [0; 2];
        // SAFETY: the array is a valid pair of descriptors for pipe to fill.
        assert_eq!(unsafe { libc::pipe(to_parent.as_mut_ptr()) }, 0);
        // SAFETY: the child only locks, writes one byte and ends with
        // _exit; the mutex the holder thread has is the point of the test.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let got = u8::from(matches!(lock(Path::new(&path), false), Ok(Some(_))));
            // SAFETY: descriptor from `pipe`; `got` outlives the call.
            unsafe {
                libc::write(to_parent[1], (&raw const got).cast(), 1);
                libc::_exit(0);
            }
        }
        let got = child_answer(pid, to_parent[0], 20_000);
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        println!("FORK-OUTCOME: {}", answer_words(got));
    }

    #[test]
    fn a_child_forked_while_a_thread_holds_the_table_can_lock() {
        assert_eq!(
            fork_outcome("dir_lock_fork_while_held_entry", FORK_HELD_PATH_ENV),
            "child locked"
        );
    }

    /// Set in the process `a_child_forked_while_the_first_lock_is_taken_can_lock`
    /// starts: the LOCK path it uses.
    const FORK_FIRST_PATH_ENV: &str = "BLOOMLSM_DIR_LOCK_FORK_FIRST_PATH";

    /// Armed in that process: the fork under test is under way.
    static FORK_ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// Set by `slow_prepare` once a fork is in its prepare phase.
    static FORK_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// Set by the locking thread once it holds the lock.
    static FIRST_LOCKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// A `pthread_atfork` prepare handler, as libraries register them
    /// (jemalloc, OpenSSL): it holds the fork in its prepare phase until
    /// another thread has taken a lock, or 2 s.
    extern "C" fn slow_prepare() {
        if !FORK_ARMED.load(Ordering::SeqCst) {
            return;
        }
        FORK_STARTED.store(true, Ordering::SeqCst);
        let start = std::time::Instant::now();
        while !FIRST_LOCKED.load(Ordering::SeqCst)
            && start.elapsed() < std::time::Duration::from_secs(2)
        {
            std::thread::yield_now();
        }
    }

    /// The body of that process; does nothing in an ordinary run. The
    /// process's first lock (its first use of the fork count) is taken by
    /// a second thread while the test thread's fork is under way; the
    /// parent then releases it and the child locks the same file.
    /// Reports whether the child got the lock, was refused, or hung.
    #[test]
    fn dir_lock_fork_during_first_lock_entry() {
        let Ok(path) = std::env::var(FORK_FIRST_PATH_ENV) else {
            return;
        };
        // SAFETY: registers a prepare handler taking no arguments; it only
        // reads and writes atomics and yields.
        let registered = unsafe { libc::pthread_atfork(Some(slow_prepare), None, None) };
        assert_eq!(registered, 0);
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let locker = std::thread::spawn({
            let path = path.clone();
            move || {
                while !FORK_STARTED.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                let first = lock(Path::new(&path), false).unwrap().unwrap();
                FIRST_LOCKED.store(true, Ordering::SeqCst);
                release_rx.recv().unwrap();
                drop(first);
            }
        });
        let (mut to_child, mut to_parent) = ([0; 2], [0; 2]);
        // SAFETY: each array is a valid pair of descriptors for pipe to fill.
        unsafe {
            assert_eq!(libc::pipe(to_child.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(to_parent.as_mut_ptr()), 0);
        }
        FORK_ARMED.store(true, Ordering::SeqCst);
        // SAFETY: the child waits, locks, writes one byte and ends with
        // _exit; what the other thread holds at the fork is the point.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut byte = 0u8;
            // SAFETY: descriptor from `pipe`; `byte` outlives the call.
            unsafe { libc::read(to_child[0], (&raw mut byte).cast(), 1) };
            let got = u8::from(matches!(lock(Path::new(&path), false), Ok(Some(_))));
            // SAFETY: descriptor from `pipe`; `got` outlives the call.
            unsafe {
                libc::write(to_parent[1], (&raw const got).cast(), 1);
                libc::_exit(0);
            }
        }
        FORK_ARMED.store(false, Ordering::SeqCst);
        // The parent closes its store; then the child tries it.
        release_tx.send(()).unwrap();
        locker.join().unwrap();
        let go = 1u8;
        // SAFETY: descriptor from `pipe`; `go` outlives the call.
        unsafe { libc::write(to_child[1], (&raw const go).cast(), 1) };
        let got = child_answer(pid, to_parent[0], 10_000);
        println!("FORK-OUTCOME: {}", answer_words(got));
    }

    /// A fork made while the process's first lock is being taken (its
    /// first use of the fork count): the child must count as a child, or
    /// it inherits the parent's table as its own and is refused the store
    /// the parent closed (or hangs on a half-made registration).
    #[test]
    fn a_child_forked_while_the_first_lock_is_taken_can_lock() {
        assert_eq!(
            fork_outcome("dir_lock_fork_during_first_lock_entry", FORK_FIRST_PATH_ENV),
            "child locked"
        );
    }

    /// Set in the process `children_forked_around_the_first_lock_never_hang`
    /// starts: a LOCK path in the directory its LOCK files go in.
    const FORK_LOOP_DIR_ENV: &str = "BLOOMLSM_DIR_LOCK_FORK_LOOP_DIR";

    /// The body of that process; does nothing in an ordinary run. The test
    /// thread forks children one after another (a pre-forking server), its
    /// address space made large so each fork takes a while, while a second
    /// thread takes the process's first lock. Each child takes a lock of
    /// its own and reports; one that does not within 10 s hung.
    #[test]
    fn dir_lock_fork_loop_entry() {
        let Ok(lock_path) = std::env::var(FORK_LOOP_DIR_ENV) else {
            return;
        };
        let dir = Path::new(&lock_path).parent().unwrap().to_path_buf();
        // Page tables to copy: a fork takes about a millisecond.
        let ballast = vec![1u8; 256 << 20];
        let first = std::thread::spawn({
            let path = dir.join("LOCK-first");
            move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                lock(&path, false).unwrap().is_some()
            }
        });
        let mut children = Vec::new();
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(200) {
            let mut to_parent = [0; 2];
            // SAFETY: the array is a valid pair of descriptors for pipe to fill.
            assert_eq!(unsafe { libc::pipe(to_parent.as_mut_ptr()) }, 0);
            let path = dir.join(format!("LOCK-{}", children.len()));
            // SAFETY: the child locks, writes one byte and ends with _exit;
            // what the other thread does at the fork is the point.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let got = u8::from(matches!(lock(&path, false), Ok(Some(_))));
                // SAFETY: descriptor from `pipe`; `got` outlives the call.
                unsafe {
                    libc::write(to_parent[1], (&raw const got).cast(), 1);
                    libc::_exit(0);
                }
            }
            // SAFETY: the parent's copy of the write end.
            unsafe { libc::close(to_parent[1]) };
            children.push((pid, to_parent[0]));
        }
        assert!(first.join().unwrap());
        drop(ballast);
        let (mut locked, mut hung) = (0, 0);
        for &(pid, fd) in &children {
            match child_answer(pid, fd, 10_000) {
                1 => locked += 1,
                9 => hung += 1,
                _ => {}
            }
        }
        println!(
            "FORK-OUTCOME: {} children, {} refused, {hung} hung",
            children.len(),
            children.len() - locked - hung
        );
    }

    /// Each child of a process whose first lock is taken while it forks
    /// locks a file of its own. With the fork count's handler registered on
    /// first use (behind a `OnceLock`), a child forked while the first
    /// registration waited for the fork hung on it (1 run in 3 here).
    #[test]
    fn children_forked_around_the_first_lock_never_hang() {
        for _ in 0..5 {
            let outcome = fork_outcome("dir_lock_fork_loop_entry", FORK_LOOP_DIR_ENV);
            assert!(outcome.ends_with(", 0 refused, 0 hung"), "{outcome}");
        }
    }

    #[test]
    fn a_dangling_symlink_is_locked_through_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let held = lock(&path, false).unwrap().expect("not held by anyone");
        assert_eq!(held.created_file(), Some(false));
        assert!(target.exists());
        assert!(lock(&path, false).unwrap().is_none());
        drop(held);
        let fresh = dir.path().join("LOCK2");
        assert_eq!(
            lock(&fresh, false).unwrap().unwrap().created_file(),
            Some(true)
        );
    }

    /// A read-only open on a WRITABLE file system that may not create
    /// `LOCK` (its directory is not writable to this user: `EACCES`) must
    /// not open holding nothing: the owner can create `LOCK` through the
    /// same path and open read-write beside it. Only a read-only medium
    /// (`EROFS`), where nothing can be created, has nothing to lock.
    /// Runs as root: one thread drops to `nobody` (the raw syscall changes
    /// only the calling thread's ids and capabilities).
    #[test]
    fn a_reader_denied_creating_lock_on_a_writable_file_system_holds_nothing_only_if_nothing_can_be_locked()
     {
        // SAFETY: geteuid only reads the caller's effective user id.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root to drop to another user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        fs::create_dir(&store).unwrap();
        let open = |p: &Path, mode| {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
        };
        open(dir.path(), 0o755);
        open(&store, 0o755);
        let path = store.join("LOCK");
        let reader = std::thread::spawn({
            let path = path.clone();
            move || {
                // SAFETY: the raw syscall sets this thread's ids only.
                let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
                assert_eq!(rc, 0);
                lock(&path, true)
            }
        });
        // Held (or the error) while the writer below tries.
        let reader_got = reader.join().unwrap();
        // The owner opens read-write through the same, writable path.
        if let Err(e) = &reader_got {
            assert!(e.to_string().contains("denied"), "the create's error: {e}");
        }
        let writer = lock(&path, false).unwrap();
        assert!(
            !(matches!(reader_got, Ok(Some(_))) && writer.is_some()),
            "a read-only open denied creating LOCK on a writable file system held nothing, \
             and a writer then opened beside it"
        );
    }

    #[test]
    fn the_table_holds_an_inode_exactly_while_its_lock_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let id = |p: &Path| {
            let m = fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let first = lock(&path, false).unwrap().unwrap();
        assert!(held().ids.lock().contains(&id(&path)));
        // A second path to the same file (a hard link) is the same lock.
        let link = dir.path().join("LOCK.link");
        fs::hard_link(&path, &link).unwrap();
        assert!(lock(&link, false).unwrap().is_none());
        drop(first);
        assert!(!held().ids.lock().contains(&id(&path)));
        let again = lock(&link, false).unwrap().unwrap();
        assert!(lock(&path, false).unwrap().is_none());
        drop(again);
        assert!(!held().ids.lock().contains(&id(&path)));
    }
}
