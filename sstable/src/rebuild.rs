//! Rewrites a table with a new filter and the same data blocks: the data
//! region is copied byte for byte, the index block is copied verbatim (its
//! handles still point at the same offsets), and a new filter, properties
//! block and footer are written. Used to change bits per key without a
//! compaction, and to repair a damaged filter block.

use std::path::Path;
use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterBuilder, FilterKind, HASH_ID_XXH3_64, KeyHash};

use crate::builder::TableSummary;
use crate::error::{Error, Result};
use crate::file::WritableFile;
use crate::format::{BlockHandle, BlockKind, FORMAT_VERSION, Footer, TRAILER_LEN, block_trailer};
use crate::iter::TableIter;
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
    let path = path.as_ref().to_path_buf();
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    let data_end = table.index.data_end();
    // The data region, verified block by block while it is copied.
    let mut copied = 0u64;
    for handle in table.index.handles() {
        let block = table.read_verified_raw(handle, BlockKind::Data)?;
        file.write_all(&block).map_err(io)?;
        copied += block.len() as u64;
    }
    debug_assert_eq!(copied, data_end);
    let mut offset = data_end;
    let mut props = table.properties().clone();
    let filter_handle = if bits_per_key.is_finite() && bits_per_key > 0.0 {
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
        write_block(&mut file, &mut offset, BlockKind::Filter, &bytes).map_err(io)?
    } else {
        props.filter_kind = None;
        props.filter_hash_id = 0;
        props.filter_hashes = 0;
        props.filter_bits = 0;
        props.filter_bytes = 0;
        props.bits_per_key = 0.0;
        BlockHandle::default()
    };
    let index = table.read_verified_raw(table.footer().index, BlockKind::Index)?;
    let index_len = index.len() - TRAILER_LEN;
    let index_handle = BlockHandle {
        offset,
        size: index_len as u64,
    };
    file.write_all(&index).map_err(io)?;
    offset += index.len() as u64;
    let properties_handle = write_block(
        &mut file,
        &mut offset,
        BlockKind::Properties,
        &props.encode(),
    )
    .map_err(io)?;
    let footer = Footer {
        filter: filter_handle,
        index: index_handle,
        properties: properties_handle,
        version: FORMAT_VERSION,
    };
    file.write_all(&footer.encode()).map_err(io)?;
    offset += crate::format::FOOTER_LEN as u64;
    file.sync().map_err(io)?;
    Ok(TableSummary {
        path,
        file_size: offset,
        properties: props,
    })
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
