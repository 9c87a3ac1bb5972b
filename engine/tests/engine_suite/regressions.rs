//! One test per fault of the correctness review: each failed before its
//! fix, in the shape a user reaches it.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{CorruptFilterPolicy, Db, FilterPolicy, Options};
use common::{WAL_RECORDS_START, listing, newest_wal, wal_record, wal_record_in};

fn no_compaction() -> Options {
    Options {
        background_work: false,
        l0_compaction_trigger: 64,
        l0_slowdown_trigger: 64,
        l0_stop_trigger: 64,
        ..Options::default()
    }
}

/// Three L0 tables, each holding a newer version of the same key.
fn three_versions_in_l0(db: &Db) {
    for v in [b"v1", b"v2", b"v3"] {
        db.put(b"k", v).unwrap();
        db.put(b"other", v).unwrap();
        db.flush().unwrap();
    }
    assert_eq!(db.stats().levels[0].tables, 3);
}

#[test]
fn rebuilt_l0_tables_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), no_compaction()).unwrap();
    three_versions_in_l0(&db);
    for bits in [6.5, 12.0, 3.0] {
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: bits })
            .unwrap();
        assert_eq!(
            db.get(b"k").unwrap(),
            Some(b"v3".to_vec()),
            "after rebuild at {bits}"
        );
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), no_compaction()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()), "after reopen");
    let all: Vec<_> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        all,
        vec![
            (b"k".to_vec(), b"v3".to_vec()),
            (b"other".to_vec(), b"v3".to_vec())
        ]
    );
}

#[test]
fn tables_rebuilt_for_a_damaged_filter_keep_their_order() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        on_corrupt_filter: CorruptFilterPolicy::Rebuild,
        ..no_compaction()
    };
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        three_versions_in_l0(&db);
        db.close().unwrap();
    }
    // Damage the filter of the OLDEST table: its rebuild gets the highest
    // file number of all.
    let mut tables: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    tables.sort();
    let oldest = &tables[0];
    let table = bloomlsm_sstable::Table::open_path(oldest, 0, None).unwrap();
    let filter = table.footer().filter;
    drop(table);
    let mut bytes = std::fs::read(oldest).unwrap();
    bytes[filter.offset as usize + 3] ^= 0xff;
    std::fs::write(oldest, &bytes).unwrap();

    let db = Db::open(dir.path(), options.clone()).unwrap();
    // Inline background work rebuilds damaged filters on the next write.
    db.put(b"unrelated", b"x").unwrap();
    assert_eq!(db.stats().total.tables_without_usable_filter, 0);
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()));
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()), "after reopen");
}

fn tiny_inline() -> Options {
    Options {
        background_work: false,
        memtable_bytes: 512,
        ..Options::default()
    }
}

/// A store whose table files cannot be created: the first flush fails.
fn store_with_failing_flushes(dir: &std::path::Path) -> (Db, bloomlsm::fs::fault::FaultFs) {
    let fs = bloomlsm::fs::fault::FaultFs::new();
    let db = Db::open_with_fs(dir, tiny_inline(), std::sync::Arc::new(fs.clone())).unwrap();
    fs.set_refuse_table_files(true);
    (db, fs)
}

#[test]
fn an_applied_write_returns_ok_when_the_inline_flush_after_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _fs) = store_with_failing_flushes(dir.path());
    let mut applied = 0;
    let stopped = loop {
        let key = format!("key{applied:04}");
        match db.put(key.as_bytes(), &[7u8; 64]) {
            Ok(()) => applied += 1,
            Err(e) => break e,
        }
        assert!(applied < 1000, "the failing flush never stopped writes");
    };
    assert!(
        matches!(stopped, bloomlsm::Error::WritesStopped(_)),
        "{stopped}"
    );
    // Every write that returned Ok is there; the refused one is not.
    for i in 0..applied {
        assert!(
            db.get(format!("key{i:04}").as_bytes()).unwrap().is_some(),
            "write {i}"
        );
    }
    assert_eq!(db.get(format!("key{applied:04}").as_bytes()).unwrap(), None);
    drop(db);
    let db = Db::open(dir.path(), tiny_inline()).unwrap();
    for i in 0..applied {
        assert!(
            db.get(format!("key{i:04}").as_bytes()).unwrap().is_some(),
            "after reopen: {i}"
        );
    }
}

#[test]
fn after_writes_stop_flush_compact_and_rebuild_refuse_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, fs) = store_with_failing_flushes(dir.path());
    let mut i = 0;
    while db.put(format!("key{i:04}").as_bytes(), &[1u8; 64]).is_ok() {
        i += 1;
    }
    fs.set_refuse_table_files(false);
    let before = listing(dir.path());
    let manifest = std::fs::read(dir.path().join("MANIFEST")).unwrap();
    let stopped = |r: bloomlsm::Result<()>| matches!(r, Err(bloomlsm::Error::WritesStopped(_)));
    assert!(stopped(db.flush()));
    assert!(stopped(db.compact()));
    assert!(stopped(db.wait_for_background_work()));
    assert!(stopped(
        db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 5.0 })
    ));
    assert!(stopped(db.put(b"more", b"x")));
    assert_eq!(
        listing(dir.path()),
        before,
        "a refused call created or removed files"
    );
    assert_eq!(
        std::fs::read(dir.path().join("MANIFEST")).unwrap(),
        manifest
    );
    assert_eq!(
        db.options().filter_policy,
        Options::default().filter_policy,
        "a refused rebuild switched the policy"
    );
}

#[test]
fn options_that_would_hang_overflow_or_divide_by_zero_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Options)> = vec![
        (
            "max_immutable_memtables 0",
            Options {
                max_immutable_memtables: 0,
                ..Options::default()
            },
        ),
        (
            "memtable_bytes 0",
            Options {
                memtable_bytes: 0,
                ..Options::default()
            },
        ),
        (
            "l1_bytes 0",
            Options {
                l1_bytes: 0,
                ..Options::default()
            },
        ),
        (
            "target_file_bytes 0",
            Options {
                target_file_bytes: 0,
                ..Options::default()
            },
        ),
        (
            "l0 triggers 0",
            Options {
                l0_compaction_trigger: 0,
                ..Options::default()
            },
        ),
        (
            "stop below slowdown",
            Options {
                l0_stop_trigger: 5,
                l0_slowdown_trigger: 6,
                ..Options::default()
            },
        ),
        (
            "ratio 1",
            Options {
                level_size_ratio: 1,
                ..Options::default()
            },
        ),
        (
            "one level",
            Options {
                num_levels: 1,
                ..Options::default()
            },
        ),
        (
            "65 levels",
            Options {
                num_levels: 65,
                ..Options::default()
            },
        ),
        (
            "block 1 GiB",
            Options {
                block_size: 1 << 30,
                ..Options::default()
            },
        ),
        (
            "optimized NaN",
            Options {
                filter_policy: FilterPolicy::Optimized {
                    bits_per_key: f64::NAN,
                },
                ..Options::default()
            },
        ),
        (
            "optimized -1",
            Options {
                filter_policy: FilterPolicy::Optimized { bits_per_key: -1.0 },
                ..Options::default()
            },
        ),
        (
            "uniform inf",
            Options::default().with_bits_per_key(f64::INFINITY),
        ),
        (
            "per level empty",
            Options {
                filter_policy: FilterPolicy::PerLevel(vec![]),
                ..Options::default()
            },
        ),
    ];
    for (what, options) in cases {
        let err = Db::open(dir.path().join("db"), options).unwrap_err();
        assert!(
            matches!(err, bloomlsm::Error::InvalidOptions(_)),
            "{what}: {err}"
        );
        assert!(
            !dir.path().join("db").exists(),
            "{what}: a refused open created the directory"
        );
    }
}

#[test]
fn tiny_bits_per_key_build_no_filter_instead_of_hanging() {
    // Sizing a filter at 1e-9 bits per key used to take days.
    for bits in [1e-9, 5e-16, 0.5] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), no_compaction().with_bits_per_key(bits)).unwrap();
        db.put(b"k", b"v").unwrap();
        db.flush().unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(db.stats().total.filter_bytes, 0, "{bits}");
        db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: bits })
            .unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    }
}

#[test]
fn a_batch_over_the_wal_record_limit_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        max_value_bytes: 64 << 20,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let mut batch = bloomlsm::WriteBatch::new();
    // 65 values of 64 MiB: 4.06 GiB, over u32::MAX. Zeroed buffers are not
    // touched, so this costs address space, not memory.
    for i in 0..65u32 {
        batch.put_owned(i.to_be_bytes().to_vec(), vec![0u8; 64 << 20]);
    }
    assert!(batch.encoded_len() > bloomlsm::MAX_BATCH_BYTES);
    let wal_bytes = |d: &std::path::Path| -> u64 {
        listing(d)
            .iter()
            .filter(|n| n.ends_with(".wal"))
            .map(|n| std::fs::metadata(d.join(n)).unwrap().len())
            .sum()
    };
    let before = wal_bytes(dir.path());
    let err = db.write(batch).unwrap_err();
    assert!(
        matches!(err, bloomlsm::Error::BatchTooLarge { .. }),
        "{err}"
    );
    assert_eq!(wal_bytes(dir.path()), before, "only the WAL's header");
    assert_eq!(db.get(&0u32.to_be_bytes()).unwrap(), None);
    db.put(b"after", b"ok").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(&0u32.to_be_bytes()).unwrap(), None);
    assert_eq!(db.get(b"after").unwrap(), Some(b"ok".to_vec()));
}

#[test]
fn crafted_wal_sequence_numbers_are_refused_naming_file_and_offset() {
    let max_sequence = (1u64 << 56) - 1;
    for (first, what, expected) in [
        (0, "zero", bloomlsm::WalDamage::ZeroSequence),
        (
            max_sequence + 1,
            "past 2^56",
            bloomlsm::WalDamage::PastLargest {
                first: max_sequence + 1,
                count: 1,
            },
        ),
        (
            u64::MAX,
            "near 2^64",
            bloomlsm::WalDamage::PastLargest {
                first: u64::MAX,
                count: 1,
            },
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"a", b"1").unwrap();
        db.close().unwrap();
        let wal = newest_wal(dir.path());
        let mut bytes = std::fs::read(&wal).unwrap();
        let offset = bytes.len();
        let record = wal_record_in(&bytes, first, b"crafted");
        bytes.extend_from_slice(&record);
        std::fs::write(&wal, &bytes).unwrap();
        let err = Db::open(dir.path(), Options::default()).unwrap_err();
        match &err {
            bloomlsm::Error::Corruption {
                path,
                offset: at,
                reason,
            } => {
                assert_eq!(path, &wal, "{what}");
                assert_eq!(*at, offset as u64, "{what}");
                assert!(
                    matches!(reason, bloomlsm::Damage::Wal(w) if *w == expected),
                    "{what}: {reason}"
                );
            }
            other => panic!("{what}: {other}"),
        }
        // Point in time: recovery stops before it, and the store goes on.
        let pit = Options {
            wal_recovery: bloomlsm::WalRecovery::PointInTime,
            ..Options::default()
        };
        let db = Db::open(dir.path(), pit).unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()), "{what}");
        assert_eq!(db.get(b"crafted").unwrap(), None, "{what}");
        db.put(b"b", b"2").unwrap();
        assert!(
            db.last_sequence() <= 3,
            "{what}: sequence jumped to {}",
            db.last_sequence()
        );
    }
    // The last sequence itself is legal where the manifest says the log
    // reaches it; the next write then has none left.
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let wal = newest_wal(dir.path());
    std::fs::write(&wal, wal_record(max_sequence, b"last")).unwrap();
    // A fresh store's log starts at sequence 1: this one does not.
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(
        matches!(
            &err,
            bloomlsm::Error::Corruption {
                reason: bloomlsm::Damage::Wal(bloomlsm::WalDamage::StartOutOfRange { .. }),
                ..
            }
        ),
        "{err}"
    );
    let mut manifest = common::read_manifest(dir.path());
    manifest.counters[1] = max_sequence - 1; // the manifest's last sequence
    common::write_manifest(dir.path(), &manifest);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"last").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(
        db.put(b"next", b"x"),
        Err(bloomlsm::Error::SequenceExhausted)
    ));
}

/// Two live WALs where the older lost its last record cleanly (cut at a
/// record boundary), and the newer one holds the next write. Returns the
/// store's directory and the newer WAL.
fn older_wal_cut_at_a_record_boundary(
    options: &Options,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let fs = bloomlsm::fs::fault::FaultFs::new();
    let db =
        Db::open_with_fs(dir.path(), options.clone(), std::sync::Arc::new(fs.clone())).unwrap();
    db.put(b"w1", b"1").unwrap();
    db.put(b"w2", b"2").unwrap();
    fs.set_refuse_table_files(true);
    // The flush fails (writes stop), leaving the first WAL live beside a new one.
    db.flush().unwrap_err();
    drop(db);
    let wals: Vec<String> = listing(dir.path())
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .collect();
    assert_eq!(wals.len(), 2, "{wals:?}");
    let (older, newer) = (dir.path().join(&wals[0]), dir.path().join(&wals[1]));
    // The newer WAL gets a record continuing the older one (seq 3).
    let start = WAL_RECORDS_START;
    let mut newer_bytes = std::fs::read(&newer).unwrap()[..start].to_vec();
    let record = wal_record_in(&newer_bytes, 3, b"w3");
    newer_bytes.extend_from_slice(&record);
    std::fs::write(&newer, newer_bytes).unwrap();
    let older_bytes = std::fs::read(&older).unwrap();
    let len = u32::from_le_bytes(older_bytes[start..start + 4].try_into().unwrap()) as usize;
    std::fs::write(&older, &older_bytes[..start + 8 + len]).unwrap();
    (dir, newer)
}

#[test]
fn a_gap_between_synced_wals_is_a_hole_never_replayed_past() {
    // The older WAL was fsynced before the newer one took a record: its
    // lost record is not a crash's, and the newer one's writes must not
    // come back alone.
    let options = Options {
        background_work: false,
        memtable_bytes: 1 << 20,
        sync: bloomlsm::SyncMode::Always,
        ..Options::default()
    };
    let (dir, newer) = older_wal_cut_at_a_record_boundary(&options);
    let err = Db::open(dir.path(), options.clone()).unwrap_err();
    assert!(
        matches!(
            &err,
            bloomlsm::Error::Corruption {
                path,
                offset,
                reason: bloomlsm::Damage::Wal(bloomlsm::WalDamage::Gap { expected: 2, found: 3 }),
            } if *path == newer && *offset == WAL_RECORDS_START as u64
        ),
        "{err}"
    );
    let pit = Options {
        wal_recovery: bloomlsm::WalRecovery::PointInTime,
        ..options
    };
    let db = Db::open(dir.path(), pit).unwrap();
    assert_only_w1_before_the_gap(&db);
}

/// The store holds the prefix before the cut older WAL's lost write `w2`:
/// `w1`, and never the newer WAL's `w3` after the hole.
fn assert_only_w1_before_the_gap(db: &Db) {
    assert_eq!(db.get(b"w1").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"w2").unwrap(), None);
    assert_eq!(
        db.get(b"w3").unwrap(),
        None,
        "a write after the hole came back"
    );
}

#[test]
fn a_gap_after_an_unsynced_wal_ends_the_log_there() {
    // Written without fsync, the older WAL's last pages may be lost while
    // the newer WAL's reached the disk: a power loss leaves this, and the
    // store recovers the prefix before the gap (never the write after it).
    let options = Options {
        background_work: false,
        memtable_bytes: 1 << 20,
        ..Options::default()
    };
    let (dir, _) = older_wal_cut_at_a_record_boundary(&options);
    let db = Db::open(dir.path(), options).unwrap();
    assert_only_w1_before_the_gap(&db);
    db.put(b"w4", b"4").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"w3").unwrap(), None);
    assert_eq!(db.get(b"w4").unwrap(), Some(b"4".to_vec()));
}

#[test]
fn a_failed_open_leaves_no_file_it_created() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
    }
    // Damage the WAL in the middle: open refuses, after reading it.
    let wal = newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let record = wal_record_in(&bytes, 2, b"second");
    bytes.extend_from_slice(&record);
    bytes[9] ^= 0xff;
    std::fs::write(&wal, &bytes).unwrap();
    let before = listing(dir.path());
    assert!(
        Db::open(dir.path(), Options::default())
            .unwrap_err()
            .is_corruption()
    );
    assert_eq!(listing(dir.path()), before);
    // A new store whose open fails after creating its directories and
    // LOCK (here: the file system refuses direct reads) leaves nothing.
    let fresh = dir.path().join("a/b/store");
    let fs = bloomlsm::fs::fault::FaultFs::new();
    fs.set_refuse_direct_io(true);
    let direct = Options {
        use_direct_reads: true,
        ..Options::default()
    };
    assert!(Db::open_with_fs(&fresh, direct, std::sync::Arc::new(fs)).is_err());
    assert!(!dir.path().join("a").exists(), "{:?}", listing(dir.path()));
}

#[test]
fn a_snapshot_or_iterator_outliving_close_does_not_keep_the_store_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let snapshot = db.snapshot();
    let mut iter = db.scan::<&[u8], _>(..).unwrap();
    db.close().unwrap();
    let again = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(again.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(snapshot.get(b"k"), Err(bloomlsm::Error::Closed)));
    assert!(matches!(iter.next(), Some(Err(bloomlsm::Error::Closed))));
    assert!(iter.next().is_none());
}

/// A store written before WAL format version 2 (store format version 1,
/// WALs without a header) opens: its WALs are read as version 1 (strictly:
/// they do not say whether they were fsynced), and its first read-write
/// open writes store format version 2 and a WAL with a header, which a
/// build knowing only version 1 refuses rather than misreads.
#[test]
fn a_version_1_store_replays_its_headerless_wal_and_is_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..20u8 {
            db.put(&[b'k', i], &[i; 30]).unwrap();
        }
        db.close().unwrap();
    }
    // Made version 1: the manifest says so and the WAL loses its header;
    // its last record torn.
    let mut manifest = common::read_manifest(dir.path());
    assert_eq!(manifest.version, bloomlsm::STORE_FORMAT_VERSION);
    manifest.version = 1;
    common::write_manifest(dir.path(), &manifest);
    let wal = newest_wal(dir.path());
    let bytes = std::fs::read(&wal).unwrap();
    assert_eq!(&bytes[..8], b"bloomWAL");
    // A version 1 WAL has no close marker either.
    // (Its records re-checksummed without the salt, as version 1 wrote
    // them; the last one torn 3 bytes before its end.)
    let headerless = common::unsalted_records(&bytes, common::close_marker_offset(&bytes));
    let headerless = headerless[..headerless.len() - 3].to_vec();
    std::fs::write(&wal, &headerless).unwrap();

    // Damage before an intact record of a version 1 WAL stays corruption.
    let mut damaged = headerless.clone();
    damaged[20] ^= 0x40;
    std::fs::write(&wal, &damaged).unwrap();
    let err = Db::open_read_only(dir.path(), options.clone()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    std::fs::write(&wal, &headerless).unwrap();

    let expect = |db: &Db| {
        for i in 0..19u8 {
            assert_eq!(db.get(&[b'k', i]).unwrap(), Some(vec![i; 30]), "k{i}");
        }
        assert_eq!(db.get(&[b'k', 19]).unwrap(), None, "the torn write");
    };
    let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
    expect(&ro);
    ro.close().unwrap();
    assert_eq!(common::read_manifest(dir.path()).version, 1);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    expect(&db);
    db.put(b"after", b"upgrade").unwrap();
    db.close().unwrap();
    assert_eq!(
        common::read_manifest(dir.path()).version,
        bloomlsm::STORE_FORMAT_VERSION
    );
    let bytes = std::fs::read(newest_wal(dir.path())).unwrap();
    assert_eq!(&bytes[..8], b"bloomWAL");
    let db = Db::open(dir.path(), options).unwrap();
    expect(&db);
    assert_eq!(db.get(b"after").unwrap(), Some(b"upgrade".to_vec()));
}

/// A store format version 2 store (headed WALs, no close marker: written
/// before the marker) opens as it is, read-only and read-write, and its
/// first read-write open writes the current version; a version past this build's is
/// refused by version, naming it, before any WAL is read.
#[test]
fn a_version_2_store_opens_and_is_upgraded_and_a_newer_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        for i in 0..20u8 {
            db.put(&[b'k', i], &[i; 30]).unwrap();
        }
        db.close().unwrap();
    }
    // Made version 2: the manifest says so and the WAL loses its marker
    // (and the header flag saying it has one).
    let mut manifest = common::read_manifest(dir.path());
    assert_eq!(manifest.version, bloomlsm::STORE_FORMAT_VERSION);
    manifest.version = 2;
    common::write_manifest(dir.path(), &manifest);
    let wal = newest_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes.truncate(common::close_marker_offset(&bytes));
    common::as_if_never_closed(&mut bytes);
    std::fs::write(&wal, &bytes).unwrap();
    let expect = |db: &Db| {
        for i in 0..20u8 {
            assert_eq!(db.get(&[b'k', i]).unwrap(), Some(vec![i; 30]), "k{i}");
        }
        assert_eq!(db.stats().wal_replay_cut, None);
    };
    let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
    expect(&ro);
    ro.close().unwrap();
    assert_eq!(common::read_manifest(dir.path()).version, 2);
    let db = Db::open(dir.path(), options.clone()).unwrap();
    expect(&db);
    db.close().unwrap();
    assert_eq!(
        common::read_manifest(dir.path()).version,
        bloomlsm::STORE_FORMAT_VERSION
    );

    let mut manifest = common::read_manifest(dir.path());
    manifest.version = bloomlsm::STORE_FORMAT_VERSION + 1;
    common::write_manifest(dir.path(), &manifest);
    for read_only in [true, false] {
        let opened = common::open_either(dir.path(), options.clone(), read_only);
        match opened {
            Err(bloomlsm::Error::UnsupportedFormat {
                found, supported, ..
            }) => {
                let v = bloomlsm::STORE_FORMAT_VERSION;
                assert_eq!((found, supported), (v + 1, v));
            }
            other => panic!("read-only {read_only}: {:?}", other.map(|_| ())),
        }
    }
}

/// An open that crashed after creating its WAL and before writing its
/// manifest leaves a WAL of only a header beside the live one. When the
/// live WAL holds no record either (the last open wrote nothing), the next
/// open replays every WAL whole and drops nothing: `wal_replay_cut` must
/// be `None`, not a cut of 0 bytes at the older empty WAL.
#[test]
fn an_empty_older_wal_before_an_empty_newer_one_is_no_cut() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    for sync in [bloomlsm::SyncMode::Never, bloomlsm::SyncMode::Always] {
        let options = Options {
            sync,
            ..options.clone()
        };
        let db = Db::open(dir.path(), options.clone()).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
        // This open replays the write into a table and writes nothing.
        Db::open(dir.path(), options.clone())
            .unwrap()
            .close()
            .unwrap();
        let live = newest_wal(dir.path());
        assert_eq!(std::fs::read(&live).unwrap().len(), WAL_RECORDS_START);
        let name = live.file_name().unwrap().to_str().unwrap();
        let number: u64 = name.trim_end_matches(".wal").parse().unwrap();
        let crashed = live.with_file_name(format!(
            "{:0width$}.wal",
            number + 1,
            width = name.len() - 4
        ));
        std::fs::copy(&live, &crashed).unwrap();
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        assert_eq!(db.stats().wal_replay_cut, None, "{sync:?}");
        db.close().unwrap();
    }
}
