//! What one table lookup found, and what it cost.

/// Where a data block came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockSource {
    /// The shared block cache: no I/O.
    Cache,
    /// A positioned read of the table file.
    File,
}

/// The answer of one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The key is outside the table's key range: no filter probe, no I/O.
    OutOfRange,
    /// The filter said "definitely absent": no I/O (a read saved).
    FilterNegative,
    /// The newest visible version: `Some(value)` for a put, `None` for a
    /// tombstone (the key is deleted; older tables must not be asked).
    Found {
        /// Its sequence number.
        seq: u64,
        /// The value, or `None` for a tombstone.
        value: Option<Vec<u8>>,
    },
    /// A data block was searched and holds no visible version.
    /// `key_in_table` is true when the table holds only versions newer
    /// than the snapshot (the filter was right to say "maybe"); when false
    /// and the filter was consulted, this was a false positive.
    NotFound {
        /// The key is in the table, only invisible at this snapshot.
        key_in_table: bool,
    },
}

/// One table's answer with what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// What was found.
    pub outcome: Outcome,
    /// The table had a usable filter and it was probed.
    pub filter_consulted: bool,
    /// The data block read, if any, and where it came from.
    pub block: Option<BlockSource>,
}

/// What the filter's verdict turned out to be (docs/DESIGN.md, "Stats").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterVerdict {
    /// The key was outside the table's range; the filter was not asked.
    NotAsked,
    /// The table has no usable filter; the block was searched.
    NoFilter,
    /// "Definitely absent", and it was: a read saved.
    Negative,
    /// "Maybe", and the key is in the table.
    TruePositive,
    /// "Maybe", but the key is not in the table: a block read for nothing.
    FalsePositive,
}

impl Lookup {
    /// Classifies the filter's answer.
    pub fn verdict(&self) -> FilterVerdict {
        match (&self.outcome, self.filter_consulted) {
            (Outcome::OutOfRange, _) => FilterVerdict::NotAsked,
            (Outcome::FilterNegative, _) => FilterVerdict::Negative,
            (_, false) => FilterVerdict::NoFilter,
            (Outcome::Found { .. }, true) | (Outcome::NotFound { key_in_table: true }, true) => {
                FilterVerdict::TruePositive
            }
            (
                Outcome::NotFound {
                    key_in_table: false,
                },
                true,
            ) => FilterVerdict::FalsePositive,
        }
    }
}
