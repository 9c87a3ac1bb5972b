//! A store written before table format version 2 (store format version
//! 4, every table of version 1, whose index block is a data block) opens
//! with this build as it is: every answer of the store and of held
//! snapshots is right, read-only and read-write; writes then compact its
//! version 1 tables into version 2 ones beside the ones left alone; an
//! in-place filter rebuild keeps each table's version; the store is
//! at the current store format version (`STORE_FORMAT_VERSION`) once written.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::{Db, FilterPolicy};
use bloomlsm_sstable::Table;
use common::format_v1::make_version_4_store;
use common::model_run::{ModelRun, deep_narrow_options};

/// How many of the store's live tables are of each format version (1, 2).
fn tables_by_version(dir: &Path) -> [usize; 2] {
    let mut counts = [0; 2];
    for record in common::read_manifest(dir).tables {
        let path = dir.join(format!("{:06}.sst", record.numbers[0]));
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        let table = Table::open_at(file, &path, record.numbers[1], 1, None).unwrap();
        counts[table.footer().version as usize - 1] += 1;
    }
    counts
}

/// One write of a key among 800: a delete one time in `delete_one_in`,
/// else a put.
fn put_or_delete(run: &mut ModelRun, rng: &mut common::Rng, delete_one_in: u64) {
    let i = rng.below(800);
    if rng.below(delete_one_in) == 0 {
        run.delete(i);
    } else {
        run.put(i);
    }
}

#[test]
fn a_store_of_version_1_tables_reads_compacts_and_rebuilds() {
    let options = deep_narrow_options(false);
    let mut run = ModelRun::new(options.clone(), common::scattered_key, 900);
    let mut rng = common::Rng(7);
    // A deep tree of narrow tables with tombstones at every level.
    for _ in 0..2500 {
        put_or_delete(&mut run, &mut rng, 4);
    }
    run.check("before", true);
    run.close();
    let dir = run.dir.path().to_path_buf();
    make_version_4_store(&dir, options.block_size);
    let [v1, v2] = tables_by_version(&dir);
    assert!(v1 >= 8 && v2 == 0, "{v1} version 1 tables, {v2} version 2");
    let levels: std::collections::BTreeSet<u32> = common::read_manifest(&dir)
        .tables
        .iter()
        .map(|r| r.level)
        .collect();
    assert!(levels.len() >= 3, "levels {levels:?}");

    let ro = Db::open_read_only(&dir, options.clone()).unwrap();
    assert!(common::contents(&ro) == run.model, "read-only scan");
    for i in 0..900 {
        let k = run.key(i);
        assert_eq!(ro.get(&k).unwrap(), run.model.get(&k).cloned(), "get {i}");
    }
    ro.close().unwrap();
    assert_eq!(common::read_manifest(&dir).version, 4);

    run.open();
    run.check("opened", true);
    run.take_snapshot();
    // Writes whose compactions merge version 1 tables into new ones.
    for step in 0..1500 {
        put_or_delete(&mut run, &mut rng, 3);
        if step % 500 == 499 {
            run.check("writing", false);
            run.take_snapshot();
        }
    }
    run.check("written", true);
    run.db()
        .rebuild_filters(FilterPolicy::Uniform { bits_per_key: 14.0 })
        .unwrap();
    run.check("filters rebuilt", true);
    run.close();
    assert_eq!(
        common::read_manifest(&dir).version,
        bloomlsm::STORE_FORMAT_VERSION
    );
    let [v1, v2] = tables_by_version(&dir);
    assert!(v2 > 0, "compactions wrote version 2 tables");
    // Some version 1 tables may all have been compacted away; each left is
    // read below with its rebuilt filter.
    eprintln!("after: {v1} version 1 tables, {v2} version 2");
    run.open();
    run.check("reopened", true);
}

#[test]
fn version_1_tables_keep_their_version_through_in_place_and_copied_rebuilds() {
    // Tables large enough for a small filter's append to stay within the
    // unused bytes a table may carry.
    let options = bloomlsm::Options {
        target_file_bytes: 16 << 10,
        l1_bytes: 32 << 10,
        ..deep_narrow_options(false)
    };
    let mut run = ModelRun::new(options.clone(), common::scattered_key, 2000);
    for i in 0..2000 {
        run.put(i);
    }
    // Nothing left in a WAL, so no open or close below writes a table.
    run.db().flush().unwrap();
    run.close();
    let dir = run.dir.path().to_path_buf();
    make_version_4_store(&dir, options.block_size);
    let before = tables_by_version(&dir);
    let numbers = |dir: &Path| -> Vec<u64> {
        common::read_manifest(dir)
            .tables
            .iter()
            .map(|r| r.numbers[0])
            .collect()
    };
    let first_numbers = numbers(&dir);
    assert!(before[0] >= 8 && before[1] == 0, "{before:?}");
    run.open();
    run.take_snapshot();
    // No writes: every table stays, and gets new filters, appended to its
    // file while the unused bytes stay small, then copied to a new file.
    let (mut in_place, mut copied) = (0, 0);
    let mut previous = first_numbers;
    for bits_per_key in [6.0, 30.0, 6.0, 30.0] {
        run.db()
            .rebuild_filters(FilterPolicy::Uniform { bits_per_key })
            .unwrap();
        run.check("rebuilt", true);
        let now = numbers(&dir);
        in_place += previous.iter().filter(|n| now.contains(n)).count();
        copied += previous.iter().filter(|n| !now.contains(n)).count();
        previous = now;
    }
    assert!(
        in_place > 0 && copied > 0,
        "{in_place} in place, {copied} copied"
    );
    run.close();
    assert_eq!(tables_by_version(&dir), before);
    run.open();
    run.check("reopened", true);
}
