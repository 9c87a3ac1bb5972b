//! Every manifest the store writes passes the checks an open makes
//! (`ManifestState::check`): no table number named twice, the WAL number
//! below the next file number, every table number below it. A manifest
//! the engine wrote and its next open refused would lock a user out of a
//! valid store. Each manifest is decoded the moment it is renamed into
//! place, through flushes, compactions, trivial moves (ascending runs),
//! filter rebuilds that append to their own files and that copy, filter
//! rebalancing under an `Optimized` budget, deletion-triggered picks,
//! reopens that replay WALs, and read-only opens.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bloomlsm::fs::{FileSystem, FsResult};
use bloomlsm::sstable::WritableFile;
use bloomlsm::{Db, FilterPolicy, Options};
use common::narrow_tree::narrow_tree_options;
use common::real_fs_methods::real_fs_methods;
use parking_lot::Mutex;

/// The real file system, decoding `MANIFEST` after every rename onto it
/// and counting appends to table files (filters rebuilt in place).
#[derive(Debug, Default)]
struct CheckedManifests {
    written: AtomicU64,
    refused: Mutex<Vec<String>>,
    appends: AtomicU64,
}

impl FileSystem for CheckedManifests {
    fn rename(&self, from: &Path, to: &Path) -> FsResult<()> {
        bloomlsm::fs::RealFs.rename(from, to)?;
        if to.file_name().is_some_and(|n| n == "MANIFEST") {
            self.written.fetch_add(1, Ordering::SeqCst);
            if let Err(e) = bloomlsm::table_records(to.parent().unwrap()) {
                self.refused.lock().push(e.to_string());
            }
        }
        Ok(())
    }
    fn append_at(&self, path: &Path, len: u64) -> FsResult<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|x| x == "sst") {
            self.appends.fetch_add(1, Ordering::SeqCst);
        }
        bloomlsm::fs::RealFs.append_at(path, len)
    }
    real_fs_methods!(create overwrite open_read open_read_direct read_all remove list
        create_dir_all remove_dir sync_dir exists lock lock_shared);
}

fn options(policy: FilterPolicy, background_work: bool) -> Options {
    Options {
        filter_policy: policy,
        background_work,
        deletion_compaction_ratio: Some(0.3),
        // Tables wide enough for a filter to be appended in place.
        memtable_bytes: 8192,
        target_file_bytes: 4096,
        l1_bytes: 8192,
        block_size: 256,
        ..narrow_tree_options()
    }
}

/// A value of 120 bytes: data far larger than a filter.
fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-{round}-").into_bytes();
    v.resize(120, b'v');
    v
}

/// Eight sessions of the workload, each followed by a read-only open;
/// returns the file system (its counts) and the trivial moves made.
fn run(background_work: bool) -> (Arc<CheckedManifests>, u64) {
    let dir = common::scratch_dir();
    let fs = Arc::new(CheckedManifests::default());
    let policies = [
        FilterPolicy::Uniform { bits_per_key: 10.0 },
        FilterPolicy::Optimized { bits_per_key: 6.5 },
        FilterPolicy::PerLevel(vec![14.0, 3.0, 9.0, 2.0, 12.0, 5.0, 8.0]),
        FilterPolicy::Uniform { bits_per_key: 4.0 },
    ];
    let mut trivial_moves = 0;
    for (round, policy) in policies.iter().cycle().take(8).enumerate() {
        let fs_dyn: Arc<dyn FileSystem> = fs.clone();
        let db =
            Db::open_with_fs(dir.path(), options(policy.clone(), background_work), fs_dyn).unwrap();
        let round = round as u64;
        // An ascending run of new keys (moved down by manifest edits),
        // then overwrites and deletes over older ones.
        for i in 0..400 {
            db.put(&common::key(1_000_000 * (round + 1) + i), &value(i, round))
                .unwrap();
        }
        for i in 0..300 {
            let k = common::key((i * 7 + round * 13) % 900);
            if i.is_multiple_of(3) {
                db.delete(&k).unwrap();
            } else {
                db.put(&k, &value(i, round)).unwrap();
            }
        }
        db.rebuild_filters(policies[(round as usize + 1) % policies.len()].clone())
            .unwrap();
        db.rebuild_filters(policy.clone()).unwrap();
        trivial_moves += db.stats().trivial_moves;
        // Half the rounds end unflushed: the next open replays the WAL.
        if round.is_multiple_of(2) {
            db.flush().unwrap();
        }
        db.close().unwrap();
        let fs_dyn: Arc<dyn FileSystem> = fs.clone();
        let ro = Db::open_read_only_with_fs(
            dir.path(),
            options(policy.clone(), background_work),
            fs_dyn,
        )
        .unwrap();
        ro.close().unwrap();
    }
    (fs, trivial_moves)
}

#[test]
fn every_manifest_the_store_writes_passes_the_open_checks() {
    let (fs, trivial_moves) = run(false);
    let refused = fs.refused.lock();
    assert!(
        refused.is_empty(),
        "{} refused, the first: {:?}",
        refused.len(),
        refused.first()
    );
    let written = fs.written.load(Ordering::SeqCst);
    assert!(written > 100, "{written} manifests");
    assert!(trivial_moves > 0, "no trivial move");
    assert!(fs.appends.load(Ordering::SeqCst) > 0, "no rebuild in place");
}

/// The same with flushes, compactions and rebalancing on background
/// threads, installing concurrently with the writer's rotations (what
/// they cover varies with timing; what is checked does not).
#[test]
fn every_manifest_written_by_background_work_passes_the_open_checks() {
    let (fs, _) = run(true);
    let refused = fs.refused.lock();
    assert!(
        refused.is_empty(),
        "{} refused, the first: {:?}",
        refused.len(),
        refused.first()
    );
    assert!(fs.written.load(Ordering::SeqCst) > 0);
}
