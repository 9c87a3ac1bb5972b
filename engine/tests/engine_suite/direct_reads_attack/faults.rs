//! Failed reads under `use_direct_reads`, on a disk file system: with
//! short reads injected (`FaultFs`) into every table read, point reads by
//! gets, snapshot gets and scans, bulk reads by compactions and the reads
//! of new tables' index and filter at open, every answer is either right
//! or an I/O error naming a table file; never a wrong value, a missing key
//! or a panic. Once the faults stop and the store is reopened, it holds
//! everything.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, Options};
use common::{Model, Rng, disk_dir};

fn options() -> Options {
    Options {
        use_direct_reads: true,
        memtable_bytes: 4096,
        target_file_bytes: 4096,
        l1_bytes: 16 << 10,
        block_size: 256,
        level_size_ratio: 3,
        l0_compaction_trigger: 2,
        block_cache_bytes: 1,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:04}", i * 13 % 1000).into_bytes()
}

/// An error of a read that failed: an I/O error on a table file.
fn is_table_read_error(e: &Error) -> bool {
    let text = e.to_string();
    let io = match e {
        Error::Io { path, .. } => path.extension().is_some_and(|x| x == "sst"),
        Error::Table(bloomlsm_sstable::Error::Io { path, .. }) => {
            path.extension().is_some_and(|x| x == "sst")
        }
        _ => false,
    };
    io && text.contains("short read")
}

#[test]
fn short_direct_reads_are_errors_never_wrong_answers() {
    let Some(dir) = disk_dir() else { return };
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    let mut model = Model::new();
    let mut rng = Rng(11);
    let mut write = |db: &Db, model: &mut Model, n: u64| -> usize {
        let mut refused = 0;
        for _ in 0..n {
            let i = rng.below(400);
            let written = if rng.below(4) == 0 {
                db.delete(&key(i)).map(|()| model.remove(&key(i)))
            } else {
                let v = vec![(i % 251) as u8; 1 + rng.below(300) as usize];
                db.put(&key(i), &v).map(|()| model.insert(key(i), v))
            };
            if let Err(e) = written {
                // A flush or compaction run inline failed: writes stop,
                // and this one is refused as a whole.
                assert!(
                    is_table_read_error(&e) || matches!(e, Error::WritesStopped { .. }),
                    "{e}"
                );
                refused += 1;
                break;
            }
        }
        refused
    };
    write(&db, &mut model, 3000);
    let snapshot = db.snapshot();
    let seen = model.clone();
    fs.set_short_reads(true);
    let (mut ok, mut failed) = (0, 0);
    for i in 0..400 {
        for (got, want) in [
            (db.get(&key(i)), model.get(&key(i))),
            (snapshot.get(&key(i)), seen.get(&key(i))),
        ] {
            match got {
                Ok(v) => {
                    assert!(v.as_ref() == want, "key {i}");
                    ok += 1;
                }
                Err(e) => {
                    assert!(is_table_read_error(&e), "key {i}: {e}");
                    failed += 1;
                }
            }
        }
    }
    // A scan fails to start, or yields a prefix of the right pairs and
    // then maybe an error.
    match db.scan::<&[u8], _>(..) {
        Err(e) => assert!(is_table_read_error(&e), "scan: {e}"),
        Ok(it) => {
            let mut want = model.iter();
            for got in it {
                match got {
                    Ok((k, v)) => {
                        let (wk, wv) = want.next().unwrap();
                        assert!(k == *wk && v == *wv);
                    }
                    Err(e) => {
                        assert!(is_table_read_error(&e), "scan: {e}");
                        break;
                    }
                }
            }
        }
    }
    assert!(failed > 0 && ok > 0, "{ok} answered, {failed} failed");
    // Writes whose flushes and compactions read failing tables.
    let refused = write(&db, &mut model, 2000);
    println!("{ok} answered, {failed} failed, {refused} writes refused");
    fs.set_short_reads(false);
    drop(snapshot);
    let _ = db.close();
    let db = Db::open_with_fs(dir.path(), options(), Arc::new(fs.clone())).unwrap();
    // A refused write was refused whole: the store holds exactly the
    // writes that were acknowledged.
    let scanned: Model = common::pairs(db.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(scanned == model);
    for i in 0..400 {
        assert!(db.get(&key(i)).unwrap() == scanned.get(&key(i)).cloned());
    }
}
