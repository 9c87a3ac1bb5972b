//! A table's filter built again from its keys, without a compaction: to
//! change its bits per key or kind, or to repair a damaged filter block.
//! Two ways: [`rebuild_filter`] writes a new file (the data region copied
//! byte for byte, the index block verbatim, then the new filter, properties
//! and footer); [`append_filter`] appends the new filter, properties and
//! footer to the table's own file, whose footer then names the index block
//! already there. An append writes the filter's bytes, not the table's.

use std::path::Path;
use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterBuilder, FilterKind, HASH_ID_XXH3_64, KeyHash};

use crate::builder::TableSummary;
use crate::error::{Error, Result};
use crate::file::WritableFile;
use crate::format::{BlockHandle, BlockKind, Footer, TRAILER_LEN, block_trailer};
use crate::iter::TableIter;
use crate::properties::TableProperties;
use crate::table::Table;

/// Writes `table` again to `file` (at `path`) with a filter of `kind` at
/// `bits_per_key` (0: no filter), fsyncs it and returns the summary.
pub fn rebuild_filter<W: WritableFile>(
    table: &Arc<Table>,
    mut file: W,
    path: impl AsRef<Path>,
    kind: FilterKind,
    bits_per_key: f64,
) -> Result<TableSummary> {
    let path = path.as_ref();
    // The data region, verified block by block while it is copied.
    let mut copied = 0u64;
    for handle in table.index.handles() {
        let block = table.read_verified_raw(handle, BlockKind::Data)?;
        file.write_all(&block).map_err(|e| io_error(path, e))?;
        copied += block.len() as u64;
    }
    debug_assert_eq!(copied, table.index.data_end());
    write_from_filter(table, file, path, copied, kind, bits_per_key, Index::Copied)
}

/// Appends to `file` (the table's own file, positioned at
/// `table.file_size()`) a filter of `kind` at `bits_per_key` (0: none), a
/// properties block and a footer naming the table's index block, fsyncs it
/// and returns the summary: the table now ends at `file_size`. Until the
/// caller records that size, the table is the one ending at the old size,
/// whose bytes this never touches (readers holding it go on unchanged).
pub fn append_filter<W: WritableFile>(
    table: &Arc<Table>,
    file: W,
    path: impl AsRef<Path>,
    kind: FilterKind,
    bits_per_key: f64,
) -> Result<TableSummary> {
    let at = table.file_size();
    write_from_filter(
        table,
        file,
        path.as_ref(),
        at,
        kind,
        bits_per_key,
        Index::Kept,
    )
}

/// Where the rebuilt table's index block is.
enum Index {
    /// Copied after the new filter (a new file).
    Copied,
    /// The one already in the file (an append).
    Kept,
}

/// Writes, from file offset `offset` on, the new filter, the index block
/// if `index` says so, the properties and the footer; fsyncs the file.
fn write_from_filter<W: WritableFile>(
    table: &Arc<Table>,
    mut file: W,
    path: &Path,
    mut offset: u64,
    kind: FilterKind,
    bits_per_key: f64,
    index: Index,
) -> Result<TableSummary> {
    let io = |e| io_error(path, e);
    let (props, filter) = new_filter(table, kind, bits_per_key)?;
    let filter_handle = match filter {
        Some(bytes) => {
            write_block(&mut file, &mut offset, BlockKind::Filter, &bytes).map_err(io)?
        }
        None => BlockHandle::default(),
    };
    let index_handle = match index {
        Index::Kept => table.footer().index,
        Index::Copied => {
            let block = table.read_verified_raw(table.footer().index, BlockKind::Index)?;
            let handle = BlockHandle {
                offset,
                size: (block.len() - TRAILER_LEN) as u64,
            };
            file.write_all(&block).map_err(io)?;
            offset += block.len() as u64;
            handle
        }
    };
    let properties = write_block(
        &mut file,
        &mut offset,
        BlockKind::Properties,
        &props.encode(),
    )
    .map_err(io)?;
    let footer = Footer {
        filter: filter_handle,
        index: index_handle,
        properties,
        // The index block is kept or copied as it is: its layout is the
        // table's format version's.
        version: table.footer().version,
    };
    file.write_all(&footer.encode()).map_err(io)?;
    file.sync().map_err(io)?;
    Ok(TableSummary {
        path: path.to_path_buf(),
        file_size: offset + crate::format::FOOTER_LEN as u64,
        properties: props,
    })
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The table's properties with a new filter's fields, and the filter's
/// serialized bytes (`None` when `bits_per_key` asks for no filter), built
/// from the table's distinct user keys (tombstones included).
fn new_filter(
    table: &Arc<Table>,
    kind: FilterKind,
    bits_per_key: f64,
) -> Result<(TableProperties, Option<Vec<u8>>)> {
    let mut props = table.properties().clone();
    if !(bits_per_key.is_finite() && bits_per_key > 0.0) {
        props.filter_kind = None;
        props.filter_hash_id = 0;
        props.filter_hashes = 0;
        props.filter_bits = 0;
        props.filter_bytes = 0;
        props.bits_per_key = 0.0;
        return Ok((props, None));
    }
    let mut builder = FilterBuilder::new(kind, bits_per_key);
    let mut last: Option<Vec<u8>> = None;
    for entry in TableIter::new(Arc::clone(table), false) {
        let entry = entry?;
        if last.as_deref() != Some(entry.user_key.as_slice()) {
            builder.add_hash(KeyHash::of(&entry.user_key));
            last = Some(entry.user_key);
        }
    }
    let filter = builder.finish()?;
    let bytes = filter.to_bytes();
    props.filter_kind = Some(filter.kind());
    props.filter_hash_id = HASH_ID_XXH3_64;
    props.filter_hashes = filter.num_hashes();
    props.filter_bits = filter.num_bits();
    props.filter_bytes = bytes.len() as u64;
    props.bits_per_key = bits_per_key;
    Ok((props, Some(bytes)))
}

fn write_block<W: WritableFile>(
    file: &mut W,
    offset: &mut u64,
    kind: BlockKind,
    block: &[u8],
) -> std::io::Result<BlockHandle> {
    let handle = BlockHandle {
        offset: *offset,
        size: block.len() as u64,
    };
    file.write_all(block)?;
    file.write_all(&block_trailer(kind, block))?;
    *offset += (block.len() + TRAILER_LEN) as u64;
    Ok(handle)
}
