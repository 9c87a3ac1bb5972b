//! `scan`: pairs in key order between two bounds.

use std::path::Path;

use anyhow::{Result, bail};

use super::{Outcome, StoreFlags, open_to_study};
use crate::output::{Fields, Value, text};

/// Up to `limit` pairs from `from` (inclusive) to `to` (exclusive), one
/// `key`, `value` record each; a note on stderr when the range holds more,
/// or when reading past the limit failed. Bounds in the wrong order are a
/// usage error, refused before the store is opened: an empty answer would
/// read as "the store holds nothing there". Equal bounds are an empty
/// range by definition and answer `(none)`.
pub fn run(
    db: &Path,
    store: StoreFlags,
    from: Option<&str>,
    to: Option<&str>,
    limit: usize,
) -> Result<Outcome> {
    if let (Some(from), Some(to)) = (from, to)
        && from.as_bytes() > to.as_bytes()
    {
        bail!(
            "--from {from:?} sorts after --to {to:?} (keys compare bytewise): the bounds are swapped, no key can be in between"
        );
    }
    let db = open_to_study(db, store)?;
    super::note_wal_cut(&db, false);
    let from = from.unwrap_or_default().as_bytes().to_vec();
    let mut iter = match to {
        Some(to) => db.scan(from..to.as_bytes().to_vec()),
        None => db.scan(from..),
    }?;
    let mut pairs = Vec::new();
    for item in iter.by_ref().take(limit) {
        let (key, value) = item?;
        pairs.push(Value::from(
            Fields::new()
                .with("key", text(&key))
                .with("value", text(&value)),
        ));
    }
    // Said on stderr, so stdout stays the pairs alone (text or JSON). A
    // failed read past the limit is said too: silence would read as "the
    // range ends here". The pairs asked for were read, so it is a note.
    if pairs.len() == limit {
        let more = match iter.next() {
            Some(Ok(_)) => Some("the range holds more pairs".to_string()),
            Some(Err(e)) => Some(format!(
                "reading past it failed: {}",
                e.to_string().replace(['\n', '\r'], " ")
            )),
            None => None,
        };
        if let Some(more) = more {
            super::to_stderr(&format!("note: --limit {limit} reached; {more}"));
        }
    }
    drop(iter);
    db.close()?;
    Ok(Value::List(pairs).into())
}
