//! A get that fails at a table's data block (damaged here) counts as a
//! get, and the tables it asked before are counted as usual, but the
//! failing table is counted nowhere: no probe, no verdict (the block could
//! not be searched, so the filter's "maybe" was neither right nor wrong)
//! and no data block read, though its block was read from the file (the
//! read log shows it). docs/DESIGN.md, "Stats", says so; this pins it.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bloomlsm::{Db, FilterVerdict, Options};

use common::scratch_dir;
use read_truth::{CountingFs, Tree};

#[test]
fn the_failing_table_is_not_counted() {
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let options = Options {
        background_work: false,
        block_cache_bytes: 0,
        ..Options::default()
    };
    let db = Db::open_with_fs(dir.path(), options, fs.clone()).unwrap();
    // Older table: k000..k099; newer table: k000x and k100..k199.
    for i in 0..100u64 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    for i in 100..200u64 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.put(b"k000x", b"v").unwrap();
    db.flush().unwrap();
    let tree = Tree::read(dir.path());
    let (newer, older) = (&tree.levels[0][0], &tree.levels[0][1]);
    // A byte of the older table's first data block (k050 is in it).
    let path = dir.path().join(format!("{:06}.sst", older.number));
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&[0xee], 10).unwrap();
    let newer_said_maybe = newer
        .table
        .filter()
        .is_some_and(|f| bloomlsm::filter::Filter::contains(f, b"k050"));

    let before = db.stats();
    fs.take();
    let failed = db.get(b"k050").unwrap_err();
    let reads = fs.take();
    let after = db.stats();
    assert!(failed.is_corruption(), "{failed}");
    assert_eq!(after.gets - before.gets, 1, "a failed get is a get");
    // The newer table was asked: one probe, its verdict, its block if any.
    let l0 = |s: &bloomlsm::Stats| read_truth::Counts::of(&s.levels[0]);
    let mut want = read_truth::Counts::default();
    if newer_said_maybe {
        want.add(
            FilterVerdict::FalsePositive,
            Some(bloomlsm::BlockSource::File),
        );
    } else {
        want.add(FilterVerdict::Negative, None);
    }
    assert_eq!(l0(&after).minus(l0(&before)), want);
    // The older table's block was read, and is counted nowhere.
    assert_eq!(reads.last().map(|r| r.number), Some(older.number));
    assert_eq!(reads.len() as u64, want.from_file + 1);
}
