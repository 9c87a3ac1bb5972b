//! A `DbIter` dropped in a process forked from the one that opened the
//! store: the tables its view held, replaced by a compaction since, are
//! the parent's to delete (a forked copy touches no file of the store,
//! `Db::close`). The parent's own iterator over the same view still reads
//! them; under `Options::max_open_files` it reopens each by path.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::path::Path;

use bloomlsm::{Db, Options};
use common::{key, table_files, value};

/// Set in the process the test starts: the store directory.
const DIR_ENV: &str = "BLOOMLSM_FORK_OBSOLETE_DIR";

const KEYS: u64 = 300;

/// The body of that process: a deep store of narrow tables, an iterator
/// taken, every table replaced by a full compaction (the iterator's view
/// keeps the old files), then a fork whose child drops its copy of the
/// iterator and exits; the parent then says how many old files are left
/// and reads its iterator to the end. Does nothing in an ordinary run.
#[test]
fn fork_obsolete_entry() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let options = Options {
        num_levels: 7,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        block_size: 128,
        max_open_files: Some(2),
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    let it = db.scan::<&[u8], _>(..).unwrap();
    let old = table_files(dir);
    // Every table rewritten: the old ones are no longer live, and stay
    // on disk while the iterator's view holds them.
    db.compact().unwrap();
    assert!(old.iter().all(|t| table_files(dir).contains(t)));
    // SAFETY: this process runs one test and no background thread: the
    // child may use the heap.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(it);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: `status` is a valid out-parameter for waitpid.
    assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
    let now = table_files(dir);
    let kept = old.iter().filter(|t| now.contains(t)).count();
    let (mut pairs, mut errors) = (0, Vec::new());
    for r in it {
        match r {
            Ok(_) => pairs += 1,
            Err(e) => errors.push(e.to_string()),
        }
    }
    println!(
        "FORK-PARENT: kept {kept} of {}, pairs {pairs}, errors {errors:?}",
        old.len()
    );
    db.close().unwrap();
}

#[test]
fn a_forked_copy_deletes_no_table_the_parent_still_reads() {
    let dir = common::scratch_dir();
    let line = common::child_entry::entry_outcome(
        "fork_obsolete_entry",
        DIR_ENV,
        dir.path(),
        "FORK-PARENT",
    );
    let line = line.as_str();
    let (kept, rest) = line.split_once(", pairs ").unwrap();
    let (kept, of) = kept
        .strip_prefix("kept ")
        .unwrap()
        .split_once(" of ")
        .unwrap();
    assert!(of.parse::<usize>().unwrap() > 2, "{line}");
    assert_eq!(kept, of, "the child deleted the parent's files: {line}");
    assert_eq!(rest, format!("{KEYS}, errors []"), "{line}");
}
