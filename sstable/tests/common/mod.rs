//! Helpers shared by the table tests.
#![allow(dead_code)]

pub mod model_check;
pub mod properties;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{BlockCache, EntryKind, Table, TableBuilder, TableOptions, TableSummary};

/// (user key, seq) -> (kind, value), in table order when iterated with
/// `sorted_entries`.
pub type Model = BTreeMap<(Vec<u8>, std::cmp::Reverse<u64>), (EntryKind, Vec<u8>)>;

pub fn options(kind: Option<FilterKind>, block_size: usize) -> TableOptions {
    TableOptions {
        block_size,
        filter_kind: kind.unwrap_or(FilterKind::Blocked),
        bits_per_key: if kind.is_some() { 10.0 } else { 0.0 },
        ..TableOptions::default()
    }
}

pub fn write_table(path: &Path, model: &Model, options: TableOptions) -> TableSummary {
    let file = std::fs::File::create(path).unwrap();
    let mut b = TableBuilder::new(std::io::BufWriter::new(file), path, options);
    for ((key, seq), (kind, value)) in model {
        b.add(key, seq.0, *kind, value).unwrap();
    }
    b.finish().unwrap()
}

pub fn open(path: &Path, cache: bool) -> Arc<Table> {
    let cache = cache.then(|| Arc::new(BlockCache::new(1 << 20)));
    Arc::new(Table::open_path(path, 1, cache).unwrap())
}

/// A model of `n` keys "key{i:08}" with one put each, seq = i + 1.
pub fn simple_model(n: u64) -> Model {
    (0..n)
        .map(|i| {
            (
                (format!("key{i:08}").into_bytes(), std::cmp::Reverse(i + 1)),
                (EntryKind::Put, format!("value{i}").into_bytes()),
            )
        })
        .collect()
}

/// The block (kind, offset) an open refused for want of memory, and the
/// error's message: `opened` must be an `Error::Io` of kind `OutOfMemory`
/// wrapping the `BlockReadError` that names the block.
pub fn refused_block(
    opened: bloomlsm_sstable::Result<Table>,
) -> (bloomlsm_sstable::BlockKind, u64, String) {
    let message = opened.as_ref().err().map(ToString::to_string);
    let Err(bloomlsm_sstable::Error::Io { source, .. }) = opened else {
        panic!("expected an out-of-memory I/O error, got {opened:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::OutOfMemory, "{source}");
    let read = source
        .get_ref()
        .and_then(|e| e.downcast_ref::<bloomlsm_sstable::BlockReadError>())
        .unwrap_or_else(|| panic!("no block named: {source}"));
    (read.kind, read.offset, message.unwrap_or_default())
}
