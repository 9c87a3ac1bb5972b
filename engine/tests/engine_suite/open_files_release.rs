//! With `Options::max_open_files`, a table's file leaves the set of open
//! files when the table leaves the tree and its last reader lets go: the
//! set never holds the file of a deleted table. Held, that descriptor
//! would keep the deleted file's blocks on disk and take a slot of the
//! bound from a live table, as many as the bound allows.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, Options};

use common::bounded_files::{bounded_options, key, value};
use common::scratch_dir;

/// A bound far above the live tables, so only the release on deletion
/// (never the bound) closes a file; narrow tables; work done inline.
const MAX_OPEN: usize = 1_000;
const KEYS: u64 = 600;

fn options() -> Options {
    Options {
        background_work: false,
        ..bounded_options(MAX_OPEN)
    }
}

/// Descriptors this process holds on `.sst` files of `dir` that were
/// unlinked (Linux shows them as "... (deleted)").
#[cfg(target_os = "linux")]
fn deleted_table_descriptors(dir: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(dir))
        .map(|t| t.to_string_lossy().into_owned())
        .filter(|t| t.contains(".sst") && t.ends_with(" (deleted)"))
        .count()
}

#[test]
fn the_file_of_a_compacted_away_table_is_closed_once_no_reader_holds_it() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut compactions_seen = 0;
    for round in 0..8 {
        // Each round overwrites every key: flushes and the compactions
        // they trigger replace tables whose files the reads below opened.
        for i in 0..KEYS {
            db.put(&key(i), &value(i, round)).unwrap();
        }
        for i in 0..KEYS {
            assert_eq!(
                db.get(&key(i)).unwrap(),
                Some(value(i, round)),
                "round {round}: key {i}"
            );
        }
        let stats = db.stats();
        compactions_seen = stats.compactions;
        // No reader is held: every file in the set is a live table's.
        let open = stats.open_table_files.unwrap();
        assert!(
            open <= stats.total.tables,
            "round {round}: {open} files open for {} live tables",
            stats.total.tables
        );
        #[cfg(target_os = "linux")]
        assert_eq!(
            deleted_table_descriptors(dir.path()),
            0,
            "round {round}: descriptors on deleted tables"
        );
    }
    assert!(compactions_seen > 0, "no compaction rewrote a table");
    db.close().unwrap();
}
