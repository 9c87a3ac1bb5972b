//! What a power loss leaves of the bytes written to a file after its last
//! fsync: a clean cut at the synced length, or pages (or sectors)
//! persisted out of order, as a page cache's write-back and a disk's
//! volatile cache allow.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::mix;

/// The page size of the model: pages are aligned to file offsets.
pub(super) const PAGE: u64 = 4096;
/// Bytes a device writes whole: the unit of `UnsyncedFate::Sectors`, and
/// of a torn overwrite but under `UnsyncedFate::Pages`.
pub(super) const SECTOR: u64 = 512;

/// What a power loss leaves of each surviving file's unsynced bytes (those
/// past its last fsynced length). Its synced bytes are never touched.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum UnsyncedFate {
    /// All of them are lost: the file is cut back to its synced length.
    #[default]
    Truncated,
    /// The unsynced bytes are split into 4 KiB pages aligned to file
    /// offsets (the page holding the synced length counts only from it
    /// on). Each page keeps its bytes or reads as zeros by a coin flip
    /// drawn from the seed, the file's name, the page's index and the
    /// number of operations at the power loss. The file's length is its
    /// written length when its last page persisted, else a seeded choice
    /// from the end of the last persisted page (or the synced length) to
    /// the written length, zeros past what persisted.
    Pages(u64),
    /// As `Pages`, in 512-byte sectors rather than 4 KiB pages: a power
    /// loss in the middle of a page's write-back (a device writes a
    /// sector whole, not a page), so part of a page of the last unsynced
    /// write persists and the rest reads as zeros or is cut off, at any
    /// sector boundary.
    Sectors(u64),
}

/// Makes a page's coin independent of the directory changes' coins.
const PAGE_SALT: u64 = 0x5041_4745_u64;
/// Makes the length's draw independent of the pages' coins.
const LENGTH_SALT: u64 = 0x4c45_4e47_u64;

/// A stable hash of a file's name (not its directory: a test's scratch
/// directory is named at random, and the same run must make the same
/// choices).
pub(super) fn name_hash(path: &Path) -> u64 {
    let name = path
        .file_name()
        .map(|n| n.as_encoded_bytes())
        .unwrap_or(&[]);
    name.iter()
        .fold(mix(name.len() as u64), |h, &b| mix(h ^ u64::from(b)))
}

/// The ranges `[start, end)` that persist of the unsynced bytes
/// `[synced, written)` of the file named by `file` (a [`name_hash`]),
/// and the file's length after the power loss at `at` operations, in
/// units of `unit` bytes (a page or a sector).
/// Invariants: the ranges are whole units cut to `[synced, written)`, in
/// order; the length lies in `[end of the last range (or synced), written]`
/// and is `written` when the last page persisted.
fn fate_of_pages(
    seed: u64,
    file: u64,
    at: u64,
    (synced, written): (u64, u64),
    unit: u64,
) -> (Vec<(u64, u64)>, u64) {
    let coin = |x: u64| mix(seed ^ mix(file ^ mix(x ^ mix(at ^ PAGE_SALT))));
    let mut kept = Vec::new();
    let mut start = synced;
    while start < written {
        let page = start / unit;
        let end = ((page + 1) * unit).min(written);
        if coin(page) & 1 == 1 {
            kept.push((start, end));
        }
        start = end;
    }
    let last_kept = kept.last().map_or(synced, |&(_, end)| end);
    let len = if last_kept == written {
        written
    } else {
        last_kept + coin(LENGTH_SALT ^ u64::MAX) % (written - last_kept + 1)
    };
    (kept, len)
}

impl UnsyncedFate {
    /// Leaves the file at `path`, of which `synced` bytes were fsynced and
    /// whose real length is everything written to it, as a power loss at
    /// `at` operations would.
    pub(super) fn settle(self, path: &Path, synced: u64, at: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        let written = file.metadata()?.len();
        let (seed, unit) = match self {
            Self::Pages(seed) if written > synced => (seed, PAGE),
            Self::Sectors(seed) if written > synced => (seed, SECTOR),
            _ => return file.set_len(synced),
        };
        let (kept, len) = fate_of_pages(seed, name_hash(path), at, (synced, written), unit);
        zero_all_but(&file, synced, written.min(len), &kept)?;
        file.set_len(len)
    }
}

/// Writes zeros over `[from, to)` of `file` but for the `kept` ranges
/// (in order, within it).
fn zero_all_but(file: &File, from: u64, to: u64, kept: &[(u64, u64)]) -> io::Result<()> {
    let mut at = from;
    for &(start, end) in kept.iter().chain([&(to, to)]) {
        let start = start.min(to);
        if start > at {
            let zeros = vec![0u8; usize::try_from(start - at).map_err(io::Error::other)?];
            file.write_all_at(&zeros, at)?;
        }
        at = at.max(end);
    }
    Ok(())
}
