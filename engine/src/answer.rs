//! What one memtable or table knows of a key at a snapshot.

use bloomlsm_sstable::Outcome;

/// The answer of one source of a lookup. Sources are asked newest first;
/// the first `Value` or `Deleted` ends the lookup.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The newest visible version is a value.
    Value(Vec<u8>),
    /// The newest visible version is a tombstone: the key is deleted, and
    /// older sources must not be asked.
    Deleted,
    /// No visible version here: ask the next, older source.
    Missing,
}

impl Answer {
    /// The answer a table's lookup outcome gives, taking its value.
    pub(crate) fn from_outcome(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Found { value: Some(v), .. } => Self::Value(v),
            Outcome::Found { value: None, .. } => Self::Deleted,
            Outcome::OutOfRange | Outcome::FilterNegative | Outcome::NotFound { .. } => {
                Self::Missing
            }
        }
    }

    /// `Some` when the lookup ends here: the value, or `None` if deleted.
    pub(crate) fn into_final(self) -> Option<Option<Vec<u8>>> {
        match self {
            Self::Value(v) => Some(Some(v)),
            Self::Deleted => Some(None),
            Self::Missing => None,
        }
    }
}
