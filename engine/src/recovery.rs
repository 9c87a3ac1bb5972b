//! Opening a store: lock, manifest, tables, orphans, WAL replay.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloomlsm_sstable::BlockCache;
use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::WriteBatch;
use crate::db::{BackgroundState, DbInner, SuperVersion, WriteState};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::fs::names::{self, FileType};
use crate::manifest::ManifestState;
use crate::memtable::MemTable;
use crate::stats::Counters;
use crate::version::Version;
use crate::wal::{self, WalWriter};

pub(crate) fn open_inner(
    dir: &Path,
    options: crate::Options,
    fs: Arc<dyn FileSystem>,
) -> Result<DbInner> {
    options.validate()?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock_path = dir.join(names::LOCK);
    let lock = fs
        .lock(&lock_path)
        .map_err(|e| Error::io(&lock_path, e))?
        .ok_or_else(|| Error::Locked {
            path: dir.to_path_buf(),
        })?;
    let manifest_path = dir.join(names::MANIFEST);
    let listing = fs.list(dir).map_err(|e| Error::io(dir, e))?;
    let state = if fs.exists(&manifest_path) {
        let bytes = fs
            .read_all(&manifest_path)
            .map_err(|e| Error::io(&manifest_path, e))?;
        ManifestState::decode(&manifest_path, &bytes)?
    } else {
        if let Some(other) = listing
            .iter()
            .find(|n| !matches!(names::parse(n), FileType::Lock | FileType::Temp))
        {
            return Err(Error::NotAStore {
                path: dir.to_path_buf(),
                example: other.clone(),
            });
        }
        let fresh = ManifestState {
            next_file_number: 2,
            last_seq: 0,
            wal_number: 1,
            tables: Vec::new(),
        };
        write_manifest(fs.as_ref(), dir, &fresh)?;
        fresh
    };
    if options.use_direct_reads {
        crate::fs::check_direct_reads(fs.as_ref(), &manifest_path)?;
    }
    let max_seen = listing
        .iter()
        .filter_map(|n| match names::parse(n) {
            FileType::Table(x) | FileType::Wal(x) => Some(x),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let cache = Arc::new(BlockCache::new(options.block_cache_bytes));
    let num_levels = options.num_levels;
    let first_wal = state.next_file_number.max(max_seen + 1);
    let inner = DbInner {
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        cache,
        _lock: lock,
        // The WAL of the new memtable; older WALs are replayed below.
        write: Mutex::new(WriteState {
            wal: WalWriter::new(
                fs.create(&names::wal(dir, first_wal))
                    .map_err(|e| Error::io(names::wal(dir, first_wal), e))?,
                names::wal(dir, first_wal),
            ),
            next_seq: state.last_seq + 1,
        }),
        current: RwLock::new(Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new(first_wal)),
            imm: Vec::new(),
            version: Arc::new(Version::new(num_levels)),
        })),
        last_visible: AtomicU64::new(state.last_seq),
        next_file: AtomicU64::new(first_wal + 1),
        flush_lock: Mutex::new(()),
        compaction_lock: Mutex::new(()),
        install_lock: Mutex::new(()),
        bg: Mutex::new(BackgroundState::default()),
        bg_cv: Condvar::new(),
        stall: Mutex::new(()),
        stall_cv: Condvar::new(),
        snapshots: Mutex::new(BTreeMap::new()),
        counters: Counters::new(num_levels),
        write_error: Mutex::new(None),
        closed: AtomicBool::new(false),
        compact_pointer: Mutex::new(vec![Vec::new(); num_levels]),
        filter_policy: RwLock::new(options.filter_policy.clone()),
        options,
    };
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;

    // Tables the manifest names.
    let mut version = Version::new(num_levels);
    for meta in &state.tables {
        if meta.level >= num_levels {
            return Err(Error::Corruption {
                path: manifest_path.clone(),
                offset: 0,
                reason: format!(
                    "table {} at level {} but the store has {num_levels} levels",
                    meta.number, meta.level
                ),
            });
        }
        let handle = inner.open_table(meta.clone())?;
        version.levels[meta.level].push(handle);
    }
    version.sort();
    version
        .check_invariants()
        .map_err(|reason| Error::Corruption {
            path: manifest_path.clone(),
            offset: 0,
            reason,
        })?;
    let live: std::collections::HashSet<u64> = state.tables.iter().map(|t| t.number).collect();

    // Replay WALs not yet flushed, oldest first, into one memtable.
    let mut wals: Vec<u64> = listing
        .iter()
        .filter_map(|n| match names::parse(n) {
            FileType::Wal(x) if x >= state.wal_number && x != first_wal => Some(x),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    let recovered = MemTable::new(first_wal);
    let mut last_seq = state.last_seq;
    for number in &wals {
        let path = names::wal(dir, *number);
        let bytes = fs.read_all(&path).map_err(|e| Error::io(&path, e))?;
        let replay = wal::replay(&path, &bytes, inner.options.wal_recovery)?;
        for record in replay.records {
            let (first, batch) =
                WriteBatch::decode(&record).map_err(|reason| Error::Corruption {
                    path: path.clone(),
                    offset: 0,
                    reason,
                })?;
            for (i, (kind, key, value)) in batch.ops.into_iter().enumerate() {
                recovered.insert(key, first + i as u64, kind, value);
                last_seq = last_seq.max(first + i as u64);
            }
        }
    }
    {
        let mut w = inner.write.lock();
        w.next_seq = last_seq + 1;
    }
    inner.last_visible.store(last_seq, Ordering::Release);
    *inner.current.write() = Arc::new(SuperVersion {
        mem: Arc::new(MemTable::new(first_wal)),
        imm: Vec::new(),
        version: Arc::new(version),
    });

    // Make the recovered writes durable in a table, so the old WALs can go.
    let mut state = state;
    state.next_file_number = state.next_file_number.max(first_wal + 1);
    if !recovered.is_empty() {
        let mut entries = recovered.entries().map(Ok);
        let tables = inner.write_tables(0, &mut entries, u64::MAX)?;
        inner.install(&tables, &[], Some(first_wal))?;
        Counters::add(&inner.counters.flushes, 1);
    } else if state.wal_number < first_wal {
        inner.install(&[], &[], Some(first_wal))?;
    }

    // Orphans: tables not in the manifest, flushed WALs, temporary files.
    for name in &listing {
        let remove = match names::parse(name) {
            FileType::Table(x) => !live.contains(&x),
            FileType::Wal(x) => x != first_wal,
            FileType::Temp => true,
            _ => false,
        };
        if remove {
            let path = dir.join(name);
            match fs.remove(&path) {
                // A temporary manifest from the listing may have been renamed since.
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(&path, e));
                }
                _ => {}
            }
        }
    }
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(inner)
}

/// Writes the manifest atomically: temp file, fsync, rename, fsync dir.
pub(crate) fn write_manifest(fs: &dyn FileSystem, dir: &Path, state: &ManifestState) -> Result<()> {
    let tmp = dir.join(names::MANIFEST_TMP);
    let path = dir.join(names::MANIFEST);
    let mut file = fs.create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    file.write_all(&state.encode())
        .map_err(|e| Error::io(&tmp, e))?;
    file.sync().map_err(|e| Error::io(&tmp, e))?;
    drop(file);
    fs.rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))
}
