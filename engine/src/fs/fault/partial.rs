//! What a failing write leaves behind: by default nothing, but a real
//! `write(2)` that runs into a full disk or a failing device part way
//! returns a short count, and the caller's next call fails: the file then
//! holds a prefix of the bytes it was given (`write_all` reports the
//! error, not the prefix). [`PartialWrite`] picks that prefix.
//!
//! The prefix lands in the file as any written byte does: unsynced, so a
//! power loss settles it by [`UnsyncedFate`](super::UnsyncedFate), and a
//! later fsync of the file (a transient fault) makes it durable.

use super::mix;
use super::pages::PAGE;

/// How much of a write [`FaultFs`](super::FaultFs) fails (by
/// `fail_from_op` or `fail_only_op`) it applies first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum PartialWrite {
    /// None of it: a failed write changes nothing.
    #[default]
    Nothing,
    /// The first half of its bytes (rounded down).
    Half,
    /// Its bytes up to the last page boundary (a file offset that is a
    /// multiple of 4 KiB) strictly inside it, or nothing when none lies
    /// inside: a buffered write copies page by page and stops at the
    /// first page it cannot get a block for.
    ToPage,
    /// A prefix of any length from 0 to one byte short of the whole,
    /// drawn from the seed and the operation's number.
    Seeded(u64),
}

/// Makes the prefix's draw independent of the other coins.
const PARTIAL_SALT: u64 = 0x5041_5254_u64;

impl PartialWrite {
    /// How many of the `len` bytes written at file offset `offset` by the
    /// failed operation `op` are applied. Invariant: less than `len`
    /// (a failed write is never applied whole), 0 when `len` is 0.
    pub(super) fn prefix(self, offset: u64, len: usize, op: u64) -> usize {
        let len64 = len as u64;
        let n = match self {
            Self::Nothing => 0,
            Self::Half => len64 / 2,
            Self::ToPage => {
                let end = offset + len64;
                let boundary = (end.saturating_sub(1) / PAGE) * PAGE;
                boundary.saturating_sub(offset)
            }
            Self::Seeded(seed) if len64 > 0 => mix(seed ^ mix(op ^ PARTIAL_SALT)) % len64,
            Self::Seeded(_) => 0,
        };
        usize::try_from(n).unwrap_or(0).min(len.saturating_sub(1))
    }
}
