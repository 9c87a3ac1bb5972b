//! What a failed read says: the table file, and which read of it failed
//! (the block's kind and offset), as a damaged block's error does and as
//! a failed filter read's does (`write_stop_filter_read.rs`): "I/O error
//! on <table>: <errno text>" alone does not say which read failed. It
//! stays the I/O error it is: `EIO` in `raw_os_error`, never corruption.

use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, ReadFault};
use bloomlsm::sstable::{BlockReadError, ReopenError};
use bloomlsm::{Db, Error, Options};

use super::harness::{EIO, is_read_error};
use crate::common::short_key;

fn options() -> Options {
    Options {
        block_size: 256,
        block_cache_bytes: 0,
        background_work: false,
        ..Options::default()
    }
}

/// A store of one table (keys 0..300, many data blocks), then another
/// (keys 300..600).
fn two_tables(fs: &FaultFs, dir: &std::path::Path) -> Db {
    let db = Db::open_with_fs(dir, options(), Arc::new(fs.clone())).unwrap();
    for half in 0..2 {
        for i in half * 300..half * 300 + 300 {
            db.put(&short_key(i), format!("value {i}").as_bytes())
                .unwrap();
        }
        db.flush().unwrap();
    }
    db
}

/// The offset `e` names for a `kind` block: its message says "<kind>
/// block at offset <n>".
fn named_offset(e: &Error, kind: &str) -> Option<u64> {
    let text = e.to_string();
    let at = text.find(&format!("{kind} block at offset "))? + kind.len() + 17;
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The typed reason of a failed block read: the I/O error's payload
/// (`get_ref`; its `source()` skips it).
fn block_read(e: &Error) -> Option<&BlockReadError> {
    let (Error::Io { source, .. } | Error::Table(bloomlsm::sstable::Error::Io { source, .. })) = e
    else {
        return None;
    };
    source.get_ref()?.downcast_ref()
}

fn assert_names(e: &Error, kind: &str, ctx: &str) -> u64 {
    assert!(is_read_error(e), "{ctx}: {e}");
    assert!(!e.is_corruption(), "{ctx}: an EIO is not damage: {e}");
    assert_eq!(e.raw_os_error(), Some(EIO), "{ctx}: {e:?}");
    let offset =
        named_offset(e, kind).unwrap_or_else(|| panic!("{ctx}: names no {kind} block: {e}"));
    // The same, typed.
    let typed = block_read(e).unwrap_or_else(|| panic!("{ctx}: no BlockReadError: {e:?}"));
    assert_eq!(
        (
            typed.kind.to_string(),
            typed.offset,
            typed.source.raw_os_error()
        ),
        (kind.to_string(), offset, Some(EIO)),
        "{ctx}: {e:?}"
    );
    offset
}

#[test]
fn a_failed_block_read_names_the_table_the_block_and_its_offset() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    let db = two_tables(&fs, dir.path());
    // A get: the first key's block is the table's first.
    fs.fail_reads(ReadFault::Only(fs.reads()));
    let e = db.get(&short_key(0)).unwrap_err();
    assert_eq!(assert_names(&e, "data", "get"), 0);
    // The last key's block is further in.
    fs.fail_reads(ReadFault::Only(fs.reads()));
    let e = db.get(&short_key(299)).unwrap_err();
    assert!(assert_names(&e, "data", "get") > 0, "{e}");
    // An iterator, past its first block.
    let mut it = db.scan(short_key(0)..).unwrap();
    it.next().unwrap().unwrap();
    fs.fail_reads(ReadFault::From(fs.reads()));
    let e = it.find_map(Result::err).unwrap();
    assert_names(&e, "data", "scan");
    fs.heal();
    // A compaction's input, read ahead in bulk.
    fs.fail_reads(ReadFault::Only(fs.reads()));
    let e = db.compact().unwrap_err();
    assert_eq!(assert_names(&e, "data", "compaction"), 0);
    fs.heal();
    drop(db);
    // The reads of a table's open: footer, properties, index.
    for (k, kind) in [(0, "footer"), (1, "properties"), (2, "index")] {
        fs.fail_reads(ReadFault::Only(fs.reads() + k));
        let e = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap_err();
        assert_names(&e, kind, "open");
        fs.heal();
    }
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    for i in 0..600 {
        assert_eq!(
            db.get(&short_key(i)).unwrap(),
            Some(format!("value {i}").into_bytes())
        );
    }
}

/// Under `max_open_files`, a read of a table whose file the bound closed
/// reopens it first; when that reopen fails (`EMFILE` at the descriptor
/// limit, `EIO`), the error names the reopen of the table file, typed
/// (`bloomlsm::sstable::ReopenError`), never a block: no block was read.
/// It was once "reading the data block at offset 0: ...", which sent the
/// reader looking for a bad sector.
#[test]
fn a_failed_reopen_names_the_table_file_and_its_reopen_not_a_block() {
    let dir = crate::common::scratch_dir();
    let fs = FaultFs::new();
    drop(two_tables(&fs, dir.path()));
    let options = Options {
        max_open_files: Some(1),
        ..options()
    };
    let db = Db::open_with_fs(dir.path(), options, Arc::new(fs.clone())).unwrap();
    // The set holds the second table's file: the first's must be reopened.
    db.get(&short_key(599)).unwrap().unwrap();
    let mut failures = Vec::new();
    fs.fail_read_opens(ReadFault::Only(fs.read_opens()));
    failures.push(("get", db.get(&short_key(0)).unwrap_err()));
    // An iterator's first read of the first table, and a compaction's.
    db.get(&short_key(599)).unwrap().unwrap();
    fs.fail_read_opens(ReadFault::Only(fs.read_opens()));
    // The scan's seek may read the table's first block, or its first next.
    let scanned = db
        .scan(short_key(0)..)
        .and_then(|mut it| it.find_map(Result::err).map_or(Ok(()), Err));
    failures.push(("scan", scanned.unwrap_err()));
    db.get(&short_key(599)).unwrap().unwrap();
    fs.fail_read_opens(ReadFault::Only(fs.read_opens()));
    failures.push(("compaction", db.compact().unwrap_err()));
    fs.heal();
    // The first table (the lowest number) holds key 0.
    let first = crate::common::listing(dir.path())
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    for (what, e) in &failures {
        assert!(is_read_error(e), "{what}: {e}");
        assert!(!e.is_corruption(), "{what}: {e}");
        assert_eq!(e.raw_os_error(), Some(EIO), "{what}: {e:?}");
        let text = e.to_string();
        assert!(!text.contains("block"), "{what}: blames a block: {e}");
        assert!(
            text.contains("reopening the table file"),
            "{what}: does not name the reopen: {e}"
        );
        assert!(block_read(e).is_none(), "{what}: {e:?}");
        let (Error::Table(bloomlsm::sstable::Error::Io { path, source })
        | Error::Io { path, source }) = e
        else {
            panic!("{what}: {e:?}");
        };
        assert_eq!(path, &dir.path().join(&first), "{what}: {e}");
        let reopen = source
            .get_ref()
            .and_then(|r| r.downcast_ref::<ReopenError>())
            .unwrap_or_else(|| panic!("{what}: no ReopenError: {e:?}"));
        assert_eq!(reopen.source.raw_os_error(), Some(EIO), "{what}");
    }
    assert_eq!(db.get(&short_key(0)).unwrap(), Some(b"value 0".to_vec()));
}
