//! `scan`: pairs in key order between two bounds.

use std::path::Path;

use anyhow::Result;

use super::{Outcome, StoreFlags, open_to_study};
use crate::output::{Fields, Value, text};

/// Up to `limit` pairs from `from` (inclusive) to `to` (exclusive), one
/// `key`, `value` record each.
pub fn run(
    db: &Path,
    store: StoreFlags,
    from: Option<&str>,
    to: Option<&str>,
    limit: usize,
) -> Result<Outcome> {
    let db = open_to_study(db, store)?;
    let from = from.unwrap_or_default().as_bytes().to_vec();
    let iter = match to {
        Some(to) => db.scan(from..to.as_bytes().to_vec()),
        None => db.scan(from..),
    }?;
    let mut pairs = Vec::new();
    for item in iter.take(limit) {
        let (key, value) = item?;
        pairs.push(Value::from(
            Fields::new()
                .with("key", text(&key))
                .with("value", text(&value)),
        ));
    }
    db.close()?;
    Ok(Value::List(pairs).into())
}
