//! What a power loss leaves of an overwrite in place
//! ([`FileSystem::overwrite`](crate::fs::FileSystem::overwrite)) that no
//! fsync of its file has made durable yet: each unit of the range (a
//! 512-byte sector, or a 4 KiB page under `UnsyncedFate::Pages`, aligned to
//! file offsets) holds its new bytes or its old ones, in any mix, as a
//! device that writes a sector atomically but sectors in any order allows.
//!
//! Only the range below the file's fsynced length is restored here: bytes
//! past it are unsynced bytes, which `UnsyncedFate` settles whatever wrote
//! them. An unlink or a rename that a power loss undoes brings its file
//! back with the old bytes of its pending overwrites (never fsynced, so
//! not among the synced bytes it keeps).

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::mix;
use super::pages::{PAGE, SECTOR, UnsyncedFate, name_hash};

/// Which units of the overwrites not yet fsynced a power loss applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverwriteFate {
    /// None: every unit holds its old bytes.
    Lost,
    /// Every one, as if fsynced just before the power loss.
    Applied,
    /// Each unit by a coin flip drawn from the seed, the file's name, the
    /// unit's index, the overwrite's operation and the number of
    /// operations at the power loss: the same run makes the same choice,
    /// and a crash at another point makes another.
    Seeded(u64),
}

impl Default for OverwriteFate {
    fn default() -> Self {
        Self::Seeded(0)
    }
}

/// Makes an overwrite's coin independent of the other coins.
const OVERWRITE_SALT: u64 = 0x4f56_4552_u64;

impl OverwriteFate {
    fn applies(self, file: u64, unit: u64, op: u64, at: u64) -> bool {
        match self {
            Self::Lost => false,
            Self::Applied => true,
            Self::Seeded(seed) => {
                let x = mix(file ^ mix(unit ^ mix(op ^ mix(at ^ OVERWRITE_SALT))));
                mix(seed ^ x) & 1 == 1
            }
        }
    }
}

/// An overwrite in place not yet made durable: operation `op` wrote over
/// `old` (the bytes it replaced) at `offset` of `path`.
#[derive(Debug)]
pub(super) struct PendingOverwrite {
    pub(super) path: PathBuf,
    pub(super) offset: u64,
    pub(super) old: Vec<u8>,
    pub(super) op: u64,
}

impl PendingOverwrite {
    /// Writes the old bytes back over `bytes`, a copy of the file from
    /// offset 0 (as far as it reaches).
    pub(super) fn undo_in(&self, bytes: &mut [u8]) {
        let Ok(start) = usize::try_from(self.offset) else {
            return;
        };
        let end = start.saturating_add(self.old.len()).min(bytes.len());
        if start < end {
            bytes[start..end].copy_from_slice(&self.old[..end - start]);
        }
    }
}

/// Writes the old bytes of `pending` (oldest first) back over each file
/// where [`undo_in`](PendingOverwrite::undo_in) would, newest first: what
/// an unlinked or replaced file comes back with.
pub(super) fn undo_all_in(pending: &[PendingOverwrite], path: &Path, bytes: &mut [u8]) {
    for p in pending.iter().rev().filter(|p| p.path == path) {
        p.undo_in(bytes);
    }
}

/// Leaves every file of `pending` (oldest first) as a power loss after
/// `at` operations would: each unit of each overwrite below the file's
/// fsynced length (`synced_len`) applied or restored by `fate`.
/// Invariant: a unit ends with the bytes of the newest overwrite applied
/// to it (visited newest first, the first applied decides the unit), or
/// with the bytes before the oldest pending one.
pub(super) fn settle(
    pending: &[PendingOverwrite],
    fate: OverwriteFate,
    unsynced: UnsyncedFate,
    synced_len: impl Fn(&Path) -> Option<u64>,
    at: u64,
) -> io::Result<()> {
    let unit = match unsynced {
        UnsyncedFate::Pages(_) => PAGE,
        UnsyncedFate::Truncated | UnsyncedFate::Sectors(_) => SECTOR,
    };
    let mut decided: HashSet<(&Path, u64)> = HashSet::new();
    for p in pending.iter().rev() {
        let Some(synced) = synced_len(&p.path).filter(|_| p.path.exists()) else {
            continue;
        };
        let end = (p.offset + p.old.len() as u64).min(synced);
        let file = OpenOptions::new().write(true).open(&p.path)?;
        let mut from = p.offset;
        while from < end {
            let index = from / unit;
            let to = ((index + 1) * unit).min(end);
            let key = (p.path.as_path(), index);
            if !decided.contains(&key) {
                if fate.applies(name_hash(&p.path), index, p.op, at) {
                    decided.insert(key);
                } else {
                    let old = &p.old[(from - p.offset) as usize..(to - p.offset) as usize];
                    file.write_all_at(old, from)?;
                }
            }
            from = to;
        }
    }
    Ok(())
}
