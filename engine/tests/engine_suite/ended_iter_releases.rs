//! A `DbIter` that has ended (or reported `Closed`) lets go of the view
//! it read: a scan that reached its end and is kept (a cursor parked in a
//! session for days) holds no table file open, so the files compactions
//! delete meanwhile leave the disk, and no memtable stays in memory.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::Db;
use common::descriptors::{deleted_in, descriptors_in};
use common::narrow_tree::narrow_tree_options;
use common::scratch_dir;

fn write_round(db: &Db, round: u64) {
    for i in 0..300u64 {
        let k = format!("k{:05}", (i * 7919) % 300).into_bytes();
        if (i + round).is_multiple_of(5) {
            db.delete(&k).unwrap();
        } else {
            db.put(&k, format!("v{round}-{i}-{}", "x".repeat(20)).as_bytes())
                .unwrap();
        }
    }
}

#[test]
fn an_ended_scan_holds_no_deleted_table_open() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), narrow_tree_options()).unwrap();
    let mut ended = Vec::new();
    for round in 0..8 {
        write_round(&db, round);
        let mut it = db.scan::<&[u8], _>(..).unwrap();
        assert!(it.by_ref().count() > 0);
        assert!(it.next().is_none(), "an ended scan stays ended");
        ended.push(it);
        db.wait_for_background_work().unwrap();
        // The files of compacted-away tables are gone from the directory
        // and from the descriptors alike.
        let mut live: Vec<String> = bloomlsm::table_records(dir.path())
            .unwrap()
            .iter()
            .map(|t| format!("{:06}.sst", t.number))
            .collect();
        live.sort();
        let ssts = common::table_files(dir.path());
        assert_eq!(ssts, live, "round {round}");
        assert_eq!(
            deleted_in(dir.path()),
            Vec::<String>::new(),
            "round {round}"
        );
    }
    // One read up to the close: it reports `Closed` and lets go too.
    let mut open_iter = db.scan::<&[u8], _>(..).unwrap();
    open_iter.next().unwrap().unwrap();
    db.close().unwrap();
    assert!(matches!(
        open_iter.next(),
        Some(Err(bloomlsm::Error::Closed))
    ));
    assert!(open_iter.next().is_none());
    assert_eq!(descriptors_in(dir.path()), Vec::<String>::new());
    drop(ended);
}
