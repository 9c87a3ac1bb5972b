//! Opening and what it refuses: locks, read-only, damaged files named by
//! file and offset, failed opens that leave nothing, reopen cycles.

use super::*;

#[test]
fn locked_read_only_and_no_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    for read_only in [false, true] {
        let second = if read_only {
            Db::open_read_only(dir.path(), Options::default())
        } else {
            Db::open(dir.path(), Options::default())
        };
        match second {
            Err(e @ Error::Locked { .. }) => {
                assert!(
                    e.to_string().contains(&*dir.path().to_string_lossy()),
                    "{e}"
                );
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ro.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert!(matches!(ro.put(b"b", b"2"), Err(Error::ReadOnly)));
    assert!(matches!(ro.delete(b"a"), Err(Error::ReadOnly)));
    assert!(matches!(ro.flush(), Err(Error::ReadOnly)));
    assert!(matches!(
        ro.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 5.0 }),
        Err(Error::ReadOnly)
    ));
    let snap = ro.snapshot();
    assert_eq!(snap.get(b"a").unwrap(), Some(b"1".to_vec()));
    drop(snap);
    ro.close().unwrap();
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Db::open_read_only(empty.path(), Options::default()),
        Err(Error::NoManifest { .. })
    ));
    assert!(std::fs::read_dir(empty.path()).unwrap().next().is_none());
}

#[test]
fn corruption_names_the_file_and_offset_and_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        sync: SyncMode::Always,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..50u32 {
        db.put(format!("k{i:03}").as_bytes(), &[i as u8; 100])
            .unwrap();
    }
    drop(db);
    let wal = common::newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&wal, &bytes).unwrap();
    match Db::open(dir.path(), options.clone()) {
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            let text = e.to_string();
            let name = wal.file_name().unwrap().to_string_lossy().into_owned();
            assert!(text.contains(&name) && text.contains("offset"), "{text}");
            let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(e);
            assert!(boxed.source().is_some(), "a Corruption should say why");
        }
        Ok(_) => panic!("damaged WAL opened"),
    }
    bytes[at] ^= 0x40;
    std::fs::write(&wal, &bytes).unwrap();
    Db::open(dir.path(), options.clone())
        .unwrap()
        .close()
        .unwrap();
    let mut manifest = common::read_manifest(dir.path());
    manifest.version = bloomlsm::STORE_FORMAT_VERSION + 1;
    common::write_manifest(dir.path(), &manifest);
    match Db::open(dir.path(), options) {
        Err(e @ Error::UnsupportedFormat { .. }) => assert!(e.to_string().contains("MANIFEST")),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// A flipped byte in a table's data block: reads of it fail with an error
/// that says corruption, names the table and the block's offset, and is
/// boxable; reads elsewhere go on.
#[test]
fn a_damaged_data_block_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[3; 50]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let table = common::only_table(dir.path());
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 1; // in the first data block
    std::fs::write(&table, &bytes).unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    let err = db.get(b"k00001").unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let text = err.to_string();
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    assert!(text.contains(&name) && text.contains("offset"), "{text}");
    // The scan reads its first block when made, so it fails there.
    let scan_err = db.scan::<&[u8], _>(..).unwrap_err();
    assert!(scan_err.is_corruption(), "{scan_err}");
    // One that starts past the damaged block reads to the end.
    let tail: Vec<_> = db
        .scan(b"k01000".as_slice()..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(tail.len(), 1000);
    assert_eq!(db.get(b"k01999").unwrap(), Some(vec![3; 50]));
    let boxed: Box<dyn std::error::Error + Send + Sync> = err.into();
    assert!(boxed.source().is_some());
    db.close().unwrap();
}

/// Opens that fail leave nothing behind: bad options on a new directory,
/// a directory of other files, a path that is a file.
#[test]
fn failed_opens_leave_nothing_behind() {
    let parent = tempfile::tempdir().unwrap();
    let fresh = parent.path().join("a").join("b");
    let bad = Options {
        memtable_bytes: 0,
        ..Options::default()
    };
    assert!(matches!(
        Db::open(&fresh, bad),
        Err(Error::InvalidOptions(_))
    ));
    assert!(
        !parent.path().join("a").exists(),
        "a refused open created directories"
    );
    // A nested new path is created by a good open.
    Db::open(&fresh, Options::default())
        .unwrap()
        .close()
        .unwrap();
    assert!(fresh.join("MANIFEST").exists() || std::fs::read_dir(&fresh).unwrap().count() > 0);

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("notes.txt"), b"mine").unwrap();
    match Db::open(other.path(), Options::default()) {
        Err(e @ Error::NotAStore { .. }) => assert!(e.to_string().contains("notes.txt"), "{e}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let names: Vec<_> = std::fs::read_dir(other.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("notes.txt")]);

    let file = other.path().join("notes.txt");
    let err = Db::open(&file, Options::default()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), b"mine");
}

/// `last_sequence` counts writes: one per put or delete, a batch its
/// length, and a reopen (clean, dropped, or after a flush) goes on from
/// where it was.
#[test]
fn last_sequence_counts_writes_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let start = db.last_sequence();
    db.put(b"a", b"1").unwrap();
    db.delete(b"a").unwrap();
    let mut b = WriteBatch::new();
    b.put(b"b", b"1").put(b"c", b"1").delete(b"d");
    db.write(b).unwrap();
    assert_eq!(db.last_sequence(), start + 5);
    let snap = db.snapshot();
    assert_eq!(snap.sequence(), start + 5);
    drop(snap);
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 5, "after a clean close");
    db.put(b"e", b"1").unwrap();
    drop(db);
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "read-only, after a drop");
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "after a drop");
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.last_sequence(), start + 6, "after a flush");
    db.close().unwrap();
}

/// Every type a public field or variant holds is nameable through
/// `bloomlsm` alone: an application depends on this crate, not on the
/// workspace's inner crates (whose versions it would have to match).
#[test]
fn a_trace_and_a_table_error_are_matched_through_bloomlsm_alone() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..1000u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    let (value, trace) = db.get_traced(b"k0500").unwrap();
    assert_eq!(value, Some(b"v".to_vec()));
    let step = trace.steps.last().unwrap();
    assert_eq!(step.filter, Some(bloomlsm::FilterVerdict::TruePositive));
    assert_eq!(step.block, Some(bloomlsm::BlockSource::File));
    let (_, trace) = db.get_traced(b"k0500x").unwrap();
    assert!(matches!(
        trace.steps.last().unwrap().filter,
        Some(bloomlsm::FilterVerdict::Negative | bloomlsm::FilterVerdict::FalsePositive)
    ));
    db.close().unwrap();

    let table = common::only_table(dir.path());
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&table, &bytes).unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    match db.get(b"k0000") {
        Err(Error::Table(bloomlsm::sstable::Error::Corruption { offset, reason, .. })) => {
            assert_eq!(offset, 0);
            assert!(matches!(
                reason,
                bloomlsm::sstable::CorruptionReason::Block(_)
            ));
        }
        other => panic!("{other:?}"),
    }
    db.close().unwrap();
}

/// An application that opens the store for each request: the directory
/// stays bounded (files and bytes) over many open, write, close cycles.
#[test]
fn many_open_close_cycles_keep_the_directory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    // Measured on a settled store (reopened, its background work done,
    // closed): a drop mid-compaction leaves L0 tables that the next open
    // merges, so an unsettled count moves with timing, not with leaks.
    let usage = |dir: &std::path::Path| {
        let db = Db::open(dir, Options::default()).unwrap();
        db.wait_for_background_work().unwrap();
        db.close().unwrap();
        let entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let bytes: u64 = entries.iter().map(|e| e.metadata().unwrap().len()).sum();
        (entries.len(), bytes)
    };
    let mut at_100 = (0, 0);
    for cycle in 0..300u32 {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(
            format!("k{:03}", cycle % 50).as_bytes(),
            &[cycle as u8; 100],
        )
        .unwrap();
        if cycle % 2 == 0 {
            db.close().unwrap();
        } else {
            drop(db);
        }
        if cycle == 100 {
            at_100 = usage(dir.path());
        }
    }
    let (files, bytes) = usage(dir.path());
    assert!(
        files <= at_100.0 + 4 && bytes <= at_100.1 * 2,
        "{at_100:?} then {files} files, {bytes} bytes"
    );
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(all(&db).len(), 50);
    db.close().unwrap();
}

/// `use_direct_reads`: where the file system serves `O_DIRECT` the store
/// reads the same; where it refuses, `open` fails naming the path.
#[test]
fn direct_reads_work_or_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[7; 40]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let options = Options {
        use_direct_reads: true,
        block_cache_bytes: 0,
        ..Options::default()
    };
    match Db::open(dir.path(), options) {
        Ok(db) => {
            for i in (0..3000u32).step_by(97) {
                assert_eq!(
                    db.get(format!("k{i:05}").as_bytes()).unwrap(),
                    Some(vec![7; 40])
                );
            }
            assert_eq!(all(&db).len(), 3000);
            db.close().unwrap();
        }
        Err(e) => {
            eprintln!("refused: {e}");
            assert!(
                e.to_string().contains(&*dir.path().to_string_lossy()),
                "{e}"
            );
        }
    }
}
