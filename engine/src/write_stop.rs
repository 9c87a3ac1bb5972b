//! Why a store stopped taking writes: what [`crate::Error::WritesStopped`]
//! carries, so that a caller can tell a full disk from damaged bytes or a
//! forked process without parsing a message.

use std::io;

use crate::Error;

/// The failure that stopped writes, kept for every later refusal: the
/// error itself went to the one call that saw it (or to none, when a
/// background flush or compaction failed), so only its description and
/// kind remain. Invariant: at most one of `io_kind` and `corruption` says
/// anything, and a forked copy has neither.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStop {
    message: String,
    io_kind: Option<io::ErrorKind>,
    corruption: bool,
    forked_copy: bool,
}

impl WriteStop {
    /// The stop caused by `error`, which failed `what` (an operation:
    /// "WAL append", "flush", ...).
    pub(crate) fn after(what: &str, error: &Error) -> Self {
        Self {
            message: format!("{what} failed: {error}"),
            io_kind: error.io_kind(),
            corruption: error.is_corruption(),
            forked_copy: false,
        }
    }

    /// The refusal of every write in a process forked from the one that
    /// opened the store: it holds no lock on the store.
    pub(crate) fn forked_copy() -> Self {
        Self {
            message: "the store was opened by the process this one was forked from; \
                      this process holds no lock on it"
                .into(),
            io_kind: None,
            corruption: false,
            forked_copy: true,
        }
    }

    /// What failed, and the error it failed with, as text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The kind of the failed I/O call, when an I/O call failed: for
    /// example [`io::ErrorKind::StorageFull`] for a full disk, after which
    /// freeing space and reopening the store lets writes go on.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        self.io_kind
    }

    /// Whether bytes on disk were found damaged (a table, WAL or manifest
    /// the failed operation read).
    pub fn is_corruption(&self) -> bool {
        self.corruption
    }

    /// Whether this process is a fork of the one that opened the store
    /// (nothing failed: the fork holds no lock, so it may not write).
    pub fn is_forked_copy(&self) -> bool {
        self.forked_copy
    }
}

impl std::fmt::Display for WriteStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
