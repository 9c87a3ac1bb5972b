//! Reads ahead for a pass over a whole table (compaction, a filter
//! rebuild): one positioned read fetches many data blocks into a buffer
//! that is reused, instead of one read into a freshly zeroed buffer per
//! block. Every block is still checked (type, checksum, bounds) on its own,
//! so a damaged block is named by its own offset as before.

use std::sync::Arc;

use super::{Table, TableFile};
use crate::block::Block;
use crate::block_error::BlockError;
use crate::error::{BlockReadError, Error, Result};
use crate::format::{BlockHandle, BlockKind, TRAILER_LEN, verify_block};
use crate::lookup::BlockSource;

/// Bytes fetched per read of a pass (RocksDB reads compaction inputs ahead
/// too, `compaction_readahead_size`).
pub(crate) const READAHEAD_BYTES: usize = 256 << 10;

/// The window of the file read last. Invariant: `buf[..len]` holds the
/// file's bytes from offset `start`.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    start: u64,
    len: usize,
    buf: Vec<u8>,
}

impl Table {
    /// [`Table::data_block`] for a pass over the table that does not fill
    /// the cache: a cached block is taken from the cache, anything else is
    /// cut out of the window `ra` holds, which is refilled from the
    /// block's offset when the block is not wholly inside it.
    pub(crate) fn data_block_ahead(
        &self,
        handle: BlockHandle,
        ra: &mut Readahead,
    ) -> Result<(Arc<Block>, BlockSource)> {
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.id, handle.offset)
        {
            return Ok((block, BlockSource::Cache));
        }
        let bytes = self.file.read_ahead(handle, BlockKind::Data, ra)?;
        let block = Block::new(bytes)
            .map_err(|r| self.file.corruption(BlockKind::Data, handle.offset, r))?;
        Ok((Arc::new(block), BlockSource::File))
    }
}

impl TableFile {
    /// The block at `handle`, checked, copied out of the window.
    fn read_ahead(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        ra: &mut Readahead,
    ) -> Result<Vec<u8>> {
        let limit = self.blocks_end();
        if !handle.fits_before(limit) {
            return Err(self.corruption(
                kind,
                handle.offset,
                BlockError::PastEnd { handle, limit },
            ));
        }
        // Fits before `limit`, so these do not overflow.
        let need = handle.size as usize + TRAILER_LEN;
        if need > READAHEAD_BYTES {
            // Larger than a window: read on its own into one buffer,
            // reserved fallibly (its size is a recorded field), instead of
            // a window of it and then a copy of the same size (a second
            // allocation, which aborted where memory admitted the first).
            // The window is kept for the blocks after it.
            return self.read_verified_bulk(handle, kind);
        }
        let end = handle.offset + need as u64;
        let inside = handle.offset >= ra.start && end <= ra.start + ra.len as u64;
        if !inside {
            let len = need
                .max(READAHEAD_BYTES)
                .min((limit - handle.offset) as usize);
            // A crafted handle may claim nearly 2^63 bytes: a failed
            // allocation fails this read.
            crate::room::grow_zeroed(&mut ra.buf, len).map_err(|source| Error::Io {
                path: self.path.clone(),
                source: BlockReadError::wrap(kind, handle.offset, source),
            })?;
            // Forget the old window first: after a failed read it is gone.
            ra.len = 0;
            self.file
                .read_exact_at_bulk(&mut ra.buf[..len], handle.offset)
                .map_err(|source| Error::Io {
                    path: self.path.clone(),
                    source: BlockReadError::wrap(kind, handle.offset, source),
                })?;
            ra.start = handle.offset;
            ra.len = len;
        }
        let at = (handle.offset - ra.start) as usize;
        let bytes = &ra.buf[at..at + need];
        match verify_block(kind, bytes) {
            Ok(block) => Ok(block.to_vec()),
            Err(reason) => Err(self.corruption(kind, handle.offset, reason)),
        }
    }
}
