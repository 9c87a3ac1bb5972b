//! A process that forks keeps deleting its own obsolete tables: only the
//! child's count of forks changes (`fs::forks`), so a table handle the
//! parent made before the fork is still the parent's, and its file goes
//! when the parent's last reader lets go (`version::TableFileLife`). A
//! parent that took itself for a copy would leak every such file until
//! the next open.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::path::Path;

use bloomlsm::{Db, Options};
use common::{key, table_files, value};

/// Set in the process the test starts: the store directory.
const DIR_ENV: &str = "BLOOMLSM_FORK_PARENT_DIR";

const KEYS: u64 = 300;

/// Forks a child that exits at once, and waits for it.
fn fork_and_reap() {
    // SAFETY: this process runs one test and no background thread: the
    // child only exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-parameter for waitpid.
    assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
}

/// The body of that process: a deep store of narrow tables made before a
/// fork, one iterator over them held across it, then (in the parent)
/// every table replaced, the iterator dropped, and the same again with
/// tables made after the fork; prints how many replaced files are left.
/// Does nothing in an ordinary run.
#[test]
fn fork_parent_entry() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let options = Options {
        num_levels: 7,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        block_size: 128,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    let before_fork = table_files(dir);
    let it = db.scan::<&[u8], _>(..).unwrap();
    fork_and_reap();
    // Every table made before the fork replaced (each key overwritten);
    // the iterator holds them.
    for i in 0..KEYS {
        db.put(&key(i), &value(i + 1)).unwrap();
    }
    db.compact().unwrap();
    let held = before_fork
        .iter()
        .filter(|t| table_files(dir).contains(t))
        .count();
    assert_eq!(it.count(), KEYS as usize);
    let left_held = before_fork
        .iter()
        .filter(|t| table_files(dir).contains(t))
        .count();
    // Then tables made after the fork, replaced with no reader holding them.
    let after_fork = table_files(dir);
    for i in 0..KEYS {
        db.put(&key(i), &value(i + 2)).unwrap();
    }
    db.compact().unwrap();
    let now = table_files(dir);
    let left_after = after_fork.iter().filter(|t| now.contains(t)).count();
    println!(
        "FORK-PARENT: before {} held {held} left {left_held}, after {} left {left_after}",
        before_fork.len(),
        after_fork.len()
    );
    db.close().unwrap();
}

#[test]
fn a_parent_that_forked_still_deletes_its_obsolete_tables() {
    let dir = common::scratch_dir();
    let line =
        common::child_entry::entry_outcome("fork_parent_entry", DIR_ENV, dir.path(), "FORK-PARENT");
    let line = line.as_str();
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let [before, held, left_held, after, left_after] = numbers[..] else {
        panic!("{line}");
    };
    assert!(before > 2 && after > 2, "{line}");
    assert_eq!(held, before, "the iterator's view keeps them: {line}");
    assert_eq!(
        left_held, 0,
        "the parent leaked files made before the fork: {line}"
    );
    assert_eq!(
        left_after, 0,
        "the parent leaked files made after the fork: {line}"
    );
}
