//! Every check of the table reader, hit with hand-built bad bytes: each
//! gives exactly its typed reason, inside an `Error::Corruption` that names
//! the block kind and offset (or a `FilterStatus::Unusable` for the filter).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::error::Error as _;
use std::io;
use std::sync::Arc;

use bloomlsm_filter::{FilterError, KeyHash};
use bloomlsm_sstable::format::{
    FOOTER_LEN, FORMAT_VERSION, OLDEST_FORMAT_VERSION, TRAILER_LEN, block_trailer,
};
use bloomlsm_sstable::{
    BlockError, BlockHandle, BlockKind, CorruptionReason, Error, FilterLoadError, FilterStatus,
    Footer, FooterError, Outcome, PropertiesError, RandomAccessFile, Table, TableIter,
    TableProperties,
};
use common::properties::unfiltered;

/// Kind tag of a put (FORMAT.md, "Entries and their order").
const PUT: u8 = 1;

/// An internal key: user key, then the tag `(seq << 8) | kind`.
fn ikey(user: &[u8], seq: u64, kind: u8) -> Vec<u8> {
    let mut k = user.to_vec();
    k.extend_from_slice(&((seq << 8) | u64::from(kind)).to_le_bytes());
    k
}

/// A block of full-key entries with a restart at each; one-byte varints
/// (REQUIRES: keys and values under 128 bytes).
fn block(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut restarts = Vec::new();
    for (key, value) in entries {
        restarts.push(out.len() as u32);
        out.extend_from_slice(&[0, key.len() as u8, value.len() as u8]);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
    }
    for r in &restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
    out
}

fn handle_bytes(h: BlockHandle) -> Vec<u8> {
    let mut v = Vec::new();
    h.encode_to(&mut v);
    v
}

/// A table file put together block by block; each part may be replaced.
struct Assembly {
    /// Data blocks (without trailers), each with the internal key its
    /// index entry names.
    data: Vec<(Vec<u8>, Vec<u8>)>,
    /// The filter block, if any.
    filter: Option<Vec<u8>>,
    /// The index block; `None` builds a good one from the data handles.
    index: Option<Vec<u8>>,
    /// The trailer kind written after the index (Index unless a test lies).
    index_trailer: BlockKind,
    /// The footer's format version: version 1 unless a test says
    /// otherwise, since the index blocks built here have version 1's
    /// layout (a data block).
    version: u32,
    /// The properties block.
    properties: Vec<u8>,
}

/// What an assembly produced: the file and where its blocks are.
struct Assembled {
    bytes: Vec<u8>,
    footer: Footer,
    data: Vec<BlockHandle>,
}

impl Assembly {
    /// One data block holding `("m", seq 1, put) -> "v"`.
    fn good() -> Self {
        let key = ikey(b"m", 1, PUT);
        Self::with_data(vec![(key.clone(), block(&[(&key, b"v")]))])
    }

    fn with_data(data: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        // The properties count the data blocks as a writer does.
        let properties = TableProperties {
            data_blocks: data.len() as u64,
            data_bytes: data
                .iter()
                .map(|(_, b)| (b.len() + TRAILER_LEN) as u64)
                .sum(),
            ..unfiltered()
        };
        Self {
            data,
            filter: None,
            index: None,
            index_trailer: BlockKind::Index,
            version: OLDEST_FORMAT_VERSION,
            properties: properties.encode(),
        }
    }

    fn assemble(self) -> Assembled {
        let mut bytes = Vec::new();
        let mut push = |kind: BlockKind, block: &[u8]| {
            let handle = BlockHandle {
                offset: bytes.len() as u64,
                size: block.len() as u64,
            };
            bytes.extend_from_slice(block);
            bytes.extend_from_slice(&block_trailer(kind, block));
            handle
        };
        let data: Vec<_> = self
            .data
            .iter()
            .map(|(_, b)| push(BlockKind::Data, b))
            .collect();
        let filter = self
            .filter
            .as_deref()
            .map_or(BlockHandle::default(), |f| push(BlockKind::Filter, f));
        let index = self.index.unwrap_or_else(|| {
            let values: Vec<_> = data.iter().map(|h| handle_bytes(*h)).collect();
            let entries: Vec<(&[u8], &[u8])> = self
                .data
                .iter()
                .zip(&values)
                .map(|((k, _), v)| (k.as_slice(), v.as_slice()))
                .collect();
            block(&entries)
        });
        let index = push(self.index_trailer, &index);
        let properties = push(BlockKind::Properties, &self.properties);
        let footer = Footer {
            filter,
            index,
            properties,
            version: self.version,
        };
        bytes.extend_from_slice(&footer.encode());
        Assembled {
            bytes,
            footer,
            data,
        }
    }
}

/// Table bytes in memory; a read starting at `fail_at` fails.
#[derive(Debug)]
struct MemFile {
    bytes: Vec<u8>,
    fail_at: Option<u64>,
}

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.fail_at == Some(offset) {
            return Err(io::Error::other("injected read error"));
        }
        let start = offset as usize;
        let src = self
            .bytes
            .get(start..start + buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }
}

fn open_failing(bytes: Vec<u8>, fail_at: Option<u64>) -> Result<Table, Error> {
    Table::open(Arc::new(MemFile { bytes, fail_at }), "t.sst", 1, None)
}

fn open(bytes: Vec<u8>) -> Result<Table, Error> {
    open_failing(bytes, None)
}

/// The kind, offset and reason of a corruption error (panics on others).
fn corruption(result: Result<impl std::fmt::Debug, Error>) -> (BlockKind, u64, CorruptionReason) {
    match result {
        Err(Error::Corruption {
            kind,
            offset,
            reason,
            ..
        }) => (kind, offset, reason),
        other => panic!("expected a corruption error, got {other:?}"),
    }
}

fn get(table: &Table, key: &[u8]) -> bloomlsm_sstable::Result<Outcome> {
    table
        .get(key, KeyHash::of(key), u64::MAX >> 8)
        .map(|l| l.outcome)
}

fn first_entry(table: Table) -> bloomlsm_sstable::Result<bloomlsm_sstable::Entry> {
    TableIter::new(Arc::new(table), false).next().unwrap()
}

#[test]
fn the_hand_built_table_reads() {
    let t = Assembly::good().assemble();
    let table = open(t.bytes).unwrap();
    assert!(matches!(table.filter_status(), FilterStatus::Absent));
    assert_eq!(
        get(&table, b"m").unwrap(),
        Outcome::Found {
            seq: 1,
            value: Some(b"v".to_vec())
        }
    );
    assert_eq!(first_entry(table).unwrap().user_key, b"m");
}

#[test]
fn unknown_format_versions_are_refused_by_name() {
    for version in [0, FORMAT_VERSION + 1] {
        let t = Assembly {
            version,
            ..Assembly::good()
        }
        .assemble();
        let err = open(t.bytes).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedVersion { version: v, supported: FORMAT_VERSION, .. } if v == version),
            "{err:?}"
        );
        assert!(
            err.to_string().ends_with(&format!(
                "has format version {version}; this build reads versions 1 to 2"
            )),
            "{err}"
        );
    }
}

#[test]
fn footer_errors() {
    let good = Assembly::good().assemble().bytes;
    let footer_at = (good.len() - FOOTER_LEN) as u64;
    let footer = |r| CorruptionReason::Footer(r);

    let short = good[good.len() - 10..].to_vec();
    assert_eq!(
        corruption(open(short)),
        (BlockKind::Footer, 0, footer(FooterError::Length(10)))
    );

    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 0xff;
    let (kind, offset, reason) = corruption(open(bad));
    assert_eq!((kind, offset), (BlockKind::Footer, footer_at));
    assert!(
        matches!(reason, CorruptionReason::Footer(FooterError::BadMagic(_))),
        "{reason:?}"
    );

    let mut bad = good.clone();
    bad[footer_at as usize] ^= 1;
    let (kind, offset, reason) = corruption(open(bad));
    assert_eq!((kind, offset), (BlockKind::Footer, footer_at));
    assert!(
        matches!(
            reason,
            CorruptionReason::Footer(FooterError::Checksum { .. })
        ),
        "{reason:?}"
    );
}

#[test]
fn trailer_and_handle_errors() {
    // An index block followed by a data block's trailer.
    let t = Assembly {
        index_trailer: BlockKind::Data,
        ..Assembly::good()
    }
    .assemble();
    assert_eq!(
        corruption(open(t.bytes)),
        (
            BlockKind::Index,
            t.footer.index.offset,
            CorruptionReason::Block(BlockError::WrongType {
                found: BlockKind::Data.type_byte(),
                expected: BlockKind::Index
            })
        )
    );

    // A flipped byte inside the index block.
    let t = Assembly::good().assemble();
    let mut bytes = t.bytes;
    bytes[t.footer.index.offset as usize] ^= 1;
    let (kind, offset, reason) = corruption(open(bytes));
    assert_eq!((kind, offset), (BlockKind::Index, t.footer.index.offset));
    assert!(
        matches!(
            reason,
            CorruptionReason::Block(BlockError::ChecksumMismatch { .. })
        ),
        "{reason:?}"
    );

    // A footer whose properties handle reaches into the footer.
    let t = Assembly::good().assemble();
    let limit = (t.bytes.len() - FOOTER_LEN) as u64;
    let handle = BlockHandle {
        size: t.footer.properties.size + 1,
        ..t.footer.properties
    };
    let mut bytes = t.bytes;
    bytes.truncate(limit as usize);
    bytes.extend_from_slice(
        &Footer {
            properties: handle,
            ..t.footer
        }
        .encode(),
    );
    assert_eq!(
        corruption(open(bytes)),
        (
            BlockKind::Properties,
            handle.offset,
            CorruptionReason::Block(BlockError::PastEnd { handle, limit })
        )
    );
}

#[test]
fn properties_errors() {
    let cases = [
        (
            {
                let mut p = unfiltered().encode();
                p.push(0);
                p
            },
            PropertiesError::TrailingBytes(1),
        ),
        (
            TableProperties {
                format_version: 2,
                ..unfiltered()
            }
            .encode(),
            PropertiesError::Version(2),
        ),
        (
            b"abc".to_vec(),
            PropertiesError::Truncated {
                field: "format version",
                len: 3,
            },
        ),
        (
            TableProperties {
                tombstones: 2,
                ..unfiltered()
            }
            .encode(),
            PropertiesError::Counts {
                entries: 1,
                distinct_keys: 1,
                tombstones: 2,
                data_bytes: 1,
            },
        ),
    ];
    for (block, expected) in cases {
        let t = Assembly {
            properties: block,
            ..Assembly::good()
        }
        .assemble();
        assert_eq!(
            corruption(open(t.bytes)),
            (
                BlockKind::Properties,
                t.footer.properties.offset,
                CorruptionReason::Properties(expected)
            )
        );
    }
}

#[test]
fn index_errors() {
    // Where the one data block of `Assembly::good()` is.
    let data = Assembly::good().assemble().data[0];
    let handle = handle_bytes(data);
    let key = ikey(b"m", 1, PUT);
    let misplaced = BlockHandle { offset: 1, ..data };
    let past_end = BlockHandle {
        size: data.size + 1000,
        ..data
    };
    let cases: Vec<(Vec<u8>, BlockError)> = vec![
        (vec![0, 0, 0, 0], BlockError::NoRestarts),
        (
            block(&[(b"abc", &handle)]),
            BlockError::KeyShorterThanTag { offset: 0, len: 3 },
        ),
        (
            block(&[(&key, &handle[..15])]),
            BlockError::HandleLength { offset: 0, len: 15 },
        ),
        (
            block(&[(&key, &handle_bytes(misplaced))]),
            BlockError::HandleMisplaced {
                offset: 0,
                handle: misplaced,
                expected: 0,
            },
        ),
    ];
    for (index, expected) in cases {
        let t = Assembly {
            index: Some(index),
            ..Assembly::good()
        }
        .assemble();
        assert_eq!(
            corruption(open(t.bytes)),
            (
                BlockKind::Index,
                t.footer.index.offset,
                CorruptionReason::Block(expected)
            )
        );
    }

    // A handle that runs into the index block and beyond.
    let t = Assembly {
        index: Some(block(&[(&key, &handle_bytes(past_end))])),
        ..Assembly::good()
    }
    .assemble();
    let limit = (t.bytes.len() - FOOTER_LEN) as u64;
    assert_eq!(
        corruption(open(t.bytes)),
        (
            BlockKind::Index,
            t.footer.index.offset,
            CorruptionReason::Block(BlockError::PastEnd {
                handle: past_end,
                limit
            })
        )
    );

    // Two data blocks whose index keys are in the wrong order.
    let data_block = |user: &[u8]| (ikey(user, 1, PUT), block(&[(&ikey(user, 1, PUT), b"v")]));
    let two = || Assembly::with_data(vec![data_block(b"m0"), data_block(b"m1")]);
    let handles = two().assemble().data;
    let (k1, k0) = (ikey(b"m1", 1, PUT), ikey(b"m0", 1, PUT));
    let (h0, h1) = (handle_bytes(handles[0]), handle_bytes(handles[1]));
    let index = block(&[(&k1, &h0), (&k0, &h1)]);
    let second_entry = 3 + k1.len() + h0.len();
    let t = Assembly {
        index: Some(index),
        ..two()
    }
    .assemble();
    assert_eq!(
        corruption(open(t.bytes)),
        (
            BlockKind::Index,
            t.footer.index.offset,
            CorruptionReason::Block(BlockError::IndexOutOfOrder {
                offset: second_entry
            })
        )
    );

    // Version 2's index (FORMAT.md "Index block"): a good one reads; each
    // damage is named with the entry's offset in the block.
    let v2 = |entries: &[(u64, u64, &[u8], u64, u64)]| {
        let mut out = Vec::new();
        for &(shared, unshared, delta, seq, size) in entries {
            for v in [shared, unshared] {
                varint(&mut out, v);
            }
            out.extend_from_slice(delta);
            for v in [seq, size] {
                varint(&mut out, v);
            }
        }
        out
    };
    let with_v2 = |index: Vec<u8>| {
        Assembly {
            index: Some(index),
            version: FORMAT_VERSION,
            ..two()
        }
        .assemble()
    };
    let (s0, s1) = (handles[0].size, handles[1].size);
    let t = with_v2(v2(&[(0, 2, b"m0", 0, s0), (1, 1, b"1", 0, s1)]));
    let table = open(t.bytes).unwrap();
    assert_eq!(
        get(&table, b"m1").unwrap(),
        Outcome::Found {
            seq: 1,
            value: Some(b"v".to_vec())
        }
    );
    let second = v2(&[(0, 2, b"m0", 0, s0)]).len();
    let cases: Vec<(Vec<u8>, BlockError)> = vec![
        (Vec::new(), BlockError::NoEntries),
        (
            v2(&[(0, 2, b"m0", 0, s0), (3, 1, b"1", 0, s1)]),
            BlockError::SharesTooMuch {
                offset: second,
                shared: 3,
                previous_len: 2,
            },
        ),
        (
            v2(&[(0, 2, b"m1", 0, s0), (1, 1, b"0", 0, s1)]),
            BlockError::IndexOutOfOrder { offset: second },
        ),
        (
            v2(&[(0, 2, b"m0", 0, s0), (1, 9, b"1", 0, s1)]),
            BlockError::MalformedEntry { offset: second },
        ),
    ];
    for (index, expected) in cases {
        let t = with_v2(index);
        assert_eq!(
            corruption(open(t.bytes)),
            (
                BlockKind::Index,
                t.footer.index.offset,
                CorruptionReason::Block(expected)
            )
        );
    }
    // A size that runs into the index block.
    let t = with_v2(v2(&[(0, 2, b"m0", 0, s0), (1, 1, b"1", 0, s1 + 1000)]));
    let limit = (t.bytes.len() - FOOTER_LEN) as u64;
    let past_end = BlockHandle {
        offset: handles[1].offset,
        size: s1 + 1000,
    };
    assert_eq!(
        corruption(open(t.bytes)),
        (
            BlockKind::Index,
            t.footer.index.offset,
            CorruptionReason::Block(BlockError::PastEnd {
                handle: past_end,
                limit
            })
        )
    );
}

/// Appends `v` as an unsigned LEB128 varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The first error a scan of `table` meets.
fn scan_error(table: Table) -> bloomlsm_sstable::Result<()> {
    for entry in TableIter::new(Arc::new(table), false) {
        entry?;
    }
    Ok(())
}

#[test]
fn data_block_errors() {
    // Table of two data blocks; the second holds a good entry, then `bad`.
    let with_bad_entry = |bad: &[u8]| {
        let good = ikey(b"a", 2, PUT);
        let first = (good.clone(), block(&[(&good, b"v")]));
        let l = ikey(b"l", 1, PUT);
        let second = (ikey(b"m", 1, PUT), block(&[(&l, b"v"), (bad, b"v")]));
        let t = Assembly::with_data(vec![first, second]).assemble();
        let at = t.data[1].offset;
        (open(t.bytes).unwrap(), at, 3 + l.len() + 1)
    };
    // A tag naming kind 7, which does not exist: found by get and by scan.
    let (table, at, offset) = with_bad_entry(&ikey(b"m", 1, 7));
    let unknown = CorruptionReason::Block(BlockError::UnknownEntryKind { offset, tag: 7 });
    assert_eq!(
        corruption(get(&table, b"m")),
        (BlockKind::Data, at, unknown.clone())
    );
    assert_eq!(
        corruption(scan_error(table)),
        (BlockKind::Data, at, unknown)
    );

    // A key shorter than its tag (at a restart: found by the binary search).
    let (table, at, offset) = with_bad_entry(b"mm");
    let short = CorruptionReason::Block(BlockError::KeyShorterThanTag { offset, len: 2 });
    assert_eq!(
        corruption(get(&table, b"m")),
        (BlockKind::Data, at, short.clone())
    );
    assert_eq!(corruption(scan_error(table)), (BlockKind::Data, at, short));

    // A block the block decoder refuses, and an entry that runs past the
    // entries (its value length says 9, one byte follows).
    let cases = [
        (vec![0, 0, 0, 0, 1, 0, 0, 0], BlockError::NoEntries),
        (
            {
                let key = ikey(b"m", 1, PUT);
                let mut b = vec![0, key.len() as u8, 9];
                b.extend_from_slice(&key);
                b.extend_from_slice(&[b'v', 0, 0, 0, 0, 1, 0, 0, 0]);
                b
            },
            BlockError::MalformedEntry { offset: 0 },
        ),
    ];
    for (data, expected) in cases {
        let key = ikey(b"m", 1, PUT);
        let table = open(Assembly::with_data(vec![(key, data)]).assemble().bytes).unwrap();
        let expected = (BlockKind::Data, 0, CorruptionReason::Block(expected));
        assert_eq!(corruption(get(&table, b"m")), expected);
        assert_eq!(corruption(scan_error(table)), expected);
    }
}

#[test]
fn filter_errors_disable_the_filter_and_say_why() {
    let with_filter = |filter: &[u8]| {
        Assembly {
            filter: Some(filter.to_vec()),
            ..Assembly::good()
        }
        .assemble()
    };
    let status = |table: &Table| match table.filter_status() {
        FilterStatus::Unusable(reason) => {
            // The table still reads, without its filter.
            assert_eq!(
                get(table, b"m").unwrap(),
                Outcome::Found {
                    seq: 1,
                    value: Some(b"v".to_vec())
                }
            );
            format!("{reason}")
        }
        other => panic!("filter not unusable: {other:?}"),
    };

    // An intact block that is not a filter.
    let t = with_filter(b"not a filter");
    let at = t.footer.filter.offset;
    let table = open(t.bytes).unwrap();
    let message = status(&table);
    let FilterStatus::Unusable(reason) = table.filter_status() else {
        unreachable!()
    };
    assert!(
        matches!(reason, FilterLoadError::Decode { offset, .. } if *offset == at),
        "{reason:?}"
    );
    assert_eq!(reason.offset(), at);
    assert!(reason.source().unwrap().is::<FilterError>());
    assert!(
        message.starts_with(&format!("filter block at offset {at} does not decode: ")),
        "{message}"
    );

    // A damaged trailer.
    let t = with_filter(b"not a filter");
    let mut bytes = t.bytes;
    bytes[at as usize] ^= 1;
    let table = open(bytes).unwrap();
    status(&table);
    assert!(
        matches!(
            table.filter_status(),
            FilterStatus::Unusable(FilterLoadError::Block {
                offset,
                source: BlockError::ChecksumMismatch { .. }
            }) if *offset == at
        ),
        "{:?}",
        table.filter_status()
    );

    // A filter handle past the blocks.
    let t = with_filter(b"not a filter");
    let limit = (t.bytes.len() - FOOTER_LEN) as u64;
    let handle = BlockHandle {
        offset: at,
        size: limit,
    };
    let mut bytes = t.bytes;
    bytes.truncate(limit as usize);
    bytes.extend_from_slice(
        &Footer {
            filter: handle,
            ..t.footer
        }
        .encode(),
    );
    let table = open(bytes).unwrap();
    status(&table);
    assert!(
        matches!(
            table.filter_status(),
            FilterStatus::Unusable(FilterLoadError::Block {
                source: BlockError::PastEnd { handle: h, limit: l },
                ..
            }) if *h == handle && *l == limit
        ),
        "{:?}",
        table.filter_status()
    );

    // A read of the filter block that fails.
    let t = with_filter(b"not a filter");
    let table = open_failing(t.bytes, Some(at)).unwrap();
    assert!(
        matches!(
            table.filter_status(),
            FilterStatus::Unusable(FilterLoadError::Read { offset, .. }) if *offset == at
        ),
        "{:?}",
        table.filter_status()
    );
}

#[test]
fn a_corruption_reads_as_one_sentence_and_keeps_its_typed_cause() {
    let t = Assembly::good().assemble();
    let mut bytes = t.bytes;
    bytes[t.footer.index.offset as usize] ^= 1;
    let err = open(bytes).unwrap_err();
    let message = err.to_string();
    let prefix = format!(
        "corrupt table t.sst: index block at offset {}: checksum mismatch: stored 0x",
        t.footer.index.offset
    );
    assert!(message.starts_with(&prefix), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
    let cause = err
        .source()
        .and_then(|s| s.downcast_ref::<CorruptionReason>())
        .unwrap();
    assert!(
        matches!(
            cause,
            CorruptionReason::Block(BlockError::ChecksumMismatch { .. })
        ),
        "{cause:?}"
    );
    assert_eq!(
        message,
        format!(
            "corrupt table t.sst: index block at offset {}: {cause}",
            t.footer.index.offset
        )
    );
}
