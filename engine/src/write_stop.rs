//! Why a store stopped taking writes: what [`crate::Error::WritesStopped`]
//! carries, so that a caller can tell a full disk from damaged bytes or a
//! forked process without parsing a message.

use std::io;

use crate::Error;

/// The failure that stopped writes, kept for every later refusal: the
/// error itself went to the one call that saw it (or to none, when a
/// background flush or compaction failed), so what it was remains here.
/// Writes stay refused until the store is reopened, whatever the cause:
/// retrying a refused write does not help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStop {
    operation: &'static str,
    message: String,
    cause: StopCause,
}

/// What kind of failure stopped writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopCause {
    /// An I/O call failed: its kind (`StorageFull` for a full disk, after
    /// which freeing space and reopening lets writes go on) and, when the
    /// operating system gave one, its error number (`libc::EIO`, which
    /// has no `ErrorKind` of its own).
    Io {
        /// The failed call's kind.
        kind: io::ErrorKind,
        /// The failed call's OS error number.
        raw_os_error: Option<i32>,
    },
    /// Bytes on disk were found damaged (a table, WAL or manifest the
    /// failed operation read).
    Corruption,
    /// This process is a fork of the one that opened the store: nothing
    /// failed, but the fork holds no lock on the store, so it may not
    /// write.
    ForkedCopy,
    /// Work of the store panicked (a write, a rotation, a flush,
    /// compaction or filter rebuild, or their install): a bug in
    /// bloomlsm (please report it, with the message).
    Panic,
    /// Anything else (file numbers or sequence numbers exhausted, an
    /// invariant the store refused to break).
    Other,
}

impl WriteStop {
    /// The stop caused by `error`, which failed `operation` ("WAL
    /// append", "flush", ...).
    pub(crate) fn after(operation: &'static str, error: &Error) -> Self {
        let cause = match error.io_source() {
            Some(source) => StopCause::Io {
                kind: source.kind(),
                raw_os_error: crate::error::os_error_in(source),
            },
            None if matches!(error, Error::Panicked(_)) => StopCause::Panic,
            None if error.is_corruption() => StopCause::Corruption,
            None => StopCause::Other,
        };
        Self {
            operation,
            message: format!("{operation} failed: {error}"),
            cause,
        }
    }

    /// The refusal of every write in a process forked from the one that
    /// opened the store.
    pub(crate) fn forked_copy() -> Self {
        Self {
            operation: "write in a forked process",
            message: "the store was opened by the process this one was forked from; \
                      this process holds no lock on it"
                .into(),
            cause: StopCause::ForkedCopy,
        }
    }

    /// The operation that failed: "WAL append", "creating a new WAL",
    /// "manifest write", "write" (a panic while a write held the write
    /// lock), "install" (a panic while installing a flush's,
    /// compaction's or filter rebuild's tables), "flush", "compaction",
    /// "filter rebuild", "background work" or "inline flush or
    /// compaction" (or, for a forked copy, "write in a forked process").
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// What failed, and the error it failed with, as text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What kind of failure it was.
    pub fn cause(&self) -> StopCause {
        self.cause
    }

    /// The failed I/O call's kind, when an I/O call failed.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self.cause {
            StopCause::Io { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// The failed I/O call's OS error number, when it had one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self.cause {
            StopCause::Io { raw_os_error, .. } => raw_os_error,
            _ => None,
        }
    }

    /// Whether damaged bytes on disk stopped writes.
    pub fn is_corruption(&self) -> bool {
        self.cause == StopCause::Corruption
    }

    /// Whether this process is a fork of the one that opened the store.
    pub fn is_forked_copy(&self) -> bool {
        self.cause == StopCause::ForkedCopy
    }
}

impl std::fmt::Display for WriteStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
