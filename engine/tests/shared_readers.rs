//! Read-only opens in different processes share the store (two study
//! commands at once), while every writer stays out; and a reader that
//! created `LOCK` never unlinks it from under another process's reader.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use bloomlsm::{Db, Error, Options};

/// Set in a child process: the store directory it opens.
const DIR_ENV: &str = "BLOOMLSM_SHARED_READERS_DIR";
/// Set in a child process: "read" (read-only) or "write" (read-write).
const MODE_ENV: &str = "BLOOMLSM_SHARED_READERS_MODE";

/// What an open of `dir` in `mode` answers: "opened k=<value>", "locked"
/// or "error: ...", with the store left open (when opened) until
/// `release` is called.
fn open_outcome(dir: &Path, mode: &str) -> (String, Option<Db>) {
    let opened = if mode == "read" {
        Db::open_read_only(dir, Options::default())
    } else {
        Db::open(dir, Options::default())
    };
    match opened {
        Ok(db) => {
            let value = db.get(b"k").unwrap().map(|v| String::from_utf8(v).unwrap());
            (format!("opened k={}", value.unwrap_or_default()), Some(db))
        }
        Err(Error::Locked { .. }) => ("locked".to_string(), None),
        Err(e) => (format!("error: {e}"), None),
    }
}

/// The body of the child processes below; does nothing in an ordinary
/// run. It opens, reports, then holds the store until a line arrives on
/// its stdin (at once when the parent passes no pipe), and closes.
#[test]
fn shared_readers_child_entry() {
    let (Ok(dir), Ok(mode)) = (std::env::var(DIR_ENV), std::env::var(MODE_ENV)) else {
        return;
    };
    let (outcome, db) = open_outcome(Path::new(&dir), &mode);
    println!("OUTCOME: {outcome}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    if let Some(db) = db {
        db.close().unwrap();
    }
    println!("CLOSED");
}

fn child(dir: &Path, mode: &str, stdin: Stdio) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "shared_readers_child_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_ENV, dir)
        .env(MODE_ENV, mode)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The text after `OUTCOME: ` on the child's output.
fn read_outcome(out: &mut impl BufRead) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no outcome");
        if let Some((_, o)) = line.trim_end().split_once("OUTCOME: ") {
            return o.to_string();
        }
    }
}

/// What an open of `dir` in `mode` answers in another process, which
/// closes what it opened at once.
fn open_in_another_process(dir: &Path, mode: &str) -> String {
    let c = child(dir, mode, Stdio::null());
    let output = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    read_outcome(&mut BufReader::new(stdout.as_bytes()))
}

/// A reader in another process that holds the store open until dropped.
struct HeldReader {
    process: Child,
    out: BufReader<ChildStdout>,
    outcome: String,
}

impl HeldReader {
    fn open(dir: &Path) -> Self {
        Self::open_as(dir, "read")
    }

    /// An open in `mode` ("read" or "write") held in another process.
    fn open_as(dir: &Path, mode: &str) -> Self {
        let mut process = child(dir, mode, Stdio::piped());
        let mut out = BufReader::new(process.stdout.take().unwrap());
        let outcome = read_outcome(&mut out);
        Self {
            process,
            out,
            outcome,
        }
    }

    fn close(mut self) {
        self.process.stdin.take().unwrap().write_all(b"\n").unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        assert!(rest.contains("CLOSED"), "{rest}");
        assert!(self.process.wait().unwrap().success());
    }
}

fn store_with_k(dir: &Path) {
    let db = Db::open(dir, Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
}

#[test]
fn read_only_opens_in_two_processes_share_the_store_and_keep_writers_out() {
    let dir = tempfile::tempdir().unwrap();
    store_with_k(dir.path());
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    // Before: "locked" (a read-only open took the writer's exclusive lock).
    assert_eq!(open_in_another_process(dir.path(), "read"), "opened k=v");
    assert_eq!(open_in_another_process(dir.path(), "write"), "locked");
    // In this process a second open is still refused (closing any
    // descriptor of LOCK would drop the process's lock).
    assert!(matches!(
        Db::open_read_only(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));

    // Two readers at once, and the first to close leaves the other's
    // exclusion of writers intact.
    let other = HeldReader::open(dir.path());
    assert_eq!(other.outcome, "opened k=v");
    reader.close().unwrap();
    assert_eq!(open_in_another_process(dir.path(), "write"), "locked");
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    // This process reads beside the other one again.
    let again = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(again.get(b"k").unwrap(), Some(b"v".to_vec()));
    again.close().unwrap();
    other.close();

    // Released by all: the writer gets it, and then readers are refused.
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(open_in_another_process(dir.path(), "read"), "locked");
    writer.close().unwrap();
}

/// A store copied without its `LOCK`: the read-only open that creates it
/// unlinks it at close only when no other process's reader shares it.
/// Unlinked from under that reader, the name would be free for a writer
/// to create a fresh `LOCK` and take it while the reader still reads.
#[test]
fn a_reader_that_created_lock_leaves_it_while_another_process_reads() {
    let dir = tempfile::tempdir().unwrap();
    store_with_k(dir.path());
    let lock = dir.path().join("LOCK");
    std::fs::remove_file(&lock).unwrap();

    let creator = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(lock.exists());
    let other = HeldReader::open(dir.path());
    assert_eq!(other.outcome, "opened k=v");
    creator.close().unwrap();
    assert!(lock.exists(), "unlinked from under the other reader");
    assert_eq!(
        open_in_another_process(dir.path(), "write"),
        "locked",
        "a writer beside a reader"
    );
    other.close();
    // The file stays (the reader that remained did not create it); it
    // locks as any LOCK does.
    assert!(lock.exists());
    assert_eq!(open_in_another_process(dir.path(), "write"), "opened k=v");

    // Alone, the creator still leaves the directory as it found it.
    std::fs::remove_file(&lock).unwrap();
    let creator = Db::open_read_only(dir.path(), Options::default()).unwrap();
    creator.close().unwrap();
    assert!(!lock.exists());
}

/// A reader that created `LOCK` unlinks at close only the file it locked.
/// When another file was renamed over the name meanwhile (a restore or
/// sync tool writing the directory), the reader no longer excludes
/// writers (as under LevelDB), and the name may be a writer's lock:
/// unlinked, it let a second writer create a fresh `LOCK` and open beside
/// the first, two writers on one store.
#[test]
fn a_reader_that_created_lock_unlinks_only_the_file_it_locked() {
    let dir = tempfile::tempdir().unwrap();
    store_with_k(dir.path());
    let lock = dir.path().join("LOCK");
    std::fs::remove_file(&lock).unwrap();
    let creator = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let replacement = dir.path().join("LOCK.restored");
    std::fs::write(&replacement, b"").unwrap();
    std::fs::rename(&replacement, &lock).unwrap();
    let writer = HeldReader::open_as(dir.path(), "write");
    assert_eq!(writer.outcome, "opened k=v");

    creator.close().unwrap();
    assert!(lock.exists(), "the writer's LOCK was unlinked");
    assert_eq!(
        open_in_another_process(dir.path(), "write"),
        "locked",
        "a second writer beside the first"
    );
    writer.close();
}

/// Set in the process `a_forked_child_reads_beside_its_parent_and_keeps_writers_out`
/// starts: the store directory (with no `LOCK`).
const FORK_DIR_ENV: &str = "BLOOMLSM_SHARED_READERS_FORK_DIR";

/// What `Db::open` answers: "opened", "locked" or "error".
fn writer_answer(dir: &Path) -> &'static str {
    match Db::open(dir, Options::default()) {
        Ok(_) => "opened",
        Err(Error::Locked { .. }) => "locked",
        Err(_) => "error",
    }
}

/// The body of that process (one test thread, so no lock is held across
/// the fork); does nothing in an ordinary run. It opens the store
/// read-only, creating `LOCK`, and forks (no exec). The child opens the
/// store read-only itself (sharing the parent's read lock), then drops
/// its inherited copy of the parent's store (a read-only `Db` has no
/// background thread to join), which must neither unlink `LOCK` nor
/// close away the child's own lock. The parent then closes its store and
/// tries a writer while the child still reads.
#[test]
fn shared_readers_fork_entry() {
    let Ok(dir) = std::env::var(FORK_DIR_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let creator = Db::open_read_only(dir, Options::default()).unwrap();
    let (mut to_child, mut to_parent) = ([0; 2], [0; 2]);
    // SAFETY: each array is a valid pair of descriptors for pipe to fill.
    unsafe {
        assert_eq!(libc::pipe(to_child.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(to_parent.as_mut_ptr()), 0);
    }
    // SAFETY: the child opens a store, drops one, writes and reads a byte
    // and ends with _exit; this process runs one test thread.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let own = Db::open_read_only(dir, Options::default());
        drop(creator);
        let opened = u8::from(own.is_ok());
        let mut byte = 0u8;
        // SAFETY: descriptors from `pipe`; the buffers outlive the calls;
        // _exit ends the child without the parent's destructors.
        unsafe {
            libc::write(to_parent[1], (&raw const opened).cast(), 1);
            libc::read(to_child[0], (&raw mut byte).cast(), 1);
            libc::_exit(0);
        }
    }
    let mut opened = 9u8;
    // SAFETY: descriptor from `pipe`; `opened` outlives the read.
    unsafe { libc::read(to_parent[0], (&raw mut opened).cast(), 1) };
    creator.close().unwrap();
    let kept = dir.join("LOCK").exists();
    let beside_child = writer_answer(dir);
    let mut status = 0;
    // SAFETY: the write lets the child end; `status` is a valid out-parameter.
    unsafe {
        libc::write(to_child[1], (&raw const opened).cast(), 1);
        libc::waitpid(pid, &raw mut status, 0);
    }
    println!(
        "FORK-OUTCOME: child opened {opened}, LOCK kept {kept}, writer {beside_child}, \
         after the child {}",
        writer_answer(dir)
    );
}

/// A process that read-only opened a store copied without `LOCK` forks
/// (no exec); the child reads the store too and drops its inherited copy
/// of the parent's. While the child reads, the parent's close must leave
/// `LOCK` and every writer must stay out; once the child ends, a writer
/// gets the store.
#[test]
fn a_forked_child_reads_beside_its_parent_and_keeps_writers_out() {
    let dir = tempfile::tempdir().unwrap();
    store_with_k(dir.path());
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "shared_readers_fork_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(FORK_DIR_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert_eq!(
        read_outcome(&mut BufReader::new(stdout.as_bytes())),
        "child opened 1, LOCK kept true, writer locked, after the child opened"
    );
}
