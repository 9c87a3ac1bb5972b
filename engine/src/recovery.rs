//! Opening a store: directory, lock, manifest, tables, WAL replay, then the
//! files a running store needs (a new WAL, the replayed writes flushed to
//! L0, a manifest naming them), then orphans removed. Everything that can
//! refuse a store (a damaged manifest, table or WAL) is read before any
//! file is created, and a failed open removes every file and directory it
//! created.
//!
//! A read-only open ([`recover_read_only`]) is the first half alone: the
//! same lock, the same checks and the same replay, into a memtable kept in
//! memory; it creates, renames, truncates and deletes nothing (only a
//! missing `LOCK` is created, and unlinked again when released).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::counters::Counters;
use crate::damage::Damage;
use crate::error::{Error, Result};
use crate::filter_budget::{PlannedWrite, plan_write};
use crate::fs::names::{self, FileType};
use crate::fs::{DirLock, FileSystem};
use crate::manifest::{ManifestState, ManifestWriteFailure};
use crate::memtable::MemTable;
use crate::options::{Options, SyncMode};
use crate::read_only_fs::{CreatedLock, ReadOnlyFs};
use crate::replay::{LogStart, replay_wals};
use crate::table_files::{MAX_FILE_NUMBER, MAX_OPEN_FILE_NUMBER, OutputCuts, TableFiles};
use crate::version::Version;
use crate::wal::WalWriter;
use crate::wal_cut::WalCut;

/// What recovery hands to the store it opens. Read-write: every replayed
/// write is in a durable table, `mem` is empty and the manifest names its
/// new WAL, `wal`. Read-only: the replayed writes are in `mem`, there is
/// no WAL, and `fs` refuses every change.
pub(crate) struct Recovered {
    pub(crate) lock: Box<dyn DirLock>,
    /// The file system the store runs on.
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) tables: TableFiles,
    pub(crate) version: Version,
    /// The active memtable.
    pub(crate) mem: Arc<MemTable>,
    /// The WAL new writes go to (`mem`'s); `None` exactly when read-only.
    pub(crate) wal: Option<WalWriter>,
    /// The largest sequence number any recovered write has.
    pub(crate) last_seq: u64,
    /// Where the WAL replay ended before the end of the WALs, if it did.
    pub(crate) wal_cut: Option<WalCut>,
    /// WALs whose damaged header the replay read past (`Replayed::salvaged`).
    pub(crate) wal_headers_salvaged: Vec<std::path::PathBuf>,
    pub(crate) counters: Counters,
}

/// Opens the store in `dir` (creating it if missing).
pub(crate) fn recover(dir: &Path, options: &Options, fs: Arc<dyn FileSystem>) -> Result<Recovered> {
    options.validate()?;
    let mut undo = Undo::default();
    let result = recover_into(dir, options, &fs, &mut undo);
    if result.is_err() {
        undo.run(fs.as_ref());
    }
    result
}

/// Opens the store in `dir` read-only: refused unless `dir` holds a
/// MANIFEST; the WALs are replayed into a memtable kept in memory (with
/// the same `WalRecovery` checks as [`recover`]); nothing in `dir` is
/// created (but a missing `LOCK`, unlinked when released), written,
/// renamed, truncated or removed.
pub(crate) fn recover_read_only(
    dir: &Path,
    options: &Options,
    fs: Arc<dyn FileSystem>,
) -> Result<Recovered> {
    options.validate()?;
    if !fs.exists(&dir.join(names::MANIFEST)) {
        return Err(Error::NoManifest {
            path: dir.to_path_buf(),
        });
    }
    let read_only: Arc<dyn FileSystem> = Arc::new(ReadOnlyFs::new(Arc::clone(&fs)));
    let mut undo = Undo::default();
    let result = read_only_into(dir, options, &fs, read_only, &mut undo);
    if result.is_err() {
        // Only a LOCK this open created can be listed for removal: the
        // layer under the read-only one removes it.
        undo.run(fs.as_ref());
    }
    result
}

fn read_only_into(
    dir: &Path,
    options: &Options,
    fs: &Arc<dyn FileSystem>,
    read_only: Arc<dyn FileSystem>,
    undo: &mut Undo,
) -> Result<Recovered> {
    let found = read_store(dir, options, &read_only, undo)?;
    if found.fresh {
        // The MANIFEST vanished since it was looked for.
        return Err(Error::NoManifest {
            path: dir.to_path_buf(),
        });
    }
    // As a read-write open checks it: on the manifest, never on LOCK
    // (closing a descriptor of LOCK would drop this process's lock).
    if options.use_direct_reads {
        crate::fs::check_direct_reads(read_only.as_ref(), &dir.join(names::MANIFEST))?;
    }
    let lock = undo
        .lock
        .take()
        .ok_or_else(|| Error::Internal("lock lost".into()))?;
    let lock: Box<dyn DirLock> = match undo.lock_file.take() {
        Some(path) => Box::new(CreatedLock {
            lock: Some(lock),
            path,
            fs: Arc::clone(fs),
        }),
        None => lock,
    };
    Ok(Recovered {
        lock,
        fs: read_only,
        tables: found.tables,
        version: found.version,
        mem: Arc::new(found.replayed),
        wal: None,
        last_seq: found.last_seq,
        wal_cut: found.wal_cut,
        wal_headers_salvaged: found.wal_headers_salvaged,
        counters: Counters::new(options.num_levels),
    })
}

/// What the reading half of an open found. Nothing is created yet but
/// `LOCK` when it was missing (listed in the undo).
struct Found {
    listing: Vec<String>,
    /// No MANIFEST: a new store.
    fresh: bool,
    tables: TableFiles,
    version: Version,
    /// The WALs' writes not yet in a table.
    replayed: MemTable,
    /// The largest sequence number of a write in a table or replayed.
    last_seq: u64,
    /// Where the WAL replay ended before the end of the WALs, if it did.
    wal_cut: Option<WalCut>,
    /// WALs whose damaged header the replay read past.
    wal_headers_salvaged: Vec<std::path::PathBuf>,
}

/// Lists `dir`, takes `LOCK`, reads and checks the manifest and every
/// table it names, and replays the WALs not yet flushed into a memtable:
/// everything that may refuse the store, creating no file but `LOCK`.
fn read_store(
    dir: &Path,
    options: &Options,
    fs: &Arc<dyn FileSystem>,
    undo: &mut Undo,
) -> Result<Found> {
    let manifest_path = dir.join(names::MANIFEST);
    // A first look, so that a directory that is not a store is refused
    // before a LOCK is created in it.
    let before_lock = fs.list(dir)?;
    refuse_non_store(dir, &before_lock, !fs.exists(&manifest_path))?;
    let lock_path = dir.join(names::LOCK);
    let lock = fs.lock(&lock_path)?.ok_or_else(|| Error::Locked {
        path: dir.to_path_buf(),
    })?;
    // Held until the undo has run: a LOCK this open created is removed
    // while still locked, so no other opener can hold a file we unlink.
    let created = lock
        .created_file()
        .unwrap_or_else(|| !before_lock.iter().any(|n| n == names::LOCK));
    undo.lock = Some(lock);
    if created {
        undo.lock_file = Some(lock_path.clone());
    }
    // Everything below reads the directory as it is under the lock: between
    // the first look and the lock another opener (another process, say) may
    // have created the store, or written to it and closed it. A stale
    // listing would write a new store's manifest over theirs, or miss the
    // WAL holding their last writes.
    let listing = fs.list(dir)?;
    let fresh = !fs.exists(&manifest_path);
    refuse_non_store(dir, &listing, fresh)?;
    let (state, salted) = if fresh {
        let state = ManifestState {
            next_file_number: 2,
            last_seq: 0,
            wal_number: 1,
            tables: Vec::new(),
        };
        (state, true)
    } else {
        let bytes = fs.read_all(&manifest_path)?;
        let state = ManifestState::decode(&manifest_path, &bytes)?;
        let salted = crate::manifest::store_format_version(&bytes)
            .is_some_and(|v| v >= crate::manifest::SALTED_WALS_SINCE);
        (state, salted)
    };

    // Read everything that may refuse the store.
    let (max_seen, max_seen_name) = listing
        .iter()
        .filter_map(|n| match names::parse(n) {
            FileType::Table(x) | FileType::Wal(x) => Some((x, n.as_str())),
            _ => None,
        })
        .max()
        .unwrap_or((0, names::MANIFEST));
    let next_file_number = next_file_number(dir, state.next_file_number, max_seen, max_seen_name)?;
    let tables = TableFiles::new(dir, Arc::clone(fs), options, next_file_number);
    let num_levels = options.num_levels;
    let mut version = Version::new(num_levels);
    for meta in &state.tables {
        // The manifest is checksummed, so a level past the tree's comes
        // from the options, not from damage: the store was written with
        // more levels (with dynamic level budgets, even a small store's
        // tables sit at the last level). Refused as the option it is.
        if meta.level >= num_levels {
            return Err(Error::InvalidOptions(format!(
                "table {} is at level {}, but num_levels is {num_levels}: open the \
                 store with num_levels of at least {}",
                meta.number,
                meta.level,
                meta.level + 1
            )));
        }
        version.levels[meta.level].push(tables.open(meta.clone())?);
    }
    version.sort();
    version
        .check_invariants()
        .map_err(|reason| Error::corruption(&manifest_path, 0, Damage::TreeOrder(reason)))?;
    for t in version.levels.iter().flatten() {
        let properties_at = t.table.footer().properties.offset;
        crate::table_files::check_record(&t.meta, t.table.properties()).map_err(|reason| {
            Error::corruption(names::table(dir, t.meta.number), properties_at, reason)
        })?;
    }
    let mut wals: Vec<u64> = listing
        .iter()
        .filter_map(|n| match names::parse(n) {
            FileType::Wal(x) if x >= state.wal_number => Some(x),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    // Were it kept (read-only), it would hold the newest WAL's writes.
    let replayed = MemTable::new(wals.last().copied().unwrap_or(state.wal_number));
    let start = LogStart {
        lowest: state
            .tables
            .iter()
            .map(|t| t.largest_seq)
            .max()
            .unwrap_or(0)
            + 1,
        highest: state.last_seq + 1,
        acknowledged: state.last_seq,
        salted,
    };
    let replay = replay_wals(
        fs.as_ref(),
        dir,
        &wals,
        options.wal_recovery,
        start,
        &replayed,
    )?;
    let last_seq = state.last_seq.max(replay.last.unwrap_or(0));
    Ok(Found {
        listing,
        fresh,
        tables,
        version,
        replayed,
        last_seq,
        wal_cut: replay.cut,
        wal_headers_salvaged: replay.salvaged,
    })
}

fn recover_into(
    dir: &Path,
    options: &Options,
    fs: &Arc<dyn FileSystem>,
    undo: &mut Undo,
) -> Result<Recovered> {
    create_store_dir(dir, fs.as_ref(), undo)?;
    let Found {
        listing,
        fresh,
        tables,
        mut version,
        replayed,
        last_seq,
        wal_cut,
        wal_headers_salvaged,
    } = read_store(dir, options, fs, undo)?;
    let manifest_path = dir.join(names::MANIFEST);
    let num_levels = options.num_levels;

    // Now the files of the running store. A new store's manifest comes
    // first: a directory holding other store files but no manifest is not
    // a store, so a crash right after this step must leave a manifest.
    let wal_number = tables.new_file_number()?;
    let manifest = |version: &Version| ManifestState {
        next_file_number: tables.next_file_number(),
        last_seq,
        wal_number,
        tables: version.all_metas(),
    };
    if fresh {
        // Both names: a write failing before its rename leaves the
        // temporary manifest, which a failed open removes too.
        undo.files.push(dir.join(names::MANIFEST_TMP));
        undo.files.push(manifest_path.clone());
        manifest(&version).write(fs.as_ref(), dir)?;
    }
    // Checked on the manifest, never on LOCK: closing a descriptor of LOCK
    // would drop this process's lock on it (`fs::dir_lock`).
    if options.use_direct_reads {
        crate::fs::check_direct_reads(fs.as_ref(), &manifest_path)?;
    }
    let wal_path = names::wal(dir, wal_number);
    let wal_file = fs.create(&wal_path)?;
    undo.files.push(wal_path.clone());
    let wal = WalWriter::create(wal_file, wal_path, options.sync == SyncMode::Always)?;
    let counters = Counters::new(num_levels);
    let mut replay_tables = Vec::new();
    if !replayed.is_empty() {
        // Planned as a flush of the same memtable is: for its distinct
        // keys, which overwrites leave far fewer than its entries.
        let write = PlannedWrite {
            level: 0,
            keys: MemTable::merged_distinct_keys(&[&replayed]),
            removed: &[],
        };
        let plan = plan_write(
            &options.filter_policy,
            options.filter_kind,
            &version.levels,
            write,
            0,
        );
        let flushed = tables.write(0, OutputCuts::one_table(), &plan, &counters, &mut |out| {
            replayed.write_to(out)
        })?;
        replay_tables.extend(flushed.iter().map(|t| names::table(dir, t.meta.number)));
        undo.files.extend(replay_tables.iter().cloned());
        version = version
            .edited(&flushed, &[])
            .map_err(|e| Error::Internal(e.to_string()))?;
        Counters::add(&counters.flushes, 1);
        Counters::add(&counters.levels[0].writes_into, 1);
    }
    let live = manifest(&version);
    if !fresh {
        // Before the rename the old manifest is the store's: the replayed
        // WALs are still there, and the replay's tables and the temporary
        // manifest are undone. After it the new manifest may be durable and
        // name those tables: they stay.
        let written = live.write_staged(fs.as_ref(), dir);
        if let Err(ManifestWriteFailure::BeforeRename(e)) = written {
            undo.files.push(dir.join(names::MANIFEST_TMP));
            return Err(e);
        }
        undo.files.retain(|f| !replay_tables.contains(f));
        if let Err(ManifestWriteFailure::AfterRename(e)) = written {
            return Err(e);
        }
    }

    // Orphans: tables the manifest does not name, replayed WALs, temps.
    let named: HashSet<u64> = live.tables.iter().map(|t| t.number).collect();
    for name in &listing {
        let remove = match names::parse(name) {
            FileType::Table(x) => !named.contains(&x),
            FileType::Wal(x) => x != wal_number,
            FileType::Temp => true,
            _ => false,
        };
        if remove {
            let path = dir.join(name);
            match fs.remove(&path) {
                // A temporary manifest from the listing may have been renamed since.
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e.into());
                }
                _ => {}
            }
        }
    }
    fs.sync_dir(dir)?;
    let lock = undo
        .lock
        .take()
        .ok_or_else(|| Error::Internal("lock lost".into()))?;
    Ok(Recovered {
        lock,
        fs: Arc::clone(fs),
        tables,
        version,
        mem: Arc::new(MemTable::new(wal_number)),
        wal: Some(wal),
        last_seq,
        wal_cut,
        wal_headers_salvaged,
        counters,
    })
}

/// The number the store's next file gets: past the manifest's next number
/// and every table or WAL on disk (a table written but never installed, or
/// a WAL no manifest names yet, is not reused). Refused, before anything
/// is written, for a file at or past [`MAX_OPEN_FILE_NUMBER`] unless it is
/// the store's own (within 2^32 of the manifest's next number: an earlier
/// open that started below the limit numbered it) and below
/// [`MAX_FILE_NUMBER`]. The manifest's own next number is at most
/// [`MAX_FILE_NUMBER`] (`ManifestState::decode`), as allocation keeps it.
fn next_file_number(
    dir: &Path,
    manifest_next: u64,
    max_seen: u64,
    max_seen_name: &str,
) -> Result<u64> {
    let own = max_seen < manifest_next.saturating_add(1 << 32);
    if max_seen >= MAX_FILE_NUMBER || (max_seen >= MAX_OPEN_FILE_NUMBER && !own) {
        return Err(Error::FileNumbersExhausted {
            path: dir.join(max_seen_name),
            number: max_seen,
        });
    }
    // `ManifestState::decode` refused a larger one (a new store's is 2).
    debug_assert!(manifest_next <= MAX_FILE_NUMBER);
    Ok(manifest_next.max(max_seen + 1))
}

/// Refuses a directory without a manifest that holds anything but a LOCK
/// or a temporary manifest: it is not a store, and opening it would create one
/// among someone else's files.
fn refuse_non_store(dir: &Path, listing: &[String], fresh: bool) -> Result<()> {
    match listing
        .iter()
        .find(|n| !matches!(names::parse(n), FileType::Lock | FileType::Temp))
    {
        Some(other) if fresh => Err(Error::NotAStore {
            path: dir.to_path_buf(),
            example: other.clone(),
        }),
        _ => Ok(()),
    }
}

/// Creates `dir` and any missing parents, fsyncing each new entry's parent
/// so the directory itself survives a power cut.
fn create_store_dir(dir: &Path, fs: &dyn FileSystem, undo: &mut Undo) -> Result<()> {
    if fs.exists(dir) {
        if !dir.is_dir() {
            return Err(Error::io(
                dir,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        return Ok(());
    }
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !fs.exists(d))
        .map(Path::to_path_buf)
        .collect();
    // One at a time, shallowest first, each listed for the undo once this
    // open made it (`undo` removes them deepest first): a failure part way
    // leaves none it made, and one another process made meanwhile (found
    // there by `mkdir`) is that process's, never removed.
    for d in missing.iter().rev() {
        match fs.create_dir(d) {
            Ok(()) => undo.dirs.push(d.clone()),
            Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(e.into()),
        }
    }
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs.sync_dir(parent)?;
    }
    Ok(())
}

/// Files and directories a failing open created, removed on failure.
#[derive(Default)]
struct Undo {
    files: Vec<PathBuf>,
    /// Shallowest first.
    dirs: Vec<PathBuf>,
    /// The directory lock, released after the removals.
    lock: Option<Box<dyn DirLock>>,
    /// `LOCK`, when this open created it: removed while still held, and
    /// only if no other process shares the lock (a read-only open's) and
    /// the path still names the file locked ([`DirLock::try_exclusive`]).
    lock_file: Option<PathBuf>,
}

impl Undo {
    /// Best effort: what cannot be removed is an orphan the next open
    /// removes (or, for a LOCK, harmless).
    fn run(self, fs: &dyn FileSystem) {
        for file in self.files.iter().rev() {
            let _ = fs.remove(file);
        }
        if let (Some(file), Some(lock)) = (&self.lock_file, &self.lock)
            && lock.try_exclusive()
        {
            let _ = fs.remove(file);
        }
        for dir in self.dirs.iter().rev() {
            let _ = fs.remove_dir(dir);
        }
        drop(self.lock);
    }
}
