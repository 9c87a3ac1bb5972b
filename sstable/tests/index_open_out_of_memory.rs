//! A table's open must never abort the process, whatever its bytes. The
//! separators a version 2 index decodes to are bounded only by the bytes
//! before the index (`IndexKeysPastData`), and a sparse file's apparent
//! size is nearly 2^63: an index of `7n` bytes whose every entry repeats
//! the previous key and adds one byte decodes to about `n^2 / 2` bytes of
//! separators (a 1 MB index to about 10 GB). When the allocator refuses
//! that memory, the open must fail with an `OutOfMemory` I/O error naming
//! the index block and its offset, as a data block's oversized read does.
//!
//! The file is sparse in memory (zeros but for the index, properties and
//! footer at its end), and this binary's allocator refuses every
//! allocation of [`CAP`] bytes or more while armed: here 20,000 entries
//! (140 KB of index) decode to 200 MB, far past it.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, ErrorKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bloomlsm_sstable::format::{TRAILER_LEN, block_trailer};
use bloomlsm_sstable::{
    BlockHandle, BlockKind, Error, Footer, RandomAccessFile, Table, TableProperties,
};

/// Allocations of this many bytes or more are refused while [`ARMED`] is
/// not 0 (a count: the tests run at once, and each arms it for its open).
const CAP: usize = 64 << 20;
static ARMED: AtomicUsize = AtomicUsize::new(0);

struct Capped;

// SAFETY: delegates every allocation it grants to the system allocator
// unchanged; a refusal returns null, as the contract allows. `realloc` is
// the default one, which allocates through `alloc`, so growth is capped
// too.
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= CAP && ARMED.load(Ordering::SeqCst) > 0 {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Capped = Capped;

/// A file of `len` bytes: zeros, then `tail` at its end (a sparse file).
#[derive(Debug)]
struct Sparse {
    len: u64,
    tail: Vec<u8>,
}

impl RandomAccessFile for Sparse {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let tail_at = self.len - self.tail.len() as u64;
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.len)
            .ok_or(ErrorKind::UnexpectedEof)?;
        for (i, b) in (offset..end).zip(buf.iter_mut()) {
            *b = i
                .checked_sub(tail_at)
                .map_or(0, |at| self.tail[at as usize]);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `n` version 2 index entries over empty blocks: entry `i` shares the
/// whole previous separator and adds one byte, so separator `i` is `i + 1`
/// bytes long and each sorts after the one before (a prefix of it). About
/// 7 bytes an entry, `n (n + 1) / 2` bytes of separators.
fn growing_separators(n: u64) -> Vec<u8> {
    let mut index = Vec::new();
    for i in 0..n {
        varint(&mut index, i); // shared
        varint(&mut index, 1); // unshared
        index.push(b'k');
        varint(&mut index, 0); // sequence
        varint(&mut index, 0); // size
    }
    index
}

/// A version 2 table of `len` bytes whose index block is `index`, naming
/// `blocks` empty blocks (at most `len` bytes of zeros before the index),
/// with properties that agree; and the index block's offset.
fn sparse_table(len: u64, index: &[u8], blocks: u64) -> (Sparse, u64) {
    let properties = TableProperties {
        entries: blocks,
        distinct_keys: blocks,
        data_blocks: blocks,
        data_bytes: blocks * TRAILER_LEN as u64,
        smallest_key: b"k".to_vec(),
        largest_key: b"k".to_vec(),
        ..common::properties::unfiltered()
    }
    .encode();
    let tail_len = index.len() + properties.len() + 2 * TRAILER_LEN + 64;
    let index_at = len - tail_len as u64;
    let mut tail = Vec::new();
    tail.extend_from_slice(index);
    tail.extend_from_slice(&block_trailer(BlockKind::Index, index));
    tail.extend_from_slice(&properties);
    tail.extend_from_slice(&block_trailer(BlockKind::Properties, &properties));
    let footer = Footer {
        filter: BlockHandle { offset: 0, size: 0 },
        index: BlockHandle {
            offset: index_at,
            size: index.len() as u64,
        },
        properties: BlockHandle {
            offset: index_at + (index.len() + TRAILER_LEN) as u64,
            size: properties.len() as u64,
        },
        version: 2,
    };
    tail.extend_from_slice(&footer.encode());
    assert_eq!(tail.len(), tail_len);
    (Sparse { len, tail }, index_at)
}

#[test]
fn an_index_decoding_past_memory_fails_the_open_without_aborting() {
    let n = 20_000;
    let index = growing_separators(n);
    // 200 MB of separators, within the apparent bytes before the index.
    assert!(n * (n + 1) / 2 > CAP as u64);
    let (file, index_at) = sparse_table(1 << 40, &index, n);

    ARMED.fetch_add(1, Ordering::SeqCst);
    let opened = Table::open(Arc::new(file), "sparse.sst", 1, None);
    ARMED.fetch_sub(1, Ordering::SeqCst);

    assert!(
        matches!(&opened, Err(Error::Io { path, .. }) if path.to_str() == Some("sparse.sst")),
        "{opened:?}"
    );
    let (kind, offset, message) = common::refused_block(opened);
    assert_eq!((kind, offset), (BlockKind::Index, index_at));
    assert!(
        message.contains(&format!("index block at offset {index_at}"))
            && message.contains("the allocator refused"),
        "{message}"
    );
    println!("{message}");
}

/// The same table as a real sparse file (tmpfs in /dev/shm where there
/// is one): the same refusal through the file system's reads. Skipped
/// where the file system refuses so large a file.
#[test]
fn an_index_in_a_sparse_file_on_disk_fails_the_open_without_aborting() {
    use std::io::{Seek, SeekFrom, Write};
    let n = 20_000;
    let len = 1 << 40;
    let (file, index_at) = sparse_table(len, &growing_separators(n), n);
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = dir.path().join("sparse.sst");
    let mut out = std::fs::File::create(&path).unwrap();
    if out.set_len(len).is_err() {
        println!("skipped: no sparse file of {len} bytes here");
        return;
    }
    out.seek(SeekFrom::Start(len - file.tail.len() as u64))
        .unwrap();
    out.write_all(&file.tail).unwrap();
    drop(out);

    ARMED.fetch_add(1, Ordering::SeqCst);
    let opened = Table::open_path(&path, 1, None);
    ARMED.fetch_sub(1, Ordering::SeqCst);

    let (kind, offset, _) = common::refused_block(opened);
    assert_eq!((kind, offset), (BlockKind::Index, index_at));
}

/// The same index under an allocator that grants it opens whole: the
/// refusal above is the allocator's, not a new limit on the format. (Kept
/// small: 2,000 entries, 2 MB of separators.)
#[test]
fn the_same_shape_opens_when_memory_allows() {
    let n = 2_000;
    let (file, _) = sparse_table(1 << 40, &growing_separators(n), n);
    let table = Table::open(Arc::new(file), "sparse.sst", 1, None).unwrap();
    assert_eq!(table.data_block_count() as u64, n);
}
