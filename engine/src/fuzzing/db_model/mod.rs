//! The engine's model interpreter, shared by the fuzz target `db_model`
//! (`engine/fuzz`) and the property test `engine/tests/engine_suite/db_model.rs`: a
//! [`Case`] (a store shape and operations, decoded from arbitrary bytes by
//! [`Case::from_bytes`] or written by hand) run on a store with every
//! answer checked against a `BTreeMap` ([`run_case`]).
//!
//! Operations ([`Op`]): puts (values of 0 to 544 bytes, each naming its
//! write), deletes, write batches (the same key several times, runs of
//! neighbouring keys), gets, range scans (any bounds, a start past the end
//! included), up to [`SNAPSHOT_SLOTS`] snapshots (taken with a copy of the
//! model, read by get and range scan, released; checked whole after every
//! flush, compaction, filter rebuild and tree change), flush, full
//! compaction (rare), `rebuild_filters` at uniform, per-level and
//! optimized policies, an iterator read across a write, a rebuild and a
//! flush or compaction, and close-and-reopen with another filter kind
//! (standard, blocked, ribbon) and policy. Keys are 1 to 3 bytes over
//! [`ALPHABET`]. Shapes ([`shapes::LAYOUTS`]) are narrow enough to build
//! four or more levels from flushes and the store's own compactions;
//! deletion-triggered compaction on or off. Background work is off, so a
//! case runs the same way every time.

mod decode;
mod ops;
mod run;
pub mod shapes;

pub use decode::MAX_OPS;
pub use ops::{
    ALPHABET, Case, FilterConfig, HOT_KEYS, KEY_COUNT, KeyId, KeyRange, Op, PolicySpec, Shape, key,
    value,
};
pub use run::{RunFigures, SNAPSHOT_SLOTS, run_case};
