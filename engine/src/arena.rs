//! An append-only arena for the memtable's skiplist (`skiplist.rs`): every
//! node (its tower of links, its key and its value) is carved out of large
//! 8-byte-aligned chunks, so an insert allocates nothing of its own, and
//! the bytes never move or free while the arena lives.

/// Bytes of one chunk. A node larger than a quarter of it gets a chunk of
/// its own, so at most a quarter of a chunk is left unused at its end.
const CHUNK_BYTES: usize = 64 << 10;

/// One chunk: a heap allocation of `words` `u64`s (so it starts 8-byte
/// aligned), held as a raw pointer made by `Box::into_raw` and freed only
/// by the arena's `Drop`. Not a `Box`: moving a `Box` (when the list of
/// chunks grows or shifts) asserts unique access to its bytes and so would
/// invalidate the pointers to nodes already handed out (Miri reports it
/// under Stacked Borrows); a raw pointer asserts nothing.
#[derive(Debug)]
struct Chunk {
    ptr: std::ptr::NonNull<std::mem::MaybeUninit<u64>>,
    words: usize,
}

impl Chunk {
    /// A chunk of `bytes` (a multiple of 8), left uninitialized.
    fn new(bytes: usize) -> Self {
        let boxed: Box<[std::mem::MaybeUninit<u64>]> = Box::new_uninit_slice(bytes / 8);
        let words = boxed.len();
        let raw = Box::into_raw(boxed) as *mut std::mem::MaybeUninit<u64>;
        // SAFETY: `Box::into_raw` never returns null.
        let ptr = unsafe { std::ptr::NonNull::new_unchecked(raw) };
        Self { ptr, words }
    }

    fn bytes(&self) -> usize {
        self.words * 8
    }

    /// The chunk's first byte.
    fn start(&self) -> *mut u8 {
        self.ptr.as_ptr() as *mut u8
    }
}

/// Chunks of carved-out bytes. Not `Sync` by itself: the skiplist owns it
/// behind its writer lock and hands readers only pointers into chunks,
/// which never move (each chunk is its own heap allocation) until the arena
/// is dropped.
#[derive(Debug, Default)]
pub(crate) struct Arena {
    /// Every chunk, the one being filled last (once there is one).
    chunks: Vec<Chunk>,
    /// Bytes of the last chunk already handed out.
    used_in_last: usize,
    /// Bytes of every chunk but the unused end of the one being filled:
    /// what the arena holds for its nodes, padding and abandoned chunk ends
    /// included (as RocksDB's arena counts its memory usage).
    memory_bytes: usize,
}

// SAFETY: the arena owns its chunks (nothing else frees them) and hands
// out only raw pointers, whose users (the skiplist) synchronize access;
// moving the arena to another thread moves only that ownership.
unsafe impl Send for Arena {}

impl Drop for Arena {
    fn drop(&mut self) {
        for chunk in &self.chunks {
            let slice = std::ptr::slice_from_raw_parts_mut(chunk.ptr.as_ptr(), chunk.words);
            // SAFETY: made by `Box::into_raw` of a slice of exactly `words`
            // elements in `Chunk::new`, and freed only here, once. Every
            // pointer into it dies with the arena (the skiplist's contract).
            drop(unsafe { Box::from_raw(slice) });
        }
    }
}

impl Arena {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Bytes the arena holds for what it handed out (see `memory_bytes`).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// `len` bytes, 8-byte aligned, uninitialized, valid until the arena
    /// is dropped and never handed out again. `len` is rounded up to a
    /// multiple of 8 (the padding is counted).
    pub(crate) fn alloc(&mut self, len: usize) -> *mut u8 {
        let len = len.div_ceil(8).max(1) * 8;
        let last_room = self.chunks.last().map_or(0, Chunk::bytes) - self.used_in_last;
        if len > last_room {
            if len > CHUNK_BYTES / 4 {
                // A chunk of its own, kept before the current one so that
                // the current one goes on filling.
                let own = Chunk::new(len);
                let ptr = own.start();
                // Invariant: the last chunk is the one being filled, so an
                // own chunk never goes last (`used_in_last` measures the
                // last chunk; a full own chunk there would be handed out
                // again). Without a chunk being filled yet, start one.
                if self.chunks.is_empty() {
                    self.chunks.push(Chunk::new(CHUNK_BYTES));
                    self.used_in_last = 0;
                }
                let at = self.chunks.len() - 1;
                self.chunks.insert(at, own);
                self.memory_bytes += len;
                return ptr;
            }
            // The rest of the last chunk is abandoned, and counted.
            self.memory_bytes += last_room;
            self.chunks.push(Chunk::new(CHUNK_BYTES));
            self.used_in_last = 0;
        }
        let Some(chunk) = self.chunks.last() else {
            unreachable!("a chunk was just pushed")
        };
        // SAFETY: `used_in_last + len <= chunk.bytes()`, so the offset
        // stays inside the chunk's allocation.
        let ptr = unsafe { chunk.start().add(self.used_in_last) };
        self.used_in_last += len;
        self.memory_bytes += len;
        ptr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_stable_and_counted() {
        let mut arena = Arena::new();
        let mut spans: Vec<(*mut u8, usize, u8)> = Vec::new();
        let mut asked = 0;
        for i in 0..5000usize {
            // Sizes from 1 up to past a quarter chunk, so both paths run.
            let len = 1 + (i * 37) % (CHUNK_BYTES / 3);
            let ptr = arena.alloc(len);
            assert_eq!(ptr as usize % 8, 0);
            // SAFETY: `alloc` handed out `len` writable bytes.
            unsafe { std::ptr::write_bytes(ptr, i as u8, len) };
            spans.push((ptr, len, i as u8));
            asked += len.div_ceil(8) * 8;
        }
        for &(ptr, len, fill) in &spans {
            // SAFETY: the arena is alive and the bytes were written above.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
            assert!(
                bytes.iter().all(|&b| b == fill),
                "an allocation was overwritten"
            );
        }
        // Everything handed out is counted; what is counted beyond that is
        // abandoned chunk ends, at most a quarter chunk each.
        assert!(arena.memory_bytes() >= asked);
        let small_chunks = arena.chunks.len();
        assert!(arena.memory_bytes() - asked <= small_chunks * CHUNK_BYTES / 4);
    }

    #[test]
    fn a_large_first_allocation_is_not_handed_out_again() {
        // The first allocation takes a chunk of its own; the small ones
        // after it must not be carved out of that chunk.
        let mut arena = Arena::new();
        let big_len = CHUNK_BYTES / 2;
        let big = arena.alloc(big_len);
        // SAFETY: `alloc` handed out `big_len` writable bytes.
        unsafe { std::ptr::write_bytes(big, 0xAB, big_len) };
        for i in 0..100usize {
            let small = arena.alloc(16);
            let (b, s) = (big as usize, small as usize);
            assert!(
                s + 16 <= b || s >= b + big_len,
                "small allocation {i} at {s:#x} lies inside the large one at {b:#x}"
            );
            // SAFETY: `alloc` handed out 16 writable bytes.
            unsafe { std::ptr::write_bytes(small, 0, 16) };
        }
        // SAFETY: the arena is alive and the bytes were written above.
        let bytes = unsafe { std::slice::from_raw_parts(big, big_len) };
        assert!(
            bytes.iter().all(|&b| b == 0xAB),
            "the large allocation was overwritten"
        );
    }
}
