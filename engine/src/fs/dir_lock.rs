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
//! holds its record lock through a live [`HeldLock`].
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
use std::path::Path;
use std::sync::OnceLock;

use parking_lot::Mutex;

use super::{AtPath, DirLock, FsResult};

/// A file by device and inode number.
type FileId = (u64, u64);

/// The LOCK files this process holds (see the module's invariant).
fn held() -> &'static Mutex<HashSet<FileId>> {
    static HELD: OnceLock<Mutex<HashSet<FileId>>> = OnceLock::new();
    HELD.get_or_init(|| Mutex::new(HashSet::new()))
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
}

impl DirLock for HeldLock {}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let mut held = held().lock();
        // Closing releases the record lock; only then may another open in
        // this process open the file (its close could not drop ours).
        drop(self.file.take());
        held.remove(&self.id);
    }
}

/// Takes the lock on `path` (creating the file if missing); `Ok(None)` when
/// another process or another open in this one holds it.
pub(super) fn lock(path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
    let mut held = held().lock();
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
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
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
        if !try_record_lock(&file).at(path)? {
            return Ok(None);
        }
        if still_named(&file, path).at(path)? {
            held.insert(id);
            return Ok(Some(Box::new(HeldLock {
                file: Some(file),
                id,
            })));
        }
        // Not in the table, so closing drops only this attempt's lock.
        drop(file);
    }
    Ok(None)
}

/// `fcntl(F_SETLK)`: an exclusive record lock on the whole file, without
/// waiting. `Ok(false)` when another process holds a conflicting lock.
fn try_record_lock(file: &File) -> io::Result<bool> {
    // SAFETY: `flock` is a plain C struct of integers; all zeroes is a
    // valid value of it, and the fields the call reads are set below.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = libc::F_WRLCK as libc::c_short;
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
        let held_lock = lock(&path).unwrap().unwrap();
        assert!(lock(&path).unwrap().is_none(), "held: refused");
        // An opener that opened LOCK just before a failed open unlinked it
        // would lock a file no path names: that is not the store's lock.
        let early = File::open(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert!(!still_named(&early, &path).unwrap());
        // Locking goes to what the path names now.
        let now = lock(&path).unwrap().unwrap();
        assert!(path.exists());
        assert!(lock(&path).unwrap().is_none());
        fs::remove_file(&path).unwrap();
        fs::write(&path, b"").unwrap();
        assert!(
            !still_named(&early, &path).unwrap(),
            "another file at the path"
        );
        drop(now);
        drop(held_lock);
    }

    #[test]
    fn the_table_holds_an_inode_exactly_while_its_lock_lives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let id = |p: &Path| {
            let m = fs::metadata(p).unwrap();
            (m.dev(), m.ino())
        };
        let first = lock(&path).unwrap().unwrap();
        assert!(held().lock().contains(&id(&path)));
        // A second path to the same file (a hard link) is the same lock.
        let link = dir.path().join("LOCK.link");
        fs::hard_link(&path, &link).unwrap();
        assert!(lock(&link).unwrap().is_none());
        drop(first);
        assert!(!held().lock().contains(&id(&path)));
        let again = lock(&link).unwrap().unwrap();
        assert!(lock(&path).unwrap().is_none());
        drop(again);
        assert!(!held().lock().contains(&id(&path)));
    }
}
