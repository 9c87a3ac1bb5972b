//! Builds one prefix-compressed block (data or index layout, FORMAT.md).

use crate::varint;

/// Accumulates entries of one block. Keys must be added in table order.
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// REQUIRES: `restart_interval >= 1`.
    pub(crate) fn new(restart_interval: usize) -> Self {
        Self {
            buffer: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: `key` follows the previous key; key and
    /// value shorter than 4 GiB (the writer's limits are far below that).
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart == self.restart_interval {
            self.restarts.push(self.buffer.len() as u32);
            self.since_restart = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        varint::put_u32(&mut self.buffer, shared as u32);
        varint::put_u32(&mut self.buffer, (key.len() - shared) as u32);
        varint::put_u32(&mut self.buffer, value.len() as u32);
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Bytes the finished block would have.
    pub(crate) fn estimated_size(&self) -> usize {
        self.buffer.len() + 4 * self.restarts.len() + 4
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Appends the restart array and returns the block, leaving the builder
    /// empty for the next block. Hand the block back with [`Self::recycle`]
    /// once written, so the next block fills the same buffer instead of
    /// growing a new one.
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        let mut block = std::mem::take(&mut self.buffer);
        for r in &self.restarts {
            block.extend_from_slice(&r.to_le_bytes());
        }
        block.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        block
    }

    /// Takes back a block returned by `finish` as the buffer of the next
    /// one (its bytes are discarded, its capacity kept). REQUIRES: nothing
    /// was added since that `finish`.
    pub(crate) fn recycle(&mut self, mut block: Vec<u8>) {
        if self.buffer.is_empty() {
            block.clear();
            self.buffer = block;
        }
    }
}
