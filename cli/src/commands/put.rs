//! `put`: KEY VALUE pairs written as one atomic batch.

use std::path::Path;

use anyhow::{Result, bail};
use bloomlsm::WriteBatch;

use super::{Outcome, StoreFlags, close_after_write, open_for_writing};
use crate::output::Value;

/// Writes `pairs` (key, value, key, value, ...) in one batch, creating the
/// store if it is missing.
pub fn run(db: &Path, store: StoreFlags, pairs: &[String]) -> Result<Outcome> {
    if !pairs.len().is_multiple_of(2) {
        bail!(
            "put takes KEY VALUE pairs: {} arguments leave {:?} without a value",
            pairs.len(),
            pairs.last().map_or("", String::as_str)
        );
    }
    let db = open_for_writing(db, store)?;
    let mut batch = WriteBatch::new();
    for pair in pairs.chunks_exact(2) {
        if let [key, value] = pair {
            batch.put(key.as_bytes(), value.as_bytes());
        }
    }
    db.write(batch)?;
    close_after_write(db)?;
    let keys = pairs.iter().step_by(2);
    Ok(Value::from(super::batch_summary("pairs", keys)).into())
}
