//! FORMAT.md read as a spec: tables this build writes, of both format
//! versions and every table filter kind, parsed by a reader written here
//! from FORMAT.md alone (no decoder of the crate), field by field, width
//! by width, in the order it states: footer, trailers, data blocks (their
//! restart points and the cut rule), the index block of each version and
//! its separators (the table in "The writer picks each separator"),
//! properties and the filter header. Any field the document gets wrong,
//! or the writer changes, fails here by name.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cmp::Reverse;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{EntryKind, TableOptions};
use common::{Model, write_table};

/// A cursor over FORMAT.md's integers.
struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self { b, at: 0 }
    }
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        s
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take(2).try_into().unwrap())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    /// Unsigned LEB128: 7 bits a byte, low group first.
    fn varint(&mut self) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = self.u8();
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    fn done(&self) -> bool {
        self.at == self.b.len()
    }
}

/// "Block handle (16 bytes)": offset u64, size u64.
fn handle(b: &mut Bytes) -> (u64, u64) {
    (b.u64(), b.u64())
}

/// "Block trailer (5 bytes)": type byte, crc32 of the block then the type
/// byte. Returns the block's bytes.
fn block(file: &[u8], (offset, size): (u64, u64), type_byte: u8) -> &[u8] {
    let (start, end) = (offset as usize, (offset + size) as usize);
    let trailer = &file[end..end + 5];
    assert_eq!(trailer[0], type_byte, "type byte of the block at {offset}");
    let mut h = crc32fast::Hasher::new();
    h.update(&file[start..end]);
    h.update(&[type_byte]);
    let crc = u32::from_le_bytes(trailer[1..5].try_into().unwrap());
    assert_eq!(crc, h.finalize(), "crc32 of the block at {offset}");
    &file[start..end]
}

/// An internal key: the user key, then `(seq << 8) | kind` as a LE u64.
fn split(ikey: &[u8]) -> (Vec<u8>, u64, u8) {
    let (user, tag) = ikey.split_at(ikey.len() - 8);
    let tag = u64::from_le_bytes(tag.try_into().unwrap());
    (user.to_vec(), tag >> 8, (tag & 0xff) as u8)
}

/// One entry of a block in the data block layout: its internal key, its
/// value, its encoded length, and whether it stored its full key.
struct RawEntry {
    key: Vec<u8>,
    value: Vec<u8>,
    len: usize,
    shared: usize,
}

/// "Data block": entries, u32 restart offsets, u32 count (>= 1).
/// Returns the entries and the indexes of the entries restarts point at.
fn data_layout(bytes: &[u8]) -> (Vec<RawEntry>, Vec<usize>) {
    let n = bytes.len();
    let count = u32::from_le_bytes(bytes[n - 4..].try_into().unwrap()) as usize;
    assert!(count >= 1);
    let restarts_at = n - 4 - 4 * count;
    let restarts: Vec<usize> = (0..count)
        .map(|i| {
            let at = restarts_at + 4 * i;
            u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize
        })
        .collect();
    let mut b = Bytes::new(&bytes[..restarts_at]);
    let mut entries = Vec::new();
    let mut offsets = Vec::new();
    let mut key: Vec<u8> = Vec::new();
    while !b.done() {
        let start = b.at;
        let shared = b.varint() as usize;
        let unshared = b.varint() as usize;
        let value_len = b.varint() as usize;
        key.truncate(shared);
        key.extend_from_slice(b.take(unshared));
        let value = b.take(value_len).to_vec();
        offsets.push(start);
        entries.push(RawEntry {
            key: key.clone(),
            value,
            len: b.at - start,
            shared,
        });
    }
    let restart_entries = restarts
        .iter()
        .map(|r| offsets.iter().position(|o| o == r).unwrap())
        .collect();
    (entries, restart_entries)
}

/// The separator FORMAT.md's table gives a block ending at `last` and
/// followed by a block starting with user key `next` (`None`: the last
/// block).
fn expected_separator(last: &(Vec<u8>, u64), next: Option<&[u8]>) -> (Vec<u8>, u64) {
    let (lu, ls) = last;
    match next {
        Some(next) if next == lu.as_slice() => (lu.clone(), *ls),
        Some(next) => {
            // `next`'s prefix one byte past the first difference, when
            // that is shorter than `next`; otherwise (and when `last` is
            // a prefix of `next`) `last` itself.
            let differs = lu.iter().zip(next).position(|(a, b)| a != b);
            let s = match differs {
                Some(d) if d + 1 < next.len() => next[..=d].to_vec(),
                _ => lu.clone(),
            };
            (s, 0)
        }
        None => (lu.clone(), 0),
    }
}

fn model() -> Model {
    let mut model = Model::new();
    let mut seq = 1u64;
    let mut put = |k: &[u8], kind: EntryKind, value_len: usize, model: &mut Model| {
        let value = match kind {
            EntryKind::Put => vec![b'v'; value_len],
            EntryKind::Delete => Vec::new(),
        };
        model.insert((k.to_vec(), Reverse(seq)), (kind, value));
        seq += 1;
    };
    // Neighbours for each row of the separator table.
    for k in [
        &b"ab"[..],
        b"ab1",
        b"abc",
        b"ac",
        b"apple",
        b"apricot",
        b"a\xff\xff\xff",
        b"b",
        b"b\x00\x00",
        b"k",
        b"\xff\xff",
        b"\xff\xff\x00",
        b"\xff\xff\x00\x00",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ] {
        put(k, EntryKind::Put, 3, &mut model);
    }
    // One key's versions over several blocks, a tombstone among them.
    for kind in [
        EntryKind::Put,
        EntryKind::Delete,
        EntryKind::Put,
        EntryKind::Put,
    ] {
        put(b"k", kind, 5, &mut model);
    }
    // Enough entries for several restart points and cut blocks.
    for i in 0..200u32 {
        let kind = if i % 7 == 3 {
            EntryKind::Delete
        } else {
            EntryKind::Put
        };
        put(
            format!("m{:05}", i * 37 % 1000).as_bytes(),
            kind,
            (i % 23) as usize,
            &mut model,
        );
    }
    // A version at sequence 0 (sorted after every other version).
    model.insert(
        (b"k".to_vec(), Reverse(0)),
        (EntryKind::Put, b"zero".to_vec()),
    );
    model
}

const FILTER_SEED: u64 = 0x626c_6f6f_6d6c_736d;

fn read_as_format_md_says(file: &[u8], model: &Model, options: &TableOptions) {
    // Footer (64 bytes at the end).
    let footer_at = file.len() - 64;
    let mut f = Bytes::new(&file[footer_at..]);
    let filter = handle(&mut f);
    let index = handle(&mut f);
    let props = handle(&mut f);
    let version = f.u32();
    let crc = f.u32();
    assert_eq!(crc, crc32fast::hash(&file[footer_at..footer_at + 52]));
    assert_eq!(f.u64(), 0x7473_736d_6f6f_6c62, "magic");
    assert_eq!(&file[file.len() - 8..], b"bloomsst");
    assert_eq!(version, options.format_version);

    // Properties.
    let mut p = Bytes::new(block(file, props, 4));
    assert_eq!(p.u32(), 1, "properties layout version");
    let entries = p.u64();
    let distinct = p.u64();
    let tombstones = p.u64();
    let data_blocks = p.u64();
    let data_bytes = p.u64();
    let (smallest_seq, largest_seq) = (p.u64(), p.u64());
    let filter_kind = p.u8();
    let filter_hash_id = p.u8();
    let filter_k = p.u32();
    let filter_m = p.u64();
    let bits_per_key = f64::from_bits(p.u64());
    let filter_bytes = p.u64();
    let _created = p.u64();
    let smallest = {
        let n = p.u32() as usize;
        p.take(n).to_vec()
    };
    let largest = {
        let n = p.u32() as usize;
        p.take(n).to_vec()
    };
    assert!(p.done(), "bytes after the largest key");

    let users: std::collections::BTreeSet<&Vec<u8>> = model.keys().map(|(k, _)| k).collect();
    assert_eq!(entries, model.len() as u64);
    assert_eq!(distinct, users.len() as u64);
    let deletes = model.values().filter(|(k, _)| *k == EntryKind::Delete);
    assert_eq!(tombstones, deletes.count() as u64);
    let seqs = model.keys().map(|(_, s)| s.0);
    assert_eq!(smallest_seq, seqs.clone().min().unwrap());
    assert_eq!(largest_seq, seqs.max().unwrap());
    assert_eq!(&smallest, *users.first().unwrap());
    assert_eq!(&largest, *users.last().unwrap());

    // Data blocks tile the file from 0; each is cut when it reaches the
    // target size after an entry; a restart at every 16th entry.
    // Where each block is, the index says.
    let mut at = 0u64;
    let mut blocks = Vec::new();
    let index_bytes = block(file, index, 3);
    let mut separators = Vec::new();
    if version == 2 {
        // shared, unshared, delta, sequence, size; offsets tile.
        let mut b = Bytes::new(index_bytes);
        let mut key: Vec<u8> = Vec::new();
        while !b.done() {
            let shared = b.varint() as usize;
            let unshared = b.varint() as usize;
            key.truncate(shared);
            key.extend_from_slice(b.take(unshared));
            let seq = b.varint();
            let size = b.varint();
            separators.push((key.clone(), seq));
            blocks.push((at, size));
            at += size + 5;
        }
    } else {
        // A data block with a restart at every entry; key = separator
        // with kind 1; value = the 16-byte handle, where tiling puts it.
        let (entries, restarts) = data_layout(index_bytes);
        assert_eq!(restarts, (0..entries.len()).collect::<Vec<_>>());
        for e in entries {
            let (user, seq, kind) = split(&e.key);
            assert_eq!(kind, 1, "version 1 separator kind");
            let h = handle(&mut Bytes::new(&e.value));
            assert_eq!(h.0, at, "handle offset");
            separators.push((user, seq));
            blocks.push(h);
            at = h.0 + h.1 + 5;
        }
    }
    assert_eq!(at, data_bytes, "data bytes: where the last block ends");
    assert_eq!(blocks.len() as u64, data_blocks);

    let mut read: Vec<(Vec<u8>, u64, u8, Vec<u8>)> = Vec::new();
    let mut ends = Vec::new();
    for (i, &h) in blocks.iter().enumerate() {
        let bytes = block(file, h, 1);
        let (entries, restarts) = data_layout(bytes);
        let expected: Vec<usize> = (0..entries.len()).step_by(16).collect();
        assert_eq!(restarts, expected, "restarts of block {i}");
        for (j, e) in entries.iter().enumerate() {
            if j % 16 == 0 {
                assert_eq!(e.shared, 0, "restart entry {j} of block {i}");
            }
        }
        if i + 1 < blocks.len() {
            // Cut after the entry that made it reach the target size (the
            // size it would have if finished: entries, restarts, count),
            // and an entry is never split: at least one a block.
            assert!(bytes.len() >= options.block_size, "block {i} cut early");
            if entries.len() > 1 {
                let last = entries.last().unwrap();
                let restart = usize::from((entries.len() - 1) % 16 == 0);
                let before = bytes.len() - last.len - 4 * restart;
                assert!(before < options.block_size, "block {i} cut late");
            }
        }
        for e in &entries {
            let (user, seq, kind) = split(&e.key);
            read.push((user, seq, kind, e.value.clone()));
        }
        let (user, seq, _) = split(&entries.last().unwrap().key);
        ends.push(((user, seq), read.len()));
    }
    let want: Vec<(Vec<u8>, u64, u8, Vec<u8>)> = model
        .iter()
        .map(|((k, s), (kind, v))| {
            // Kinds: 0 delete, 1 put.
            let tag = match kind {
                EntryKind::Delete => 0,
                EntryKind::Put => 1,
            };
            (k.clone(), s.0, tag, v.clone())
        })
        .collect();
    assert_eq!(read, want, "entries in table order");

    // The separator table.
    for (i, (last, next_at)) in ends.iter().enumerate() {
        let next = read.get(*next_at).map(|e| e.0.as_slice());
        assert_eq!(
            separators[i],
            expected_separator(last, next),
            "separator of block {i} ending at {last:?}, next {next:?}"
        );
    }

    // Filter block.
    if !options.has_filter() {
        assert_eq!(filter, (0, 0));
        assert_eq!(filter_kind, 0);
        return;
    }
    let fb = block(file, filter, 2);
    let mut h = Bytes::new(fb);
    assert_eq!(h.u32(), 0x464d_4c42, "filter magic");
    assert_eq!(&fb[..4], b"BLMF");
    let filter_version = h.u16();
    let kind = h.u8();
    assert_eq!(h.u8(), 1, "hash id");
    assert_eq!(h.u64(), FILTER_SEED, "hash seed");
    // The seed's hex spells "bloomlsm" read big-endian; stored
    // little-endian like every integer, its bytes are these.
    assert_eq!(&fb[8..16], b"mslmoolb");
    let k = h.u32();
    let m = h.u64();
    assert_eq!(h.u64(), distinct, "filter items = distinct keys");
    let payload = match kind {
        1 | 2 => m.div_ceil(64) * 8,
        4 => 8 + m / 8,
        other => panic!("filter kind {other} in a table"),
    } as usize;
    let tag = options.filter_kind.tag();
    assert_eq!(kind, tag);
    assert_eq!(filter_version, if tag == 4 { 2 } else { 1 });
    if tag == 2 {
        assert_eq!(m % 512, 0, "blocked m");
    }
    if tag == 4 {
        assert_eq!(m % 128, 0, "ribbon m");
    }
    h.take(payload);
    let crc = h.u32();
    assert_eq!(crc, crc32fast::hash(&fb[..36 + payload]), "filter crc32");
    assert!(h.done(), "filter block ends after its crc32");
    assert_eq!(
        (filter_kind, filter_hash_id, filter_k, filter_m),
        (kind, 1, k, m),
        "properties' filter fields"
    );
    assert_eq!(filter_bytes, filter.1);
    assert_eq!(bits_per_key, options.bits_per_key);
}

#[test]
fn tables_read_as_format_md_says() {
    let model = model();
    let dir = tempfile::tempdir().unwrap();
    for version in [1, 2] {
        for block_size in [1, 64, 300, 4096] {
            for filter in [
                None,
                Some(FilterKind::Standard),
                Some(FilterKind::Blocked),
                Some(FilterKind::Ribbon),
            ] {
                let options = TableOptions {
                    format_version: version,
                    ..common::options(filter, block_size)
                };
                let path = dir.path().join("t.sst");
                write_table(&path, &model, options.clone());
                let file = std::fs::read(&path).unwrap();
                read_as_format_md_says(&file, &model, &options);
            }
        }
    }
}
