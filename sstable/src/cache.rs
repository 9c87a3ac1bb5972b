//! The block cache shared by all open tables: a concurrent, size-bounded
//! cache (quick_cache, CLOCK-Pro like) keyed by table id and block offset
//! and charged by block bytes.

use std::sync::Arc;

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
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: u64) -> Self {
        let estimated_items = (capacity_bytes / 4096).max(16) as usize;
        Self {
            cache: Cache::with_weighter(estimated_items, capacity_bytes.max(1), BlockWeighter),
            capacity: capacity_bytes,
        }
    }

    /// The block of table `table_id` at `offset`, if cached.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        self.cache.get(&(table_id, offset))
    }

    /// Caches a block.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        self.cache.insert((table_id, offset), block);
    }

    /// Bytes currently charged.
    pub fn used_bytes(&self) -> u64 {
        self.cache.weight()
    }

    /// The byte budget.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Drops every block (called when the store closes).
    pub fn clear(&self) {
        self.cache.clear();
    }

    /// Drops every block of `table_id` (called when a table is deleted).
    pub fn evict_table(&self, table_id: u64) {
        self.cache.retain(|&(id, _), _| id != table_id);
    }
}
