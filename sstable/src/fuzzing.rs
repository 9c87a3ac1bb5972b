//! Entry points for fuzz targets and property tests: a table's decoders fed
//! bytes that pass every checksum. Not part of the stable API.
//!
//! A flipped byte in a table is caught by its block's crc32 before any
//! decoder sees it (`tests/corruption.rs` sweeps every byte). What a
//! checksum cannot catch is a block that was written wrong and checksummed
//! as written (a writer's bug, a hostile file): `reseal` edits the bytes of
//! a valid table and then recomputes the checksum of every block and of the
//! footer, so the index, data, properties and filter decoders see the
//! edited bytes themselves. Whatever those bytes are, opening, getting and
//! scanning must end in a value or an error, never a panic or a hang.

use std::io;
use std::sync::Arc;

use bloomlsm_filter::KeyHash;

use crate::file::RandomAccessFile;
use crate::format::{BlockHandle, BlockKind, FOOTER_LEN, Footer, TRAILER_LEN, block_trailer};
use crate::{Table, TableIter, decode_index_block};

/// A table file held in memory.
#[derive(Debug)]
pub struct MemFile(pub Vec<u8>);

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.0.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// The checksummed blocks of a valid table, from its footer and index: the
/// data blocks, then filter, index and properties.
pub fn blocks(table: &[u8]) -> Vec<(BlockKind, BlockHandle)> {
    let Some(footer_at) = table.len().checked_sub(FOOTER_LEN) else {
        return Vec::new();
    };
    let Ok(footer) = Footer::decode(&table[footer_at..]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let index = block_bytes(table, footer.index);
    if let Some(Ok(Ok(handles))) =
        index.map(|bytes| decode_index_block(footer.version, bytes, footer_at as u64))
    {
        out.extend(handles.into_iter().map(|h| (BlockKind::Data, h)));
    }
    if !footer.filter.is_null() {
        out.push((BlockKind::Filter, footer.filter));
    }
    out.push((BlockKind::Index, footer.index));
    out.push((BlockKind::Properties, footer.properties));
    out
}

fn block_bytes(table: &[u8], h: BlockHandle) -> Option<&[u8]> {
    let start = usize::try_from(h.offset).ok()?;
    let end = start.checked_add(usize::try_from(h.size).ok()?)?;
    table.get(start..end)
}

/// Applies `edits` (each `(position, byte)`: the byte at `position` modulo
/// the bytes before the footer's checksum, xored with `byte`) to `table`,
/// then writes a fresh trailer after every block of `blocks` and a fresh
/// footer checksum, so every edit reaches a decoder.
pub fn reseal(table: &mut [u8], blocks: &[(BlockKind, BlockHandle)], edits: &[(usize, u8)]) {
    let Some(footer_at) = table.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    // Footer bytes 0..52 are covered by its checksum at 52..56.
    let editable = footer_at + 52;
    for &(at, byte) in edits {
        table[at % editable] ^= byte;
    }
    for &(kind, h) in blocks {
        let Some(start) = usize::try_from(h.offset).ok() else {
            continue;
        };
        let Some(end) = usize::try_from(h.size)
            .ok()
            .and_then(|s| start.checked_add(s))
        else {
            continue;
        };
        if end + TRAILER_LEN > footer_at {
            continue;
        }
        let trailer = block_trailer(kind, &table[start..end]);
        table[end..end + TRAILER_LEN].copy_from_slice(&trailer);
    }
    let crc = crc32fast::hash(&table[footer_at..footer_at + 52]);
    table[footer_at + 52..footer_at + 56].copy_from_slice(&crc.to_le_bytes());
}

/// Opens `table` from memory and reads it every way a store does: gets of
/// `keys` at two snapshots, and a scan (at most `max_entries`), with and
/// without a seek. Returns how many reads answered without an error.
pub fn exercise(table: Vec<u8>, keys: &[&[u8]], max_entries: usize) -> usize {
    let Ok(table) = Table::open(Arc::new(MemFile(table)), "fuzz.sst", 1, None) else {
        return 0;
    };
    let table = Arc::new(table);
    let mut answered = 0;
    for key in keys.iter().filter(|k| !k.is_empty()) {
        for snapshot in [u64::MAX >> 8, 1] {
            answered += usize::from(table.get(key, KeyHash::of(key), snapshot).is_ok());
        }
    }
    for start in [None, keys.first()] {
        let mut it = TableIter::new(Arc::clone(&table), false);
        if let Some(key) = start
            && it.seek(key).is_err()
        {
            continue;
        }
        for entry in it.take(max_entries) {
            match entry {
                Ok(_) => answered += 1,
                Err(_) => break,
            }
        }
    }
    answered
}
