//! `get`: one key's value, or `not found` (exit status 1).

use std::path::Path;

use anyhow::Result;

use super::{Outcome, Status, StoreFlags, open_to_study};
use crate::output::{Fields, Value, text};

/// Prints `key`, then its value or `not found`.
pub fn run(db: &Path, store: StoreFlags, key: &str) -> Result<Outcome> {
    let db = open_to_study(db, store)?;
    super::note_wal_cut(&db, false);
    let value = db.get(key.as_bytes())?;
    db.close()?;
    let status = if value.is_some() {
        Status::Success
    } else {
        Status::NotFound
    };
    let fields = Fields::new()
        .with("key", key)
        .with("value", value.map_or(Value::Missing, |v| text(&v)));
    Ok(Outcome {
        value: fields.into(),
        status,
    })
}
