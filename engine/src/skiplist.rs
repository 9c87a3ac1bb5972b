//! The memtable's ordered set of versions: a skiplist whose nodes live in
//! an arena (`arena.rs`), each node one allocation holding its tower of
//! links, its entry's header, key and value, as in LevelDB's skiplist and
//! RocksDB's `InlineSkipList`. An insert allocates nothing of its own and a
//! search meets one cache line per node instead of chasing a pointer from
//! the node to its key.
//!
//! Concurrency: inserts are serialized by the writer lock (which also owns
//! the arena); readers take no lock. A node is fully written before the
//! `Release` store that links it at level 0 (and then each level above), and
//! readers load links with `Acquire`, so a reader that reaches a node sees
//! all of its bytes. Nodes are never changed after they are linked except
//! for their links, and never freed before the list is dropped.
//!
//! Node layout (8-byte aligned), with `p` the node's address:
//!
//! | at | what |
//! |---|---|
//! | `p - 8 * (i + 1)` | link at level `i`, for `i` in `0..height` |
//! | `p` | `seq << 8 | kind tag`, u64 |
//! | `p + 8` | varint key length, varint value length, key, value |

use std::cmp::Ordering;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};

use bloomlsm_sstable::{EntryKind, compare_keys};
use parking_lot::Mutex;

use crate::arena::Arena;

/// Tallest tower. With a branching factor of 4, enough for 4^12 = 16
/// million entries before searches slow down.
const MAX_HEIGHT: usize = 12;
/// One node in `BRANCHING` of a level is also in the level above.
const BRANCHING: u32 = 4;
/// Bytes of a node's fixed header (the `seq << 8 | tag` word).
const HEADER_BYTES: usize = 8;

/// One version, borrowed from the list for as long as the list lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntryRef<'a> {
    pub(crate) user_key: &'a [u8],
    pub(crate) seq: u64,
    pub(crate) kind: EntryKind,
    pub(crate) value: &'a [u8],
}

/// What only the writer touches: the arena and the height generator.
#[derive(Debug)]
struct Writer {
    arena: Arena,
    /// Xorshift state for tower heights (never 0).
    rng: u32,
}

/// A skiplist of versions in table order (user key ascending, then
/// sequence descending). Invariant: every non-null link points at a node
/// in `writer.arena` that was fully written before it was linked.
#[derive(Debug)]
pub(crate) struct SkipList {
    /// The head node (a full-height tower with an empty entry that is never
    /// compared), in the arena.
    head: *const u8,
    /// Tallest tower linked so far (readers start their search there).
    height: AtomicUsize,
    /// Nodes linked, head excluded.
    len: AtomicUsize,
    /// The arena's `memory_bytes`, published for readers of the size.
    memory_bytes: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: the raw pointers point into the arena, which the list owns and
// which never moves or frees a node while the list lives; everything shared
// between threads is read through atomics (links, sizes) or is immutable
// once linked (entries), and all writing happens under `writer`.
unsafe impl Send for SkipList {}
// SAFETY: as for `Send`.
unsafe impl Sync for SkipList {}

impl SkipList {
    pub(crate) fn new() -> Self {
        let mut arena = Arena::new();
        let head = write_node(&mut arena, MAX_HEIGHT, b"", 0, EntryKind::Delete, b"");
        Self {
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            memory_bytes: AtomicUsize::new(arena.memory_bytes()),
            writer: Mutex::new(Writer {
                arena,
                rng: 0x2545_f491,
            }),
        }
    }

    /// Versions held.
    pub(crate) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// Bytes the list's arena holds: every node with its links, header,
    /// key, value and padding, and the unused ends of filled chunks.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Adds a version. REQUIRES: `seq < 2^56` (`MAX_SEQUENCE`).
    pub(crate) fn insert(&self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) {
        let mut w = self.writer.lock();
        let mut prev = [self.head; MAX_HEIGHT];
        let top = self.height.load(AtomicOrdering::Relaxed);
        self.find_ge(user_key, seq, top, Some(&mut prev));
        let height = random_height(&mut w.rng);
        if height > top {
            // `prev` already holds the head for the new levels. Readers
            // that see the new height before the links find null links
            // there, which end a level like any other.
            self.height.store(height, AtomicOrdering::Relaxed);
        }
        let node = write_node(&mut w.arena, height, user_key, seq, kind, value);
        for (level, &before) in prev.iter().enumerate().take(height) {
            // SAFETY: `node` has a tower of `height` links and `before` one
            // of at least `level + 1` (it was reached at `level`).
            let (new, old) = unsafe { (link(node, level), link(before, level)) };
            new.store(old.load(AtomicOrdering::Relaxed), AtomicOrdering::Relaxed);
            // Publishes the node's bytes to readers that load this link.
            old.store(node as *mut u8, AtomicOrdering::Release);
        }
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
        self.memory_bytes
            .store(w.arena.memory_bytes(), AtomicOrdering::Relaxed);
    }

    /// Every version from the first at or after (`user_key`, `seq`) in
    /// table order.
    pub(crate) fn iter_from(&self, user_key: &[u8], seq: u64) -> Iter<'_> {
        let top = self.height.load(AtomicOrdering::Relaxed);
        Iter {
            next: self.find_ge(user_key, seq, top, None),
            _list: self,
        }
    }

    /// Every version in table order.
    pub(crate) fn iter(&self) -> Iter<'_> {
        // SAFETY: the head's tower is MAX_HEIGHT links.
        let first = unsafe { link(self.head, 0) }.load(AtomicOrdering::Acquire);
        Iter {
            next: first,
            _list: self,
        }
    }

    /// The first node at or after (`user_key`, `seq`), or null; fills
    /// `prev` with the last node before it on each level below `top`.
    fn find_ge(
        &self,
        user_key: &[u8],
        seq: u64,
        top: usize,
        mut prev: Option<&mut [*const u8; MAX_HEIGHT]>,
    ) -> *const u8 {
        let mut x = self.head;
        let mut level = top.clamp(1, MAX_HEIGHT) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level` or above,
            // so its tower has a link at `level`.
            let next = unsafe { link(x, level) }.load(AtomicOrdering::Acquire) as *const u8;
            // SAFETY: a non-null link points at a fully written node.
            let before = !next.is_null() && unsafe { entry(next) }.precedes(user_key, seq);
            if before {
                x = next;
                continue;
            }
            if let Some(prev) = prev.as_mut() {
                prev[level] = x;
            }
            if level == 0 {
                return next;
            }
            level -= 1;
        }
    }
}

impl EntryRef<'_> {
    /// Whether this version sorts before (`user_key`, `seq`): the table
    /// order of `compare_keys`, with the first 8 bytes of the user keys
    /// compared as one big-endian integer first (which orders them as
    /// bytes do), so most comparisons in a search need no `memcmp`.
    fn precedes(&self, user_key: &[u8], seq: u64) -> bool {
        if let (Some(a), Some(b)) = (
            self.user_key.first_chunk::<8>(),
            user_key.first_chunk::<8>(),
        ) {
            let (a, b) = (u64::from_be_bytes(*a), u64::from_be_bytes(*b));
            if a != b {
                return a < b;
            }
        }
        compare_keys(self.user_key, self.seq, user_key, seq) == Ordering::Less
    }
}

/// Versions in table order from some node on. Borrows the list, so the
/// entries it lends stay valid.
pub(crate) struct Iter<'a> {
    next: *const u8,
    _list: &'a SkipList,
}

impl<'a> Iterator for Iter<'a> {
    type Item = EntryRef<'a>;

    fn next(&mut self) -> Option<EntryRef<'a>> {
        if self.next.is_null() {
            return None;
        }
        let node = self.next;
        // SAFETY: `node` is a linked node of the borrowed list, which keeps
        // its arena (and so the node) alive for 'a; every node has a level-0
        // link.
        unsafe {
            self.next = link(node, 0).load(AtomicOrdering::Acquire);
            Some(entry(node))
        }
    }
}

/// Link `level` of the node at `node`.
///
/// # Safety
/// `node` is a node of a live list with a tower taller than `level`.
unsafe fn link<'a>(node: *const u8, level: usize) -> &'a AtomicPtr<u8> {
    // SAFETY: by the layout the link sits `8 * (level + 1)` bytes before
    // the node, 8-byte aligned, inside the node's allocation, and was
    // initialized when the node was written.
    unsafe { &*(node as *const AtomicPtr<u8>).sub(level + 1) }
}

/// The entry of the node at `node`.
///
/// # Safety
/// `node` is a fully written node of a list that lives for `'a`.
unsafe fn entry<'a>(node: *const u8) -> EntryRef<'a> {
    // SAFETY: the node starts with its 8-byte aligned header word, then
    // the two varints and the bytes they measure, all written by
    // `write_node` before the node was linked.
    unsafe {
        let word = (node as *const u64).read();
        let mut at = node.add(HEADER_BYTES);
        let key_len = read_varint(&mut at);
        let value_len = read_varint(&mut at);
        let user_key = std::slice::from_raw_parts(at, key_len);
        let value = std::slice::from_raw_parts(at.add(key_len), value_len);
        // Only `write_node` writes tags, from an `EntryKind`.
        let kind = EntryKind::from_tag(word as u8).unwrap_or(EntryKind::Put);
        EntryRef {
            user_key,
            seq: word >> 8,
            kind,
            value,
        }
    }
}

/// Allocates and writes a node with a tower of `height` null links;
/// returns its address.
fn write_node(
    arena: &mut Arena,
    height: usize,
    user_key: &[u8],
    seq: u64,
    kind: EntryKind,
    value: &[u8],
) -> *const u8 {
    let tower = 8 * height;
    let lengths = varint_len(user_key.len()) + varint_len(value.len());
    let len = tower + HEADER_BYTES + lengths + user_key.len() + value.len();
    let base = arena.alloc(len);
    // SAFETY: `base` is `len` writable, 8-aligned bytes of the arena; the
    // writes below stay inside them (the layout's sizes sum to `len`).
    unsafe {
        let links = base as *mut AtomicPtr<u8>;
        for i in 0..height {
            links.add(i).write(AtomicPtr::new(std::ptr::null_mut()));
        }
        let node = base.add(tower);
        (node as *mut u64).write(seq << 8 | u64::from(kind.tag()));
        let mut at = node.add(HEADER_BYTES);
        write_varint(&mut at, user_key.len());
        write_varint(&mut at, value.len());
        std::ptr::copy_nonoverlapping(user_key.as_ptr(), at, user_key.len());
        std::ptr::copy_nonoverlapping(value.as_ptr(), at.add(user_key.len()), value.len());
        node
    }
}

/// A tower height: 1, then one more with probability 1/`BRANCHING` each.
fn random_height(rng: &mut u32) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 17;
        *rng ^= *rng << 5;
        if !rng.is_multiple_of(BRANCHING) {
            break;
        }
        height += 1;
    }
    height
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// # Safety
/// `*at` has `varint_len(n)` writable bytes.
unsafe fn write_varint(at: &mut *mut u8, mut n: usize) {
    // SAFETY: one byte per 7 bits of `n`, as `varint_len` counts.
    unsafe {
        while n >= 0x80 {
            at.write(n as u8 | 0x80);
            *at = at.add(1);
            n >>= 7;
        }
        at.write(n as u8);
        *at = at.add(1);
    }
}

/// # Safety
/// `*at` points at a varint written by `write_varint`.
unsafe fn read_varint(at: &mut *const u8) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    // SAFETY: the varint's bytes are readable and the last has no high bit.
    unsafe {
        loop {
            let b = at.read();
            *at = at.add(1);
            n |= usize::from(b & 0x7f) << shift;
            if b < 0x80 {
                return n;
            }
            shift += 7;
        }
    }
}

#[cfg(test)]
#[path = "skiplist_tests.rs"]
mod tests;
