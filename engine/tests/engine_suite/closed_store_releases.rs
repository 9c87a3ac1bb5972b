//! `close` lets go of the store's files even while a `Snapshot` of it
//! lives on (the close allows that, and reads through it then fail with
//! `Closed`): no table or WAL descriptor of the closed store stays open,
//! so an embedder that keeps a snapshot past a close and reopens the
//! store, cycle after cycle, does not pile up descriptors, nor hold open
//! the files a later open compacts away (their blocks would stay on
//! disk). Deep narrow trees, work inline and in the background, with and
//! without a bound on open table files.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Error, Options};
use common::descriptors::descriptors_in;
use common::narrow_tree::narrow_tree_options;
use common::{Rng, scratch_dir};

fn options(background_work: bool, max_open_files: Option<usize>) -> Options {
    Options {
        background_work,
        max_open_files,
        ..narrow_tree_options()
    }
}

#[test]
fn a_snapshot_kept_past_close_holds_no_file_of_the_store_open() {
    let dir = scratch_dir();
    let mut rng = Rng(2022);
    // Every snapshot outlives the store it came from, to the end.
    let mut kept = Vec::new();
    for cycle in 0..6u64 {
        let background_work = cycle % 2 == 1;
        let max_open_files = [None, Some(1), Some(3)][(cycle % 3) as usize];
        let what = format!("cycle {cycle}: {background_work} {max_open_files:?}");
        let db = Db::open(dir.path(), options(background_work, max_open_files)).unwrap();
        for i in 0..400u64 {
            let k = format!("k{:05}", rng.below(300)).into_bytes();
            if i.is_multiple_of(4) {
                db.delete(&k).unwrap();
            } else {
                db.put(&k, format!("v{cycle}-{i}-{}", "x".repeat(30)).as_bytes())
                    .unwrap();
            }
        }
        db.put(b"k-held", format!("{cycle}").as_bytes()).unwrap();
        // Every table read once, so each is open (as far as the bound
        // allows), and a memtable holding writes.
        assert!(db.scan::<&[u8], _>(..).unwrap().count() > 0, "{what}");
        let snapshot = db.snapshot();
        assert_eq!(
            snapshot.get(b"k-held").unwrap(),
            Some(format!("{cycle}").into_bytes()),
            "{what}"
        );
        assert!(!descriptors_in(dir.path()).is_empty(), "{what}: open");
        db.close().unwrap();
        assert_eq!(
            descriptors_in(dir.path()),
            Vec::<String>::new(),
            "{what}: closed, a snapshot alive"
        );
        assert!(
            matches!(snapshot.get(b"k-held"), Err(Error::Closed)),
            "{what}"
        );
        assert!(
            matches!(snapshot.scan::<&[u8], _>(..), Err(Error::Closed)),
            "{what}"
        );
        kept.push(snapshot);
    }
    let db = Db::open(dir.path(), options(false, None)).unwrap();
    assert_eq!(db.get(b"k-held").unwrap(), Some(b"5".to_vec()));
    db.close().unwrap();
    drop(kept);
    assert_eq!(descriptors_in(dir.path()), Vec::<String>::new());
}
