//! A fault-injecting file system for tests: it passes every call to the
//! real file system while tracking what is durable, so a test can fail the
//! N-th write or sync, fail the N-th read or read-open ([`ReadFault`],
//! `reads.rs`), return short reads, and simulate a power loss.
//!
//! The power loss never touches the bytes a file had fsynced. What it
//! leaves of the bytes written after them is a seeded choice
//! ([`UnsyncedFate`]): by default all are lost, the file cut back to its
//! synced length; under `UnsyncedFate::Pages` they are 4 KiB pages, each
//! persisted with its bytes or read back as zeros, in any mix, and the
//! file's length anything from the end of its last persisted page to its
//! written length, as write-back from the page cache in any order, a
//! disk's volatile cache and ext4 or xfs (which show a range never
//! written back as zeros) allow.
//!
//! Directory changes not yet made durable by a fsync of the directory
//! (creates, renames, unlinks) may each be lost or kept, as on ext4 or
//! xfs, whose journal commits a directory's changes in order:
//! - a rename is kept or undone by a seeded choice ([`RenameFate`]). Kept,
//!   its file holds its synced bytes (and what [`UnsyncedFate`] leaves of
//!   the rest) and the file it replaced is gone;
//!   undone, the file is back under its old name and the replaced one is
//!   back with its synced bytes;
//! - an unlink is undone (the file back with its synced bytes) or kept by
//!   another seeded choice ([`Revival`]), since a crash may keep any subset;
//! - a file whose entry was never synced vanishes;
//! - a directory made by [`FileSystem::create_dir_all`] or
//!   [`FileSystem::create_dir`] whose entry was never synced (by a fsync
//!   of its parent) vanishes with everything in it.
//!
//! Both choices follow the journal's order within a directory: a kept
//! rename keeps every earlier change there (files created before it keep
//! their entries, unlinks before it stay done), and an undone rename undoes
//! every later one (unlinks after it come back, files created after it
//! vanish). So within one directory the kept renames are a prefix of its
//! pending renames. A rename across directories is ordered with the
//! changes of the directory it renames into.
//!
//! A failing write may first apply a prefix of its bytes, as a short
//! write before the error does ([`PartialWrite`], `partial.rs`; by
//! default none).
//!
//! An overwrite in place ([`FileSystem::overwrite`]) counts two operations,
//! its write and its fsync, so a crash can fall between them; a power loss
//! there leaves each sector of it (each page under `UnsyncedFate::Pages`)
//! new or old by a seeded choice ([`OverwriteFate`], `overwrites.rs`).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm_sstable::{RandomAccessFile, WritableFile};
use parking_lot::Mutex;

use super::{AtPath, DirLock, FileSystem, FsResult, RealFs};

mod overwrites;
mod pages;
mod partial;
mod reads;
pub use overwrites::OverwriteFate;
use overwrites::PendingOverwrite;
pub use pages::UnsyncedFate;
pub use partial::PartialWrite;
pub use reads::ReadFault;

#[derive(Debug, Default, Clone, Copy)]
struct FileState {
    /// Bytes of the file known to be on stable storage.
    synced_len: u64,
    /// The directory entry is durable.
    entry_synced: bool,
    /// The operation that made the entry (its create or the rename to
    /// it): a kept rename of a later operation in the same directory makes
    /// an entry not yet synced durable.
    entry_op: u64,
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

/// Which renames not yet made durable a power loss keeps. Whatever the
/// choice, within one directory the kept renames are the oldest ones: once
/// one is undone, every later rename into that directory is undone too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenameFate {
    /// Every one is undone.
    Undone,
    /// Every one is kept, as if the journal had committed just before
    /// the power loss.
    Kept,
    /// Each is kept or undone by a coin flip drawn from the seed, the
    /// number of the rename's operation and the number of operations at
    /// the power loss (a flip independent of [`Revival`]'s), unless an
    /// earlier rename into the same directory was undone.
    Seeded(u64),
}

impl Default for RenameFate {
    fn default() -> Self {
        Self::Seeded(0)
    }
}

impl RenameFate {
    /// Whether the rename that was operation `op` is kept at a power loss
    /// after `at` operations, no earlier rename into its directory undone.
    fn keeps(self, op: u64, at: u64) -> bool {
        match self {
            Self::Undone => false,
            Self::Kept => true,
            Self::Seeded(seed) => mix(seed ^ mix(op ^ mix(at ^ RENAME_SALT))) & 1 == 1,
        }
    }
}

/// Makes a rename's coin independent of an unlink's at the same numbers.
const RENAME_SALT: u64 = 0x5245_4e41_4d45_u64;

/// The splitmix64 finalizer: a cheap, well-spread hash of a `u64`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A directory made through this file system (by
/// [`FileSystem::create_dir_all`]): a power loss removes it, with
/// everything in it, unless its entry was made durable.
#[derive(Debug, Default, Clone, Copy)]
struct DirState {
    /// Its entry in its parent is durable (the parent was fsynced).
    entry_synced: bool,
    /// The operation that made it.
    entry_op: u64,
}

/// A change to a directory not yet made durable by a fsync of it.
#[derive(Debug)]
enum Pending {
    /// `from` (tracked as `from_state`, unless it was durable as it was)
    /// was renamed to `to` by operation `op`; `to` held `before` (its
    /// bytes and how it was tracked), if it existed.
    Rename {
        to: PathBuf,
        before: Option<(Vec<u8>, Option<FileState>)>,
        from: PathBuf,
        from_state: Option<FileState>,
        op: u64,
    },
    /// `path` was unlinked by operation `op`; undone, it is back with
    /// `bytes` (what of it was synced) and its entry as durable as it was
    /// (`entry`: synced, and the operation that made it).
    Unlink {
        path: PathBuf,
        bytes: Vec<u8>,
        entry: (bool, u64),
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

    fn op(&self) -> u64 {
        match self {
            Self::Rename { op, .. } | Self::Unlink { op, .. } => *op,
        }
    }
}

/// Where a power loss cuts each directory's journal of pending changes.
#[derive(Debug, Default)]
struct Cuts {
    /// Per directory, the operation of its newest kept rename: every
    /// change there up to it is durable.
    kept_through: HashMap<PathBuf, u64>,
    /// Per directory, the operation of its oldest undone rename: every
    /// change there from it on is lost.
    undone_from: HashMap<PathBuf, u64>,
}

impl Cuts {
    /// Decides every pending rename's fate, oldest first.
    fn decide(pending: &[Pending], fate: RenameFate, at: u64) -> Self {
        let mut cuts = Self::default();
        for p in pending {
            let (Pending::Rename { op, .. }, Some(dir)) = (p, p.path().parent()) else {
                continue;
            };
            if cuts.undone_from.contains_key(dir) {
                continue;
            }
            if fate.keeps(*op, at) {
                cuts.kept_through.insert(dir.to_path_buf(), *op);
            } else {
                cuts.undone_from.insert(dir.to_path_buf(), *op);
            }
        }
        cuts
    }

    fn dir_op(map: &HashMap<PathBuf, u64>, path: &Path) -> Option<u64> {
        path.parent().and_then(|d| map.get(d)).copied()
    }

    /// The change at `path` made by operation `op` is durable: a rename
    /// kept after it in its directory committed it.
    fn kept(&self, path: &Path, op: u64) -> bool {
        Self::dir_op(&self.kept_through, path).is_some_and(|k| op <= k)
    }

    /// The change at `path` made by operation `op` is lost: a rename
    /// undone before it in its directory took it with it.
    fn undone(&self, path: &Path, op: u64) -> bool {
        Self::dir_op(&self.undone_from, path).is_some_and(|u| op >= u)
    }
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, FileState>,
    /// Directories made through this file system and not removed since.
    dirs: HashMap<PathBuf, DirState>,
    /// Directory changes not yet made durable, oldest first.
    pending: Vec<Pending>,
    /// Which pending unlinks a power loss undoes.
    revival: Revival,
    /// Which pending renames a power loss keeps.
    rename_fate: RenameFate,
    /// What a power loss leaves of the bytes written after a file's last
    /// fsync.
    unsynced_fate: UnsyncedFate,
    /// Overwrites in place no fsync of their file has made durable yet,
    /// oldest first.
    overwrites: Vec<PendingOverwrite>,
    /// Which of their sectors a power loss applies.
    overwrite_fate: OverwriteFate,
    /// Mutating operations so far: every create, `append_at`, write,
    /// sync, rename, remove, directory made (one per directory, by
    /// `create_dir_all`), directory removed and directory fsync, and an
    /// overwrite's write and its fsync (two). Reads, listings and locks
    /// are not counted.
    ops: u64,
    /// Fail every mutating operation once `ops` reaches this.
    fail_from_op: Option<u64>,
    /// Fail only the mutating operation with this number (a transient fault).
    fail_only_op: Option<u64>,
    /// Reads return at most this many bytes less than asked (short reads).
    short_reads: bool,
    /// Read-opens so far, and which fail.
    read_opens: reads::Series,
    /// Positioned reads so far, and which fail.
    reads: reads::Series,
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
    /// Threads waiting in such a create or append now.
    table_files_waiting: usize,
    /// The kind of every injected failure (`None`: `Other`).
    fault_kind: Option<io::ErrorKind>,
    /// What of a failing write (of a file opened by `create` or
    /// `append_at`) reaches the file before the error.
    partial_writes: PartialWrite,
}

impl State {
    /// An injected failure, of the kind armed.
    fn fault(&self, message: String) -> io::Error {
        io::Error::new(self.fault_kind.unwrap_or(io::ErrorKind::Other), message)
    }
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

    /// Every mutating operation (see [`Self::ops`]: writes, syncs,
    /// creates, renames, removes, directories made and directory fsyncs)
    /// from the `n`-th on (counting from 0) fails with an I/O error, as a
    /// full disk or a dying device would. A failed operation changes
    /// nothing.
    pub fn fail_from_op(&self, n: u64) {
        self.state.lock().fail_from_op = Some(n);
    }

    /// Only the `n`-th mutating operation (counting from 0) fails; every other
    /// operation, before and after, works (a transient fault, so a
    /// caller's clean-up after the failure reaches the disk).
    pub fn fail_only_op(&self, n: u64) {
        self.state.lock().fail_only_op = Some(n);
    }

    /// What a write that fails (as armed by [`Self::fail_from_op`] or
    /// [`Self::fail_only_op`]) of a file made by [`FileSystem::create`] or
    /// [`FileSystem::append_at`] applies first (by default
    /// `PartialWrite::Nothing`). Overwrites in place, creates, syncs and
    /// directory changes still change nothing when they fail.
    pub fn set_partial_writes(&self, partial: PartialWrite) {
        self.state.lock().partial_writes = partial;
    }

    /// Which unlinks never made durable come back at a power loss
    /// (by default `Revival::Seeded(0)`).
    pub fn set_revival(&self, revival: Revival) {
        self.state.lock().revival = revival;
    }

    /// Which renames never made durable a power loss keeps (by default
    /// `RenameFate::Seeded(0)`).
    pub fn set_rename_fate(&self, fate: RenameFate) {
        self.state.lock().rename_fate = fate;
    }

    /// What a power loss leaves of the bytes written to a file after its
    /// last fsync (by default `UnsyncedFate::Truncated`: nothing).
    pub fn set_unsynced_fate(&self, fate: UnsyncedFate) {
        self.state.lock().unsynced_fate = fate;
    }

    /// Which sectors of an overwrite in place not yet fsynced a power
    /// loss applies (by default `OverwriteFate::Seeded(0)`).
    pub fn set_overwrite_fate(&self, fate: OverwriteFate) {
        self.state.lock().overwrite_fate = fate;
    }

    /// The kind of the failures injected from now on by
    /// [`Self::fail_from_op`], [`Self::fail_only_op`] and
    /// [`Self::set_refuse_table_files`] (by default `Other`): say,
    /// `StorageFull`, as a full disk fails a write.
    pub fn set_fault_kind(&self, kind: io::ErrorKind) {
        self.state.lock().fault_kind = Some(kind);
    }

    /// Stops injecting failures of writes, syncs, reads and read-opens.
    pub fn heal(&self) {
        let mut s = self.state.lock();
        s.fail_from_op = None;
        s.fail_only_op = None;
        s.read_opens.arm(None);
        s.reads.arm(None);
    }

    /// The read-opens `fault` picks fail with `EIO` naming the path:
    /// [`FileSystem::open_read`], [`FileSystem::open_read_direct`] and
    /// [`FileSystem::read_all`] (numbered together, from 0 at the file
    /// system's creation; [`Self::read_opens`] says how many were made).
    /// Whatever the kind armed by [`Self::set_fault_kind`].
    pub fn fail_read_opens(&self, fault: ReadFault) {
        self.state.lock().read_opens.arm(Some(fault));
    }

    /// The positioned reads `fault` picks fail with `EIO` and read nothing
    /// (`read_exact_at` and `read_exact_at_bulk` of every file opened
    /// through this file system, numbered together from 0;
    /// [`Self::reads`] says how many were made). Whatever the kind armed
    /// by [`Self::set_fault_kind`].
    pub fn fail_reads(&self, fault: ReadFault) {
        self.state.lock().reads.arm(Some(fault));
    }

    /// [`Self::fail_reads`] with errors of `kind` instead of `EIO`: a
    /// read whose buffer the allocator refused fails `OutOfMemory`.
    pub fn fail_reads_as(&self, fault: ReadFault, kind: io::ErrorKind) {
        self.state.lock().reads.arm_as(fault, kind);
    }

    /// Read-opens made so far (the number of the next one).
    pub fn read_opens(&self) -> u64 {
        self.state.lock().read_opens.made()
    }

    /// Positioned reads made so far (the number of the next one).
    pub fn reads(&self) -> u64 {
        self.state.lock().reads.made()
    }

    /// Counts a read-open of `path`; fails it as armed.
    fn read_open(&self, path: &Path) -> FsResult<()> {
        let mut s = self.state.lock();
        match s.read_opens.call() {
            Some(e) => {
                s.faults_injected += 1;
                Err(e).at(path)
            }
            None => Ok(()),
        }
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

    /// Threads waiting now to create or append to a table file
    /// ([`Self::set_hold_table_files`]): a test can tell that a flush
    /// has taken its memtables and stands before its first operation.
    pub fn table_files_waiting(&self) -> usize {
        self.state.lock().table_files_waiting
    }

    /// Waits while table files are held; then counts and returns the
    /// injected fault when table files are refused and `path` is one.
    fn check_table_file(&self, path: &Path) -> io::Result<()> {
        let is_table = path.extension().is_some_and(|x| x == "sst");
        let held = is_table && {
            let mut s = self.state.lock();
            s.table_files_waiting += usize::from(s.hold_table_files);
            s.hold_table_files
        };
        if held {
            while self.state.lock().hold_table_files {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.state.lock().table_files_waiting -= 1;
        }
        let mut s = self.state.lock();
        if s.refuse_table_files && is_table {
            s.faults_injected += 1;
            return Err(s.fault(format!(
                "injected fault: table file {} refused",
                path.display()
            )));
        }
        Ok(())
    }

    /// Mutating operations performed so far (failed ones included): every
    /// create, `append_at`, write, sync, rename, remove, directory made
    /// (one per directory `create_dir_all` makes), directory removed and
    /// directory fsync, and an overwrite's write and its fsync (two).
    pub fn ops(&self) -> u64 {
        self.state.lock().ops
    }

    /// Renames a power loss now would keep or undo (none made durable
    /// yet), so a test can try it again under another [`RenameFate`].
    pub fn pending_renames(&self) -> usize {
        let s = self.state.lock();
        s.pending
            .iter()
            .filter(|p| matches!(p, Pending::Rename { .. }))
            .count()
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> u64 {
        self.state.lock().faults_injected
    }

    /// Makes the real files look as they would after a power cut (see the
    /// module documentation): [`RenameFate`] picks the renames kept, each
    /// directory's oldest ones; the changes after an undone rename in its
    /// directory are undone, newest first, with the unlinks [`Revival`]
    /// chooses among those neither before a kept rename nor after an
    /// undone one; files whose entry is not durable vanish, and every
    /// other file keeps its synced bytes and what [`UnsyncedFate`] leaves
    /// of the bytes written after them.
    /// REQUIRES: the store using this file system has been dropped or leaked.
    pub fn simulate_power_loss(&self) -> io::Result<()> {
        let mut s = self.state.lock();
        let at = s.ops;
        let revival = s.revival;
        let unsynced_fate = s.unsynced_fate;
        // Overwrites first, by the names their files have now: undoing a
        // rename below moves the settled bytes with the file.
        let overwrites = std::mem::take(&mut s.overwrites);
        let synced_len = |path: &Path| s.files.get(path).map(|st| st.synced_len);
        overwrites::settle(&overwrites, s.overwrite_fate, unsynced_fate, synced_len, at)?;
        let pending = std::mem::take(&mut s.pending);
        let cuts = Cuts::decide(&pending, s.rename_fate, at);
        for p in pending.iter().rev() {
            if cuts.kept(p.path(), p.op()) {
                continue;
            }
            match p {
                Pending::Rename {
                    to,
                    before,
                    from,
                    from_state,
                    ..
                } => {
                    if to.exists() {
                        fs::rename(to, from)?;
                    }
                    s.files.remove(to);
                    if let Some(st) = from_state {
                        s.files.insert(from.clone(), *st);
                    }
                    if let Some((bytes, before_state)) = before {
                        fs::write(to, bytes)?;
                        if let Some(st) = before_state {
                            s.files.insert(to.clone(), *st);
                        }
                    }
                }
                Pending::Unlink {
                    path,
                    bytes,
                    entry: (entry_synced, entry_op),
                    op,
                } => {
                    // A removed directory took its entries with it.
                    let parent_there = path.parent().is_some_and(Path::is_dir);
                    let back = cuts.undone(path, *op) || revival.revives(*op, at);
                    if !parent_there || !back {
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
                            entry_op: *entry_op,
                        },
                    );
                }
            }
        }
        for (path, st) in s.files.drain() {
            if !path.exists() {
                continue;
            }
            if !st.entry_synced && !cuts.kept(&path, st.entry_op) {
                fs::remove_file(&path)?;
            } else {
                unsynced_fate.settle(&path, st.synced_len, at)?;
            }
        }
        // A directory whose entry never became durable is unreachable
        // after the power cut, with whatever was made in it; shallowest
        // first (removing it removes any deeper one).
        let mut dirs: Vec<(PathBuf, DirState)> = s.dirs.drain().collect();
        dirs.sort_by_key(|(path, _)| path.components().count());
        for (path, st) in dirs {
            if path.is_dir() && !st.entry_synced && !cuts.kept(&path, st.entry_op) {
                fs::remove_dir_all(&path)?;
            }
        }
        Ok(())
    }

    /// Counts a mutating operation and returns its number, or fails it
    /// as armed.
    fn mutate(&self) -> io::Result<u64> {
        self.mutate_write(0, 0).map_err(|(e, _)| e)
    }

    /// [`Self::mutate`] for a write of `len` bytes at file offset
    /// `offset`: a failure comes with how many of them to apply first
    /// ([`PartialWrite`]).
    fn mutate_write(&self, offset: u64, len: usize) -> Result<u64, (io::Error, usize)> {
        let mut s = self.state.lock();
        let op = s.ops;
        s.ops += 1;
        if s.fail_from_op.is_some_and(|n| op >= n) || s.fail_only_op == Some(op) {
            s.faults_injected += 1;
            let prefix = s.partial_writes.prefix(offset, len, op);
            return Err((s.fault(format!("injected fault at operation {op}")), prefix));
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
        if let Err((e, prefix)) = self.fs.mutate_write(self.len, buf.len()) {
            // A short write, then the failure of the call that would
            // have written the rest.
            self.file.write_all(&buf[..prefix])?;
            self.len += prefix as u64;
            return Err(e);
        }
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
        self.fs.synced(&self.path, self.len);
        Ok(())
    }
}

impl FaultFs {
    /// A fsync of `path` (through any descriptor) returned with the file
    /// `len` bytes long: those bytes, and every overwrite in place of
    /// them, are durable.
    fn synced(&self, path: &Path, len: u64) {
        let mut s = self.state.lock();
        if let Some(st) = s.files.get_mut(path) {
            st.synced_len = len;
        }
        s.overwrites.retain(|p| p.path != path);
    }

    /// [`FileSystem::overwrite`]: the write, then (another operation, so a
    /// crash can fall between them) the fsync.
    fn overwrite_then_sync(&self, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let op = self.mutate()?;
        let file = fs::OpenOptions::new().read(true).write(true).open(path)?;
        let len = file.metadata()?.len();
        let old_end = offset.saturating_add(bytes.len() as u64).min(len);
        let mut old =
            vec![0u8; usize::try_from(old_end.saturating_sub(offset)).map_err(io::Error::other)?];
        FileExt::read_exact_at(&file, &mut old, offset)?;
        file.write_all_at(bytes, offset)?;
        {
            let mut s = self.state.lock();
            // A file this run never wrote was durable as it was.
            s.files.entry(path.to_path_buf()).or_insert(FileState {
                synced_len: len,
                entry_synced: true,
                entry_op: 0,
            });
            s.overwrites.push(PendingOverwrite {
                path: path.to_path_buf(),
                offset,
                old,
                op,
            });
        }
        self.mutate()?;
        file.sync_data()?;
        let len = file.metadata()?.len();
        self.synced(path, len);
        Ok(())
    }
}

#[derive(Debug)]
struct FaultReader {
    inner: Arc<dyn RandomAccessFile>,
    fs: FaultFs,
}

impl FaultReader {
    /// `read` (a point or a bulk read of the inner file), unless it is to
    /// fail ([`FaultFs::fail_reads`]: nothing is read) or short reads are
    /// injected: then half of `buf` is read and the rest fails.
    fn read_with(
        &self,
        buf: &mut [u8],
        offset: u64,
        read: impl Fn(&mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let short = {
            let mut s = self.fs.state.lock();
            if let Some(e) = s.reads.call() {
                s.faults_injected += 1;
                return Err(e);
            }
            s.short_reads
        };
        if short && buf.len() > 1 {
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
        let op = self.mutate().at(path)?;
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .at(path)?;
        let mut s = self.state.lock();
        // The truncation took whatever an overwrite had left pending.
        s.overwrites.retain(|p| p.path != path);
        s.files.insert(
            path.to_path_buf(),
            FileState {
                entry_op: op,
                ..FileState::default()
            },
        );
        drop(s);
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
            entry_op: 0,
        });
        st.synced_len = st.synced_len.min(len);
        Ok(Box::new(FaultFile {
            file,
            path: path.to_path_buf(),
            len,
            fs: self.clone(),
        }))
    }

    fn overwrite(&self, path: &Path, offset: u64, bytes: &[u8]) -> FsResult<()> {
        self.overwrite_then_sync(path, offset, bytes).at(path)
    }

    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        self.read_open(path)?;
        Ok(Arc::new(FaultReader {
            inner: RealFs.open_read(path)?,
            fs: self.clone(),
        }))
    }

    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        self.read_open(path)?;
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
        self.read_open(path)?;
        RealFs.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> FsResult<()> {
        let op = self.mutate().at(to)?;
        let before_bytes = fs::read(to).ok();
        fs::rename(from, to).at(to)?;
        let mut s = self.state.lock();
        let before = before_bytes.map(|mut bytes| {
            overwrites::undo_all_in(&s.overwrites, to, &mut bytes);
            (bytes, s.files.remove(to))
        });
        s.overwrites.retain(|p| p.path != to);
        for p in s.overwrites.iter_mut().filter(|p| p.path == from) {
            p.path = to.to_path_buf();
        }
        let from_state = s.files.remove(from);
        // A file this file system did not create was durable whole.
        let moved = match from_state {
            Some(st) => st,
            None => FileState {
                synced_len: fs::metadata(to).map(|m| m.len()).at(to)?,
                ..FileState::default()
            },
        };
        s.files.insert(
            to.to_path_buf(),
            FileState {
                entry_synced: false,
                entry_op: op,
                ..moved
            },
        );
        s.pending.push(Pending::Rename {
            to: to.to_path_buf(),
            before,
            from: from.to_path_buf(),
            from_state,
            op,
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> FsResult<()> {
        let op = self.mutate().at(path)?;
        // What an undone unlink brings back: the synced bytes, or the
        // whole of a file this file system did not create (it was there,
        // durable, before: a file that survived a power loss, say).
        let tracked = self.state.lock().files.get(path).copied();
        let mut durable = match tracked {
            Some(st) if st.synced_len == 0 => Some((Vec::new(), (st.entry_synced, st.entry_op))),
            Some(st) => fs::read(path).ok().map(|mut bytes| {
                bytes.truncate(usize::try_from(st.synced_len).unwrap_or(usize::MAX));
                (bytes, (st.entry_synced, st.entry_op))
            }),
            None => fs::read(path).ok().map(|bytes| (bytes, (true, 0))),
        };
        fs::remove_file(path).at(path)?;
        let mut s = self.state.lock();
        if let Some((bytes, _)) = durable.as_mut() {
            overwrites::undo_all_in(&s.overwrites, path, bytes);
        }
        s.overwrites.retain(|p| p.path != path);
        s.files.remove(path);
        if let Some((bytes, entry)) = durable {
            s.pending.push(Pending::Unlink {
                path: path.to_path_buf(),
                bytes,
                entry,
                op,
            });
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> FsResult<Vec<String>> {
        RealFs.list(dir)
    }

    /// One operation per directory made, shallowest first, as the real
    /// `create_dir_all` makes them: a failure part way leaves the
    /// shallower ones made.
    fn create_dir_all(&self, dir: &Path) -> FsResult<()> {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        for d in missing.iter().rev() {
            match self.create_dir(d) {
                Ok(()) => {}
                // Made meanwhile by another caller: not this one's.
                Err(e) if e.source.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        // What `dir` may still lack (a path through a symlink, say), as
        // the real file system makes it.
        RealFs.create_dir_all(dir)
    }

    /// One operation; a directory it makes vanishes at a power loss
    /// unless its parent is fsynced first.
    fn create_dir(&self, dir: &Path) -> FsResult<()> {
        let op = self.mutate().at(dir)?;
        fs::create_dir(dir).at(dir)?;
        self.state.lock().dirs.insert(
            dir.to_path_buf(),
            DirState {
                entry_synced: false,
                entry_op: op,
            },
        );
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> FsResult<()> {
        self.mutate().at(dir)?;
        RealFs.remove_dir(dir)?;
        self.state.lock().dirs.remove(dir);
        Ok(())
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
        // A relative directory's parent is "" where its maker fsyncs ".".
        let here = dir == Path::new(".");
        for (path, st) in s.dirs.iter_mut() {
            if path.parent() == Some(dir) || (here && path.parent() == Some(Path::new(""))) {
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
mod dirs_tests;
#[cfg(test)]
mod overwrite_tests;
#[cfg(test)]
mod partial_tests;
#[cfg(test)]
mod reads_tests;
#[cfg(test)]
mod tests;
