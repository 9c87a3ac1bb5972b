//! A failed open of a new store removes only the directories it made
//! (RELIABILITY row 8): a directory another process makes between the
//! open's look for missing directories and its own creating of them is
//! that process's, and must survive the open's failure.
//!
//! Scenario: the open of `base/shared/store` finds `base/shared` missing;
//! before it makes it, another process makes `base/shared` (for its own
//! store beside this one, say, about to make `base/shared/other` in it);
//! then this open fails (the disk is full when its manifest is written).
//! Before the fix, its undo removed `base/shared`, listed as missing, and
//! the other process's next step found its directory gone.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm::fs::{DirLock, FileSystem, FsResult, RealFs};
use bloomlsm::{Db, Options};
use bloomlsm_sstable::WritableFile;
use parking_lot::Mutex;

use common::real_fs_methods::real_fs_methods;
use common::scratch_dir;

/// The real file system, except that `exists` of `trigger`, once it has
/// answered that it is missing, makes `racing` and its parents (another
/// process's `mkdir -p` right after this open looked), and every `create`
/// fails as a full disk does.
#[derive(Debug)]
struct RacingMkdirFs {
    /// The trigger and what it makes, until the race has run.
    race: Mutex<Option<(PathBuf, PathBuf)>>,
}

impl FileSystem for RacingMkdirFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        Err(bloomlsm::fs::FsError {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full"),
        })
    }
    fn exists(&self, path: &Path) -> bool {
        let there = RealFs.exists(path);
        let mut race = self.race.lock();
        if let Some((trigger, racing)) = race.as_ref()
            && !there
            && trigger == path
        {
            std::fs::create_dir_all(racing).unwrap();
            *race = None;
        }
        there
    }
    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        RealFs.lock(path)
    }
    real_fs_methods!(open_read open_read_direct read_all rename remove list create_dir_all remove_dir sync_dir);
}

/// The open of `base/a/b/store` fails; `racing` (and its parents), made
/// by another process once the open found `base/a` missing, must be left;
/// the directories this open made must not.
fn failed_open_leaves(base: &Path, racing: &Path) {
    let fs = Arc::new(RacingMkdirFs {
        race: Mutex::new(Some((base.join("a"), racing.to_path_buf()))),
    });
    let store = base.join("a/b/store");
    assert!(Db::open_with_fs(&store, Options::default(), fs.clone()).is_err());
    assert!(fs.race.lock().is_none(), "the race never ran");
    assert!(
        racing.is_dir(),
        "{} (another's) was removed by the failed open",
        racing.display()
    );
    // Only the racing directory and its parents are left: what this open
    // made below it is gone.
    let mut left: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![base.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            left.push(p.strip_prefix(base).unwrap().to_path_buf());
            if p.is_dir() {
                dirs.push(p);
            }
        }
    }
    left.sort();
    let want: Vec<PathBuf> = racing
        .strip_prefix(base)
        .unwrap()
        .ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(left, want, "what the failed open left");
}

#[test]
fn a_failed_open_leaves_a_parent_another_process_made_meanwhile() {
    let base = scratch_dir();
    // `a` another's, made after the open looked; `a/b` and `a/b/store`
    // this open's.
    let racing = base.path().join("a");
    failed_open_leaves(base.path(), &racing);
}

#[test]
fn a_failed_open_leaves_the_store_directory_another_process_made_meanwhile() {
    let base = scratch_dir();
    // `a`, `a/b` and `a/b/store` made by another opener of the store:
    // none is this open's.
    let racing = base.path().join("a/b/store");
    failed_open_leaves(base.path(), &racing);
}
