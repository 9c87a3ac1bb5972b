//! Errors of the store.

use std::path::PathBuf;

use thiserror::Error;

/// Everything `Db` can fail with.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A file-system call failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A table file is damaged or unreadable.
    #[error(transparent)]
    Table(#[from] bloomlsm_sstable::Error),
    /// The WAL or manifest is damaged, or a table does not match it.
    #[error("corrupt {path} at offset {offset}: {reason}")]
    Corruption {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What is wrong.
        #[source]
        reason: crate::damage::Damage,
    },
    /// Another `Db` (in this or another process) has the directory open.
    #[error("{path} is locked by another open store (LOCK held)")]
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// The directory holds files that are not a bloomlsm store.
    #[error("{path} is not a bloomlsm store: it holds {example:?} and no MANIFEST")]
    NotAStore {
        /// The directory.
        path: PathBuf,
        /// One of the unrelated files found.
        example: String,
    },
    /// The store was written by a newer version of bloomlsm.
    #[error("{path} has store format version {found}; this build reads up to {supported}")]
    UnsupportedFormat {
        /// The manifest.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// A key is empty, a put's key is over `Options::max_key_bytes`, or a
    /// delete's is over the 64 KiB a table holds.
    #[error("key of {len} bytes is outside the allowed 1..={max} bytes")]
    InvalidKey {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value is over `Options::max_value_bytes`.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A batch's encoding exceeds what one WAL record can hold.
    #[error("write batch of {bytes} encoded bytes exceeds the limit of {max} bytes")]
    BatchTooLarge {
        /// Its encoded size.
        bytes: usize,
        /// The limit ([`crate::MAX_BATCH_BYTES`]).
        max: usize,
    },
    /// The store has used every sequence number (2^56 - 1 of them).
    #[error("the store has no sequence numbers left")]
    SequenceExhausted,
    /// At open: a stray file is numbered past [`crate::MAX_OPEN_FILE_NUMBER`]
    /// (and not within 2^32 of the manifest's next number, as the store's
    /// own files are): numbering new files after it would leave too few.
    /// Nothing was changed; the store opens once the file is gone. When
    /// the path is the MANIFEST: the store has handed out every file
    /// number a manifest can record (2^62), and writes stop.
    #[error("{path} is numbered {number}: too few file numbers are left after it")]
    FileNumbersExhausted {
        /// The file with the number (the MANIFEST for its next number).
        path: PathBuf,
        /// Its number.
        number: u64,
    },
    /// Options that cannot work together.
    #[error("invalid options: {0}")]
    InvalidOptions(String),
    /// An earlier write or background job failed; the store refuses writes
    /// so as not to build on state that may not be on disk. Reads still work.
    /// [`crate::WriteStop`] says which operation failed and how (a full
    /// disk: [`crate::WriteStop::io_kind`] is
    /// [`std::io::ErrorKind::StorageFull`]); writes stay refused until the
    /// store is reopened.
    #[error("the store refuses writes after an earlier failure: {0}")]
    WritesStopped(crate::WriteStop),
    /// `path` holds no MANIFEST: it is not a store (or does not exist).
    /// A read-only open creates nothing, so it refuses it.
    #[error("{path} is not a bloomlsm store (no MANIFEST); a read-only open creates nothing")]
    NoManifest {
        /// The directory.
        path: PathBuf,
    },
    /// The store was opened with [`crate::Db::open_read_only`]: writes,
    /// flushes, compactions, filter rebuilds and waiting for background
    /// work are refused, and nothing was changed.
    #[error("the store is open read-only: the change was refused and nothing was written")]
    ReadOnly,
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// Work of the store panicked: a write, a memtable rotation, a flush,
    /// compaction or filter rebuild, or their install (a bug in bloomlsm:
    /// please report it). Writes stop, as after any failure; reads and
    /// the close go on. [`WriteStop::operation`](crate::WriteStop::operation) names
    /// the work.
    #[error("bloomlsm panicked (a bug in bloomlsm: please report it): {0}")]
    Panicked(String),
    /// A change would have broken an invariant the read path relies on;
    /// it was refused (a bug in bloomlsm: please report it).
    #[error("internal invariant violated (refused, nothing changed): {0}")]
    Internal(String),
    /// A change would have written a manifest the next open refuses (a
    /// bug in bloomlsm: please report it). It was refused before any
    /// file was touched: the store's manifest is the last good one, and
    /// writes stop.
    #[error(
        "refused to write a manifest the next open would refuse \
         (a bug in bloomlsm: please report it): {0}"
    )]
    ManifestRefused(crate::damage::ManifestDamage),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<crate::fs::FsError> for Error {
    fn from(e: crate::fs::FsError) -> Self {
        Self::Io {
            path: e.path,
            source: e.source,
        }
    }
}

impl Error {
    pub(crate) fn corruption(
        path: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<crate::damage::Damage>,
    ) -> Self {
        Self::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// The OS error number of the I/O call that failed this call (as
    /// [`Error::io_kind`]), also where the I/O error wraps the reason it
    /// failed (a filter block that could not be read): `libc::EIO`, which
    /// has no `ErrorKind` of its own, is told apart only by it.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.io_source().and_then(os_error_in)
    }

    /// The failed I/O call's error: of this error, or of a table read's.
    pub(crate) fn io_source(&self) -> Option<&std::io::Error> {
        match self {
            Self::Io { source, .. } | Self::Table(bloomlsm_sstable::Error::Io { source, .. }) => {
                Some(source)
            }
            _ => None,
        }
    }

    /// The error a caught panic with `payload` becomes: its message, when
    /// it has one.
    pub(crate) fn panicked(payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Self::Panicked(message)
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// True for errors that mean bytes on disk are damaged. False for
    /// [`Error::WritesStopped`], a refusal: its [`crate::WriteStop`] says
    /// whether damage caused it.
    pub fn is_corruption(&self) -> bool {
        match self {
            Self::Corruption { .. } => true,
            Self::Table(e) => e.is_corruption(),
            _ => false,
        }
    }

    /// The kind of the I/O call that failed this call: of this error, or
    /// of a table read's. `None` when no I/O call failed, and for
    /// [`Error::WritesStopped`], which no retry helps (the earlier
    /// failure's kind is [`crate::WriteStop::io_kind`]).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.io_source().map(std::io::Error::kind)
    }
}

/// The OS error number of `e`, or of the first I/O error in the chain of
/// reasons it wraps.
pub(crate) fn os_error_in(e: &std::io::Error) -> Option<i32> {
    if let Some(code) = e.raw_os_error() {
        return Some(code);
    }
    let mut reason: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|r| r as _);
    while let Some(r) = reason {
        if let Some(code) = r
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(code);
        }
        reason = r.source();
    }
    None
}
