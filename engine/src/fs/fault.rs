//! A fault-injecting file system for tests: it passes every call to the
//! real file system while tracking what is durable, so a test can fail the
//! N-th write or sync, return short reads, and simulate a power loss that
//! drops everything never synced (file data past the last fsync, files
//! whose directory entry was never synced, renames never made durable).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm_sstable::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;

use super::{AtPath, DirLock, FileSystem, FsResult, RealFs};

#[derive(Debug, Default)]
struct FileState {
    /// Bytes of the file known to be on stable storage.
    synced_len: u64,
    /// The directory entry is durable.
    entry_synced: bool,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, FileState>,
    /// Renames not yet made durable: (to, content `to` had before, if any, from).
    pending_renames: Vec<(PathBuf, Option<Vec<u8>>, PathBuf)>,
    /// Mutating operations (writes and syncs) so far.
    ops: u64,
    /// Fail every mutating operation once `ops` reaches this.
    fail_from_op: Option<u64>,
    /// Fail only the mutating operation with this number (a transient fault).
    fail_only_op: Option<u64>,
    /// Reads return at most this many bytes less than asked (short reads).
    short_reads: bool,
    faults_injected: u64,
    /// Direct (`O_DIRECT`) opens fail as on a file system without it.
    refuse_direct_io: bool,
    /// Creating a table file (`*.sst`) fails; every other file works.
    refuse_table_files: bool,
    /// Creating a table file waits while this is set.
    hold_table_files: bool,
}

/// See the module documentation. Cheap to clone; clones share state.
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

impl FaultFs {
    /// A file system with no faults armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every write or sync from the `n`-th on (counting from 0) fails with
    /// an I/O error, as a full disk or a dying device would.
    pub fn fail_from_op(&self, n: u64) {
        self.state.lock().fail_from_op = Some(n);
    }

    /// Only the `n`-th write or sync (counting from 0) fails; every other
    /// operation, before and after, works (a transient fault, so a
    /// caller's clean-up after the failure reaches the disk).
    pub fn fail_only_op(&self, n: u64) {
        self.state.lock().fail_only_op = Some(n);
    }

    /// Stops injecting failures.
    pub fn heal(&self) {
        let mut s = self.state.lock();
        s.fail_from_op = None;
        s.fail_only_op = None;
    }

    /// Positioned reads fail with `UnexpectedEof` after a partial read.
    pub fn set_short_reads(&self, on: bool) {
        self.state.lock().short_reads = on;
    }

    /// Direct opens (`open_read_direct`) fail as they do on a file system
    /// that refuses `O_DIRECT` (`EINVAL`), whatever the real one does.
    pub fn set_refuse_direct_io(&self, on: bool) {
        self.state.lock().refuse_direct_io = on;
    }

    /// Creating a table file (`*.sst`) fails with an I/O error while WAL
    /// and manifest files keep working: every flush and compaction fails
    /// and frozen memtables stay in memory (and in their WALs), however the
    /// store's threads are scheduled.
    pub fn set_refuse_table_files(&self, on: bool) {
        self.state.lock().refuse_table_files = on;
    }

    /// Creating a table file (`*.sst`) waits until this is turned off
    /// again: a flush or compaction that starts meanwhile stalls before
    /// writing anything, as behind a very slow device, while writes go on
    /// (until the frozen memtables fill up). Turn it off before closing.
    pub fn set_hold_table_files(&self, on: bool) {
        self.state.lock().hold_table_files = on;
    }

    /// Waits while table files are held; then counts and returns the
    /// injected fault when table files are refused and `path` is one.
    fn check_table_file(&self, path: &Path) -> io::Result<()> {
        let is_table = path.extension().is_some_and(|x| x == "sst");
        while is_table && self.state.lock().hold_table_files {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut s = self.state.lock();
        if s.refuse_table_files && is_table {
            s.faults_injected += 1;
            return Err(io::Error::other(format!(
                "injected fault: table file {} refused",
                path.display()
            )));
        }
        Ok(())
    }

    /// Mutating operations performed so far.
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> u64 {
        self.state.lock().faults_injected
    }

    /// Makes the real files look as they would after a power cut: unsynced
    /// renames are undone, files whose entry was never synced vanish, and
    /// every other file is cut back to its last synced length.
    /// REQUIRES: the store using this file system has been dropped or leaked.
    pub fn simulate_power_loss(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        for (to, before, from) in std::mem::take(&mut s.pending_renames).into_iter().rev() {
            if to.exists() {
                fs::rename(&to, &from)?;
            }
            if let Some(bytes) = before {
                fs::write(&to, bytes)?;
            }
            if let Some(st) = s.files.remove(&to) {
                s.files.insert(from, st);
            }
        }
        for (path, st) in s.files.drain() {
            if !path.exists() {
                continue;
            }
            if !st.entry_synced {
                fs::remove_file(&path)?;
            } else {
                fs::OpenOptions::new()
                    .write(true)
                    .open(&path)?
                    .set_len(st.synced_len)?;
            }
        }
        Ok(())
    }

    fn mutate(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        let op = s.ops;
        s.ops += 1;
        if s.fail_from_op.is_some_and(|n| op >= n) || s.fail_only_op == Some(op) {
            s.faults_injected += 1;
            return Err(io::Error::other(format!(
                "injected fault at operation {op}"
            )));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct FaultFile {
    file: fs::File,
    path: PathBuf,
    len: u64,
    fs: FaultFs,
}

impl Write for FaultFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.fs.mutate()?;
        let n = self.file.write(buf)?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl WritableFile for FaultFile {
    fn sync(&mut self) -> io::Result<()> {
        self.fs.mutate()?;
        self.file.sync_data()?;
        if let Some(st) = self.fs.state.lock().files.get_mut(&self.path) {
            st.synced_len = self.len;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct FaultReader {
    inner: Arc<dyn RandomAccessFile>,
    fs: FaultFs,
}

impl FaultReader {
    /// `read` (a point or a bulk read of the inner file), unless short
    /// reads are injected: then half of `buf` is read and the rest fails.
    fn read_with(
        &self,
        buf: &mut [u8],
        offset: u64,
        read: impl Fn(&mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<()> {
        if self.fs.state.lock().short_reads && buf.len() > 1 {
            let half = buf.len() / 2;
            read(&mut buf[..half], offset)?;
            self.fs.state.lock().faults_injected += 1;
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "injected short read",
            ));
        }
        read(buf, offset)
    }
}

impl RandomAccessFile for FaultReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_with(buf, offset, |b, o| self.inner.read_exact_at(b, o))
    }

    fn read_exact_at_bulk(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_with(buf, offset, |b, o| self.inner.read_exact_at_bulk(b, o))
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        self.check_table_file(path).at(path)?;
        self.mutate().at(path)?;
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .at(path)?;
        self.state
            .lock()
            .files
            .insert(path.to_path_buf(), FileState::default());
        Ok(Box::new(FaultFile {
            file,
            path: path.to_path_buf(),
            len: 0,
            fs: self.clone(),
        }))
    }

    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(FaultReader {
            inner: RealFs.open_read(path)?,
            fs: self.clone(),
        }))
    }

    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        {
            let mut s = self.state.lock();
            if s.refuse_direct_io {
                s.faults_injected += 1;
                return Err(super::direct::refused(io::Error::from_raw_os_error(
                    libc::EINVAL,
                )))
                .at(path);
            }
        }
        Ok(Arc::new(FaultReader {
            inner: RealFs.open_read_direct(path)?,
            fs: self.clone(),
        }))
    }

    fn read_all(&self, path: &Path) -> FsResult<Vec<u8>> {
        RealFs.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> FsResult<()> {
        self.mutate().at(to)?;
        let before = fs::read(to).ok();
        fs::rename(from, to).at(to)?;
        let mut s = self.state.lock();
        if let Some(st) = s.files.remove(from) {
            s.files.insert(
                to.to_path_buf(),
                FileState {
                    entry_synced: false,
                    ..st
                },
            );
        }
        s.pending_renames
            .push((to.to_path_buf(), before, from.to_path_buf()));
        Ok(())
    }

    fn remove(&self, path: &Path) -> FsResult<()> {
        self.mutate().at(path)?;
        self.state.lock().files.remove(path);
        fs::remove_file(path).at(path)
    }

    fn list(&self, dir: &Path) -> FsResult<Vec<String>> {
        RealFs.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> FsResult<()> {
        RealFs.create_dir_all(dir)
    }

    fn remove_dir(&self, dir: &Path) -> FsResult<()> {
        self.mutate().at(dir)?;
        RealFs.remove_dir(dir)
    }

    fn sync_dir(&self, dir: &Path) -> FsResult<()> {
        self.mutate().at(dir)?;
        RealFs.sync_dir(dir)?;
        let mut s = self.state.lock();
        for (path, st) in s.files.iter_mut() {
            if path.parent() == Some(dir) {
                st.entry_synced = true;
            }
        }
        s.pending_renames
            .retain(|(to, _, _)| to.parent() != Some(dir));
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        RealFs.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        RealFs.lock_shared(path)
    }
}
