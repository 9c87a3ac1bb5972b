//! `inspect --verify`: every entry of a table read back (each data block's
//! checksum checked on the way), in table order, against what its
//! properties block and its filter say about them.

use std::cmp::Ordering;
use std::sync::Arc;

use anyhow::{Result, bail};
use bloomlsm_filter::{Filter, KeyHash};
use bloomlsm_sstable::{EntryKind, FilterLoadError, FilterStatus, Table, TableIter};

use crate::output::Fields;

/// Reads the whole table. A damaged block is an error naming the file, the
/// block and its offset, the filter block too (the store reads around a
/// filter it cannot use, but a table whose filter block is damaged is not
/// sound); entries out of order, or counts, key or sequence
/// ranges that disagree with the properties, are errors naming what
/// disagrees. Keys the filter says are absent (false negatives, which a
/// usable filter never gives: a get of them answers not found) are
/// counted, so the figure is seen, and returned as the damage found.
pub(super) fn verify(table: Arc<Table>) -> Result<(Fields, Option<String>)> {
    if let FilterStatus::Unusable(reason) = table.filter_status() {
        let path = table.path().display();
        match reason {
            FilterLoadError::Read { .. } => bail!("{path}: {reason}"),
            _ => bail!("corrupt table {path}: {reason}"),
        }
    }
    let p = table.properties();
    let filter = table.filter();
    let mut entries = 0u64;
    let mut tombstones = 0u64;
    let mut distinct = 0u64;
    let mut filter_misses = 0u64;
    let (mut smallest_seq, mut largest_seq) = (u64::MAX, 0u64);
    let mut last: Option<(Vec<u8>, u64)> = None;
    let mut first_key: Option<Vec<u8>> = None;
    let mut iter = TableIter::new(Arc::clone(&table), false);
    while iter.advance()? {
        let (key, seq) = (iter.user_key(), iter.seq());
        let new_key = match &last {
            None => true,
            // Table order: user keys ascending, a key's versions newest first.
            Some((k, s)) => match k.as_slice().cmp(key) {
                Ordering::Less => true,
                Ordering::Equal if *s > seq => false,
                _ => bail!(
                    "entry {entries} (key {:?}, sequence {seq}) is not after the one before it",
                    String::from_utf8_lossy(key)
                ),
            },
        };
        if new_key {
            distinct += 1;
            if filter.is_some_and(|f| !f.contains_hash(KeyHash::of(key))) {
                filter_misses += 1;
            }
        }
        if first_key.is_none() {
            first_key = Some(key.to_vec());
        }
        entries += 1;
        tombstones += u64::from(iter.kind() == EntryKind::Delete);
        smallest_seq = smallest_seq.min(seq);
        largest_seq = largest_seq.max(seq);
        last = Some((key.to_vec(), seq));
    }
    let last_key = last.map(|(k, _)| k).unwrap_or_default();
    let read = [
        ("entries", entries, p.entries),
        ("tombstones", tombstones, p.tombstones),
        ("distinct_keys", distinct, p.distinct_keys),
        ("smallest_seq", smallest_seq, p.smallest_seq),
        ("largest_seq", largest_seq, p.largest_seq),
    ];
    for (name, found, recorded) in read {
        if found != recorded {
            bail!("{name} read is {found}; the properties block says {recorded}");
        }
    }
    if first_key.as_deref() != Some(p.smallest_key.as_slice()) || last_key != p.largest_key {
        bail!("the keys read do not span the properties block's smallest and largest key");
    }
    let damage = (filter_misses > 0).then(|| {
        format!(
            "corrupt table {}: filter block at offset {}: its filter rules out {filter_misses} of its {distinct} keys (false negatives: a get of them answers not found)",
            table.path().display(),
            table.footer().filter.offset
        )
    });
    let status = if damage.is_some() {
        "filter false negatives"
    } else {
        "ok"
    };
    let fields = Fields::new()
        .with("status", status)
        .with("entries_read", entries)
        .with("data_blocks_read", table.data_block_count())
        .with(
            "keys_checked_against_filter",
            filter.is_some().then_some(distinct),
        )
        .with(
            "filter_false_negatives",
            filter.is_some().then_some(filter_misses),
        );
    Ok((fields, damage))
}
