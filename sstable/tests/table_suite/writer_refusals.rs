//! The writer's refusals (FORMAT.md, "Limits"; "Entries and their
//! order"): an entry out of table order (the kind never breaks a tie of
//! user key and sequence; a key that is a prefix of the one before sorts
//! before it), an empty or too long key, a too long value, a sequence past
//! 56 bits, a format version it does not write, a table of no entries.
//! Each is its own typed error from `add` or `finish`, and a refused
//! entry leaves no trace: offered in blocks of one entry, right after a
//! block was cut (when that block's separator still waits for the next
//! user key), the table finished afterwards holds exactly the accepted
//! entries, with their separators, properties and filter, in both
//! format versions.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm_filter::{Filter, FilterKind, KeyHash};
use bloomlsm_sstable::{
    EntryKind, Error, MAX_SEQUENCE, Outcome, Table, TableBuilder, TableIter, TableOptions,
};

use EntryKind::{Delete, Put};

fn options(version: u32) -> TableOptions {
    TableOptions {
        block_size: 1,
        max_key_bytes: 4,
        max_value_bytes: 3,
        format_version: version,
        ..common::options(Some(FilterKind::Blocked), 1)
    }
}

/// An entry offered to `add`: user key, sequence, kind, value.
type Offered<'a> = (&'a [u8], u64, EntryKind, &'a [u8]);

/// What `add` must say of an entry.
enum Want {
    Accepted,
    OutOfOrder,
    KeyTooLarge(usize),
    ValueTooLarge(usize),
    SequenceTooLarge,
}

fn check(got: Result<(), Error>, want: &Want, entry: &Offered) {
    let (key, seq, _, _) = *entry;
    match (got, want) {
        (Ok(()), Want::Accepted) => {}
        (Err(Error::OutOfOrder { key: k, seq: s, .. }), Want::OutOfOrder) => {
            assert_eq!((k.as_slice(), s), (key, seq));
        }
        (Err(Error::TooLarge { what, len, max }), Want::KeyTooLarge(n)) => {
            assert_eq!((what, len, max), ("key", *n, 4));
        }
        (Err(Error::TooLarge { what, len, max }), Want::ValueTooLarge(n)) => {
            assert_eq!((what, len, max), ("value", *n, 3));
        }
        (Err(Error::SequenceTooLarge(s)), Want::SequenceTooLarge) => assert_eq!(s, seq),
        (got, _) => panic!("{entry:?}: {got:?}"),
    }
}

#[test]
fn refused_entries_leave_no_trace() {
    let offered: Vec<(Offered, Want)> = vec![
        ((b"a", 9, Put, b"a9"), Want::Accepted),
        ((b"", 8, Put, b""), Want::KeyTooLarge(0)),
        ((b"abcde", 8, Put, b""), Want::KeyTooLarge(5)),
        ((b"a", 8, Put, b"toolong"), Want::ValueTooLarge(7)),
        ((b"a", MAX_SEQUENCE + 1, Put, b""), Want::SequenceTooLarge),
        ((b"k", 5, Put, b"k5"), Want::Accepted),
        // The same user key and sequence: the kind breaks no tie.
        ((b"k", 5, Delete, b""), Want::OutOfOrder),
        ((b"k", 5, Put, b"k5"), Want::OutOfOrder),
        // A newer version after an older one; a smaller user key.
        ((b"k", 6, Put, b""), Want::OutOfOrder),
        ((b"j\xff", 1, Put, b""), Want::OutOfOrder),
        ((b"k", 4, Delete, b""), Want::Accepted),
        ((b"k\xff", 7, Put, b"x"), Want::Accepted),
        // A prefix of the key before sorts before it.
        ((b"k", 0, Put, b""), Want::OutOfOrder),
        ((b"k\xff\x00", 0, Put, b"z"), Want::Accepted),
        ((b"k\xff\x00", 0, Put, b"z"), Want::OutOfOrder),
        ((b"k\xff", 1, Put, b""), Want::OutOfOrder),
    ];
    let accepted: Vec<_> = offered
        .iter()
        .filter(|(_, w)| matches!(w, Want::Accepted))
        .map(|(e, _)| *e)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for version in [1, 2] {
        let path = dir.path().join(format!("v{version}.sst"));
        let file = std::fs::File::create(&path).unwrap();
        let mut b = TableBuilder::new(file, &path, options(version));
        for (entry, want) in &offered {
            let &(key, seq, kind, value) = entry;
            check(b.add(key, seq, kind, value), want, entry);
        }
        assert_eq!(b.entries(), accepted.len() as u64);
        assert_eq!(b.distinct_keys(), 4);
        let summary = b.finish().unwrap();
        let p = &summary.properties;
        assert_eq!((p.entries, p.distinct_keys, p.tombstones), (5, 4, 1));
        assert_eq!((p.smallest_seq, p.largest_seq), (0, 9));
        assert_eq!(
            (p.smallest_key.as_slice(), p.largest_key.as_slice()),
            (&b"a"[..], &b"k\xff\x00"[..])
        );
        assert_eq!(p.data_blocks, 5, "one block an entry");

        let table = Arc::new(Table::open_path(&path, 1, None).unwrap());
        assert_eq!(table.filter().unwrap().len(), 4);
        let scanned: Vec<_> = TableIter::new(Arc::clone(&table), false)
            .map(|e| e.unwrap())
            .map(|e| (e.user_key, e.seq, e.kind, e.value))
            .collect();
        let want: Vec<_> = accepted
            .iter()
            .map(|&(k, s, kind, v)| (k.to_vec(), s, kind, v.to_vec()))
            .collect();
        assert_eq!(scanned, want, "version {version}");
        for &(key, seq, kind, value) in &accepted {
            let got = table.get(key, KeyHash::of(key), seq).unwrap().outcome;
            let value = (kind == Put).then(|| value.to_vec());
            assert_eq!(got, Outcome::Found { seq, value }, "{key:?}@{seq}");
        }
        // Refused keys were never added: the table does not hold them.
        for key in [&b"j\xff"[..], b"abcde"] {
            let got = table.get(key, KeyHash::of(key), MAX_SEQUENCE).unwrap();
            assert!(
                !matches!(got.outcome, Outcome::Found { .. }),
                "{key:?}: {got:?}"
            );
        }
    }
}

#[test]
fn unwritten_versions_and_empty_tables_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    for version in [0, 3, u32::MAX] {
        let file = std::fs::File::create(&path).unwrap();
        let mut b = TableBuilder::new(file, &path, options(version));
        match b.add(b"a", 1, Put, b"") {
            Err(Error::UnsupportedVersion {
                version: v,
                supported: 2,
                ..
            }) => assert_eq!(v, version),
            other => panic!("version {version}: {other:?}"),
        }
        assert!(matches!(b.finish(), Err(Error::EmptyTable)));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
    // Only refused entries: still a table of no entries, and no bytes.
    let file = std::fs::File::create(&path).unwrap();
    let mut b = TableBuilder::new(file, &path, options(2));
    assert!(b.add(b"", 1, Put, b"").is_err());
    assert!(b.add(b"a", MAX_SEQUENCE + 1, Put, b"").is_err());
    assert!(matches!(b.finish(), Err(Error::EmptyTable)));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    // The limits are the writer's: a 4-byte key and 3-byte value pass.
    let file = std::fs::File::create(&path).unwrap();
    let mut b = TableBuilder::new(file, &path, options(2));
    b.add(b"abcd", MAX_SEQUENCE, Put, b"xyz").unwrap();
    let summary = b.finish().unwrap();
    assert_eq!(summary.properties.largest_seq, MAX_SEQUENCE);
}
