//! `delete`: tombstones for one or more keys, as one atomic batch.

use std::path::Path;

use anyhow::Result;
use bloomlsm::WriteBatch;

use super::{Outcome, StoreFlags, close_after_write, open_existing};
use crate::output::Value;

/// Deletes `keys` in one batch.
pub fn run(db: &Path, store: StoreFlags, keys: &[String]) -> Result<Outcome> {
    let db = open_existing(db, store)?;
    let mut batch = WriteBatch::new();
    for key in keys {
        batch.delete(key.as_bytes());
    }
    db.write(batch)?;
    close_after_write(db)?;
    Ok(Value::from(super::batch_summary("tombstones_written", keys.iter())).into())
}
