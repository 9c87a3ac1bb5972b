//! A store on a read-only file system (a read-only mount, a backup
//! without write permission) can be studied with `Db::open_read_only`:
//! its `LOCK` cannot be opened for writing, so it is locked for reading,
//! which still excludes writers.
//!
//! Needs a read-only bind mount, so root with `CAP_SYS_ADMIN` (as `make
//! test` runs on the development machine and in CI); where `mount` is
//! refused the test says so on stderr and checks nothing. Before the fix
//! the open failed with
//! `I/O error on .../LOCK: Read-only file system (os error 30)`.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use bloomlsm::{Db, Error, Options};
use common::listing;

/// A read-only bind mount of a directory, unmounted on drop.
struct RoMount(PathBuf);

impl RoMount {
    fn new(from: &Path, at: &Path) -> Option<Self> {
        let run = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let (from, at_s) = (from.to_str()?, at.to_str()?);
        if !run(&["--bind", from, at_s]) {
            return None;
        }
        let mount = Self(at.to_path_buf());
        run(&["-o", "remount,bind,ro", at_s]).then_some(mount)
    }
}

impl Drop for RoMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A closed store in `parent`/store: one key in a table, one in the WAL
/// only.
fn closed_store(parent: &Path) -> PathBuf {
    let store = parent.join("store");
    let db = Db::open(&store, Options::default()).unwrap();
    db.put(b"in-a-table", b"1").unwrap();
    db.flush().unwrap();
    db.put(b"wal-only", b"2").unwrap();
    db.close().unwrap();
    store
}

#[test]
fn a_store_on_a_read_only_mount_opens_read_only_and_still_excludes_writers() {
    let (src, at) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = closed_store(src.path());
    let Some(_mount) = RoMount::new(src.path(), at.path()) else {
        eprintln!("skipped: cannot make a read-only bind mount here");
        return;
    };
    let ro_store = at.path().join("store");
    assert!(
        std::fs::write(ro_store.join("probe"), b"").is_err(),
        "the mount is read-only"
    );
    let ro = Db::open_read_only(&ro_store, Options::default()).unwrap();
    assert_eq!(ro.get(b"in-a-table").unwrap(), Some(b"1".to_vec()));
    assert_eq!(ro.get(b"wal-only").unwrap(), Some(b"2".to_vec()));
    // The same file through the writable path: a writer is refused.
    assert!(matches!(
        Db::open(&store, Options::default()),
        Err(Error::Locked { .. })
    ));
    ro.close().unwrap();
    // Released: the writer gets it.
    Db::open(&store, Options::default())
        .unwrap()
        .close()
        .unwrap();
}

/// A store copied without its `LOCK` onto a read-only medium (a backup
/// that left it out): nothing can be locked or created there, and the
/// read-only open reads it all the same, creating nothing. Before the fix
/// it failed with `I/O error on .../LOCK: No such file or directory`.
#[test]
fn a_store_without_lock_on_a_read_only_mount_opens_read_only() {
    let (src, at) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = closed_store(src.path());
    std::fs::remove_file(store.join("LOCK")).unwrap();
    let before = listing(&store);
    let Some(_mount) = RoMount::new(src.path(), at.path()) else {
        eprintln!("skipped: cannot make a read-only bind mount here");
        return;
    };
    let ro_store = at.path().join("store");
    let ro = Db::open_read_only(&ro_store, Options::default()).unwrap();
    assert_eq!(ro.get(b"in-a-table").unwrap(), Some(b"1".to_vec()));
    assert_eq!(ro.get(b"wal-only").unwrap(), Some(b"2".to_vec()));
    assert!(matches!(ro.put(b"x", b"y"), Err(Error::ReadOnly)));
    // A second reader in this process reads it too: nothing is held.
    let again = Db::open_read_only(&ro_store, Options::default()).unwrap();
    assert_eq!(again.get(b"in-a-table").unwrap(), Some(b"1".to_vec()));
    again.close().unwrap();
    ro.close().unwrap();
    assert_eq!(listing(&store), before, "the directory changed");
    // A writable open of the original still works and finds everything.
    let db = Db::open(&store, Options::default()).unwrap();
    assert_eq!(db.get(b"wal-only").unwrap(), Some(b"2".to_vec()));
    db.close().unwrap();
}
