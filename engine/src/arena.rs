//! An append-only byte arena for the memtable: keys and values are copied
//! into large chunks, so an insert allocates nothing of its own (only the
//! skiplist's node), and the bytes never move while the arena lives.

use parking_lot::Mutex;

/// Bytes of one chunk. An entry larger than a quarter of it gets a chunk of
/// its own, so at most a quarter of a chunk is left unused at its end.
const CHUNK_BYTES: usize = 64 << 10;

/// Bytes copied into an [`Arena`]. Invariant: points at `len` initialized
/// bytes inside a chunk of the arena that made it, which never moves,
/// changes or frees them before the arena is dropped.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArenaBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes behind an `ArenaBytes` are never written after they
// are copied in (the arena only appends past them), so sharing the pointer
// between threads shares immutable data.
unsafe impl Send for ArenaBytes {}
// SAFETY: as for `Send`: the bytes are immutable once handed out.
unsafe impl Sync for ArenaBytes {}

impl ArenaBytes {
    /// The bytes.
    ///
    /// # Safety
    /// The arena that made `self` is alive for `'a`.
    pub(crate) unsafe fn as_slice<'a>(self) -> &'a [u8] {
        // SAFETY: by the invariant the pointer is to `len` initialized,
        // unchanging bytes, and the caller guarantees the arena (which owns
        // them) outlives `'a`. A zero-length slice from a dangling but
        // non-null, aligned pointer is allowed.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Chunks of copied bytes. Each chunk is a `Vec` filled only up to its
/// capacity (never reallocated), so its buffer stays where it is.
#[derive(Debug, Default)]
pub(crate) struct Arena {
    chunks: Mutex<Vec<Vec<u8>>>,
}

impl Arena {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Copies `bytes` in and returns where they are.
    pub(crate) fn copy(&self, bytes: &[u8]) -> ArenaBytes {
        if bytes.is_empty() {
            return ArenaBytes {
                ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(),
                len: 0,
            };
        }
        let mut chunks = self.chunks.lock();
        let fits = chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            if bytes.len() > CHUNK_BYTES / 4 {
                // A chunk of its own, kept before the current one so that
                // the current one goes on filling.
                let own = bytes.to_vec();
                let ptr = own.as_ptr();
                let at = chunks.len().saturating_sub(1);
                chunks.insert(at, own);
                return ArenaBytes {
                    ptr,
                    len: bytes.len(),
                };
            }
            chunks.push(Vec::with_capacity(CHUNK_BYTES));
        }
        let Some(chunk) = chunks.last_mut() else {
            unreachable!("a chunk was just pushed")
        };
        let start = chunk.len();
        // Within capacity: no reallocation, earlier bytes stay put.
        chunk.extend_from_slice(bytes);
        ArenaBytes {
            // SAFETY: `start + bytes.len() <= chunk.len()`, so the offset is
            // inside the chunk's allocation.
            ptr: unsafe { chunk.as_ptr().add(start) },
            len: bytes.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_stay_put_across_many_chunks_and_large_entries() {
        let arena = Arena::new();
        let mut copies = Vec::new();
        for i in 0..5000usize {
            // Sizes from 0 up to past a quarter chunk, so both paths run.
            let len = (i * 37) % (CHUNK_BYTES / 3);
            let bytes: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
            copies.push((arena.copy(&bytes), bytes));
        }
        for (copy, bytes) in &copies {
            // SAFETY: `arena` is alive for the whole test.
            assert_eq!(unsafe { copy.as_slice() }, bytes.as_slice());
        }
    }
}
