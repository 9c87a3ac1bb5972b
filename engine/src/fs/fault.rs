//! A fault-injecting file system for tests: it passes every call to the
//! real file system while tracking what is durable, so a test can fail the
//! N-th write or sync, return short reads, and simulate a power loss that
//! drops everything never synced (file data past the last fsync, files
//! whose directory entry was never synced, renames never made durable) and
//! undoes unlinks never made durable: as on ext4 or xfs, a file removed
//! without a later fsync of its directory may come back after a power cut,
//! with the bytes it had synced. Which of those unlinks come back is a
//! seeded choice ([`Revival`]), since a real crash may keep any subset.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm_sstable::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;

use super::{AtPath, DirLock, FileSystem, FsResult, RealFs};

#[derive(Debug, Default, Clone, Copy)]
struct FileState {
    /// Bytes of the file known to be on stable storage.
    synced_len: u64,
    /// The directory entry is durable.
    entry_synced: bool,
}

/// Which unlinks not yet made durable a power loss undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revival {
    /// Every one comes back.
    All,
    /// None comes back: every unlink is durable at once.
    Nothing,
    /// Each comes back or not by a coin flip drawn from the seed, the
    /// number of the unlink's operation and the number of operations at
    /// the power loss: the same run makes the same choice, and a crash
    /// at another point makes another.
    Seeded(u64),
}

impl Default for Revival {
    fn default() -> Self {
        Self::Seeded(0)
    }
}

impl Revival {
    /// Whether the unlink that was operation `op` comes back at a power
    /// loss after `at` operations.
    fn revives(self, op: u64, at: u64) -> bool {
        match self {
            Self::All => true,
            Self::Nothing => false,
            Self::Seeded(seed) => mix(seed ^ mix(op ^ mix(at))) & 1 == 1,
        }
    }
}

/// The splitmix64 finalizer: a cheap, well-spread hash of a `u64`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A change to a directory not yet made durable by a fsync of it.
#[derive(Debug)]
enum Pending {
    /// `from` (its entry durable when `from_entry_synced`) was renamed to
    /// `to`, which held `before` (if it existed).
    Rename {
        to: PathBuf,
        before: Option<Vec<u8>>,
        from: PathBuf,
        from_entry_synced: bool,
    },
    /// `path` was unlinked by operation `op`; undone, it is back with
    /// `bytes` (what of it was synced) and its entry as durable as it was.
    Unlink {
        path: PathBuf,
        bytes: Vec<u8>,
        entry_synced: bool,
        op: u64,
    },
}

impl Pending {
    fn path(&self) -> &Path {
        match self {
            Self::Rename { to, .. } => to,
            Self::Unlink { path, .. } => path,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, FileState>,
    /// Directory changes not yet made durable, oldest first.
    pending: Vec<Pending>,
    /// Which pending unlinks a power loss undoes.
    revival: Revival,
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
    /// Creating or appending to a table file (`*.sst`) fails; every other
    /// file works.
    refuse_table_files: bool,
    /// Appending to an existing file is refused (`Unsupported`), as by a
    /// file system that cannot: filter rebuilds then copy tables.
    refuse_appends: bool,
    /// Creating or appending to a table file waits while this is set.
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

    /// Which unlinks never made durable come back at a power loss
    /// (by default `Revival::Seeded(0)`).
    pub fn set_revival(&self, revival: Revival) {
        self.state.lock().revival = revival;
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

    /// Refuse [`FileSystem::append_at`] as unsupported (or allow it again).
    pub fn set_refuse_appends(&self, on: bool) {
        self.state.lock().refuse_appends = on;
    }

    /// Creating or appending to a table file (`*.sst`) fails with an I/O
    /// error while WAL and manifest files keep working: every flush,
    /// compaction and filter rebuild fails and frozen memtables stay in
    /// memory (and in their WALs), however the store's threads are
    /// scheduled.
    pub fn set_refuse_table_files(&self, on: bool) {
        self.state.lock().refuse_table_files = on;
    }

    /// Creating or appending to a table file (`*.sst`) waits until this is
    /// turned off again: a flush, compaction or rebuild that starts meanwhile stalls before
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

    /// Makes the real files look as they would after a power cut: directory
    /// changes never made durable are undone, newest first (every rename;
    /// the unlinks [`Revival`] chooses, each file back with its synced
    /// bytes, and every unlink made after an undone rename in the same
    /// directory, as a journal keeps a directory's changes in order), files
    /// whose entry was never synced vanish, and every other file is cut
    /// back to its last synced length.
    /// REQUIRES: the store using this file system has been dropped or leaked.
    pub fn simulate_power_loss(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        let at = s.ops;
        let revival = s.revival;
        let pending = std::mem::take(&mut s.pending);
        // Directories in which a rename (always undone) comes before an unlink.
        let mut renamed_in: Vec<&Path> = Vec::new();
        let mut forced = vec![false; pending.len()];
        for (i, p) in pending.iter().enumerate() {
            let dir = p.path().parent();
            match p {
                Pending::Rename { .. } => renamed_in.extend(dir),
                Pending::Unlink { .. } => forced[i] = dir.is_some_and(|d| renamed_in.contains(&d)),
            }
        }
        for (p, forced) in pending.iter().zip(forced).rev() {
            match p {
                Pending::Rename {
                    to,
                    before,
                    from,
                    from_entry_synced,
                } => {
                    if to.exists() {
                        fs::rename(to, from)?;
                    }
                    if let Some(bytes) = before {
                        fs::write(to, bytes)?;
                    }
                    if let Some(st) = s.files.remove(to) {
                        let entry_synced = *from_entry_synced;
                        s.files
                            .insert(from.clone(), FileState { entry_synced, ..st });
                    }
                }
                Pending::Unlink {
                    path,
                    bytes,
                    entry_synced,
                    op,
                } => {
                    // A removed directory took its entries with it.
                    let parent_there = path.parent().is_some_and(Path::is_dir);
                    if !parent_there || !(forced || revival.revives(*op, at)) {
                        continue;
                    }
                    // Over any file created here since: its entry, newer
                    // than the unlink, is not durable either.
                    fs::write(path, bytes)?;
                    s.files.insert(
                        path.clone(),
                        FileState {
                            synced_len: bytes.len() as u64,
                            entry_synced: *entry_synced,
                        },
                    );
                }
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

    /// Counts a mutating operation and returns its number, or fails it
    /// as armed.
    fn mutate(&self) -> io::Result<u64> {
        let mut s = self.state.lock();
        let op = s.ops;
        s.ops += 1;
        if s.fail_from_op.is_some_and(|n| op >= n) || s.fail_only_op == Some(op) {
            s.faults_injected += 1;
            return Err(io::Error::other(format!(
                "injected fault at operation {op}"
            )));
        }
        Ok(op)
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

    fn append_at(&self, path: &Path, len: u64) -> FsResult<Box<dyn WritableFile>> {
        if self.state.lock().refuse_appends {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "appends refused by FaultFs",
            ))
            .at(path);
        }
        self.check_table_file(path).at(path)?;
        self.mutate().at(path)?;
        let mut file = fs::OpenOptions::new().write(true).open(path).at(path)?;
        super::cut_to(&mut file, len).at(path)?;
        // A file this run never wrote is durable as it is. The cut is
        // modelled durable: what lay past `len` was never a table's, so
        // whether a power loss brings it back changes no answer.
        let mut s = self.state.lock();
        let st = s.files.entry(path.to_path_buf()).or_insert(FileState {
            synced_len: len,
            entry_synced: true,
        });
        st.synced_len = st.synced_len.min(len);
        Ok(Box::new(FaultFile {
            file,
            path: path.to_path_buf(),
            len,
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
        let mut from_entry_synced = true;
        if let Some(st) = s.files.remove(from) {
            from_entry_synced = st.entry_synced;
            s.files.insert(
                to.to_path_buf(),
                FileState {
                    entry_synced: false,
                    ..st
                },
            );
        }
        s.pending.push(Pending::Rename {
            to: to.to_path_buf(),
            before,
            from: from.to_path_buf(),
            from_entry_synced,
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> FsResult<()> {
        let op = self.mutate().at(path)?;
        // What an undone unlink brings back: the synced bytes, or the
        // whole of a file this file system did not create (it was there,
        // durable, before: a file that survived a power loss, say).
        let tracked = self.state.lock().files.get(path).copied();
        let durable = match tracked {
            Some(st) if st.synced_len == 0 => Some((Vec::new(), st.entry_synced)),
            Some(st) => fs::read(path).ok().map(|mut bytes| {
                bytes.truncate(usize::try_from(st.synced_len).unwrap_or(usize::MAX));
                (bytes, st.entry_synced)
            }),
            None => fs::read(path).ok().map(|bytes| (bytes, true)),
        };
        fs::remove_file(path).at(path)?;
        let mut s = self.state.lock();
        s.files.remove(path);
        if let Some((bytes, entry_synced)) = durable {
            s.pending.push(Pending::Unlink {
                path: path.to_path_buf(),
                bytes,
                entry_synced,
                op,
            });
        }
        Ok(())
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
        s.pending.retain(|p| p.path().parent() != Some(dir));
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

#[cfg(test)]
mod tests;
