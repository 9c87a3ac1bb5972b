//! The block cache shared by all open tables: a concurrent, size-bounded
//! cache (quick_cache, CLOCK-Pro like) keyed by table id and block offset
//! and charged by block bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::block::Block;

#[derive(Clone, Copy, Debug, Default)]
struct BlockWeighter;

impl Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        block.size() as u64 + 64
    }
}

/// Data blocks of all tables, up to a byte budget.
#[derive(Debug)]
pub struct BlockCache {
    cache: Cache<(u64, u64), Arc<Block>, BlockWeighter>,
    capacity: u64,
    /// Set by [`BlockCache::close`]: no block is held from then on.
    closed: AtomicBool,
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: u64) -> Self {
        let estimated_items = (capacity_bytes / 4096).max(16) as usize;
        Self {
            cache: Cache::with_weighter(estimated_items, capacity_bytes.max(1), BlockWeighter),
            capacity: capacity_bytes,
            closed: AtomicBool::new(false),
        }
    }

    /// The block of table `table_id` at `offset`, if cached.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.cache.get(&(table_id, offset))
    }

    /// Caches a block, unless the cache is closed.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        self.cache.insert((table_id, offset), block);
        // A close between the check above and the insert: its clear may
        // have passed this block's shard before the insert reached it.
        // The flag was set before that clear, so it is seen here, and
        // the block leaves again.
        if self.closed.load(Ordering::SeqCst) {
            self.cache.remove(&(table_id, offset));
        }
    }

    /// Bytes currently charged.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Drops every block and caches none from now on (called when the
    /// store closes: a read that passed its check before the close, a
    /// scan seeking every level say, may still read blocks after it, and
    /// a snapshot kept past the close would keep them cached).
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.cache.clear();
    }

    /// Drops every block of `table_id` (called when a table is deleted).
    pub fn evict_table(&self, table_id: u64) {
        self.cache.retain(|&(id, _), _| id != table_id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // In tests a panic is the failure report.
    use super::*;
    use crate::block_builder::BlockBuilder;

    fn block() -> Arc<Block> {
        let mut b = BlockBuilder::new(2);
        b.add(&[b"k".as_slice(), &[0; 8]].concat(), b"v");
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn a_closed_cache_holds_no_block_and_takes_none() {
        let cache = BlockCache::new(1 << 20);
        cache.insert(1, 0, block());
        assert!(cache.get(1, 0).is_some());
        cache.close();
        assert_eq!(cache.used_bytes(), 0);
        cache.insert(1, 0, block());
        cache.insert(2, 64, block());
        assert_eq!(cache.used_bytes(), 0);
        assert!(cache.get(1, 0).is_none());
    }
}
