//! The file system a read-only store runs on: reads, listings and the
//! directory lock pass through; every call that would change the
//! directory or a file (create, append, overwrite, rename, remove, mkdir,
//! rmdir, directory fsync) fails with `ReadOnlyFilesystem` and touches
//! nothing.
//!
//! A read-only store refuses writes with `Error::ReadOnly` before any of
//! these is reached; this layer is the second line: a path missed there
//! fails instead of changing the store being studied.

use std::io;
use std::path::Path;
use std::sync::Arc;

use bloomlsm_sstable::{RandomAccessFile, WritableFile};

use crate::fs::{DirLock, FileSystem, FsError, FsResult};

/// Passes reads and the lock to `inner`, refuses every change.
#[derive(Debug)]
pub(crate) struct ReadOnlyFs {
    inner: Arc<dyn FileSystem>,
}

impl ReadOnlyFs {
    pub(crate) fn new(inner: Arc<dyn FileSystem>) -> Self {
        Self { inner }
    }
}

fn refused<T>(what: &str, path: &Path) -> FsResult<T> {
    Err(FsError {
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::ReadOnlyFilesystem,
            format!("{what} refused: the store is open read-only"),
        ),
    })
}

impl FileSystem for ReadOnlyFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        refused("create", path)
    }

    fn append_at(&self, path: &Path, _len: u64) -> FsResult<Box<dyn WritableFile>> {
        refused("append to", path)
    }

    fn overwrite(&self, path: &Path, _offset: u64, _bytes: &[u8]) -> FsResult<()> {
        refused("overwrite", path)
    }

    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        self.inner.open_read(path)
    }

    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        self.inner.open_read_direct(path)
    }

    fn read_all(&self, path: &Path) -> FsResult<Vec<u8>> {
        self.inner.read_all(path)
    }

    fn rename(&self, _from: &Path, to: &Path) -> FsResult<()> {
        refused("rename", to)
    }

    fn remove(&self, path: &Path) -> FsResult<()> {
        refused("remove", path)
    }

    fn list(&self, dir: &Path) -> FsResult<Vec<String>> {
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> FsResult<()> {
        refused("create directory", dir)
    }

    fn create_dir(&self, dir: &Path) -> FsResult<()> {
        refused("create directory", dir)
    }

    fn remove_dir(&self, dir: &Path) -> FsResult<()> {
        refused("remove directory", dir)
    }

    fn sync_dir(&self, dir: &Path) -> FsResult<()> {
        refused("directory fsync", dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    /// A read lock: it excludes writers and is shared with read-only opens
    /// in other processes ([`FileSystem::lock_shared`]).
    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        self.inner.lock_shared(path)
    }
}

/// The lock of a read-only open that had to create `LOCK` (a store copied
/// without it): on release the file is unlinked while still held (as a
/// failed open unlinks a `LOCK` it created), so the directory is left as
/// it was found; but only if no read-only open in another process shares
/// it, or a writer could create a fresh `LOCK` and take it beside that
/// reader, and only if `LOCK` still names the file held (one renamed over
/// it may be a writer's). Otherwise the file stays (empty, harmless).
#[derive(Debug)]
pub(crate) struct CreatedLock {
    pub(crate) lock: Option<Box<dyn DirLock>>,
    pub(crate) path: std::path::PathBuf,
    /// The file system under the read-only layer.
    pub(crate) fs: Arc<dyn FileSystem>,
}

impl DirLock for CreatedLock {}

impl Drop for CreatedLock {
    fn drop(&mut self) {
        // Best effort: a LOCK left behind is harmless.
        if let Some(lock) = self.lock.take() {
            if lock.try_exclusive() {
                let _ = self.fs.remove(&self.path);
            }
            drop(lock);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;
    use crate::fs::RealFs;

    #[test]
    fn every_change_is_refused_and_nothing_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("000001.wal");
        std::fs::write(&file, b"record").unwrap();
        let fs = ReadOnlyFs::new(Arc::new(RealFs));
        let read_only = |r: FsResult<()>| {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::ReadOnlyFilesystem, "{e}");
        };
        read_only(fs.create(&file).map(drop));
        read_only(fs.create(&dir.path().join("new.sst")).map(drop));
        read_only(fs.rename(&file, &dir.path().join("MANIFEST")));
        read_only(fs.remove(&file));
        read_only(fs.create_dir_all(&dir.path().join("sub")));
        read_only(fs.remove_dir(dir.path()));
        read_only(fs.sync_dir(dir.path()));
        assert_eq!(fs.list(dir.path()).unwrap(), vec!["000001.wal".to_string()]);
        assert_eq!(fs.read_all(&file).unwrap(), b"record");
        assert!(fs.open_read(&file).is_ok());
        // The lock is the real one: a second taker is refused.
        let lock = dir.path().join("LOCK");
        let held = fs.lock(&lock).unwrap().unwrap();
        assert!(RealFs.lock(&lock).unwrap().is_none());
        drop(held);
    }
}
