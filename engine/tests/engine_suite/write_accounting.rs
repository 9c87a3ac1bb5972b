//! Per-level write accounting (`LevelStats::bytes_written`,
//! `bytes_compacted_read`, `bytes_moved_in`) on a deep tree of narrow
//! tables filled by background work: every byte of a live table was
//! written into its level or moved there, and, with no filter rebuild, the
//! bytes written minus the bytes compactions read are exactly the live bytes.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm::{Db, Options};

fn options() -> Options {
    Options {
        memtable_bytes: 16 << 10,
        target_file_bytes: 32 << 10,
        l1_bytes: 64 << 10,
        level_size_ratio: 4,
        num_levels: 6,
        ..Options::default()
    }
}

#[test]
fn bytes_written_and_read_per_level_account_for_every_live_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0u64..40_000 {
        // Half ascending keys (tables that move down without a rewrite),
        // half random overwrites and deletes (tables that are merged).
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = if i.is_multiple_of(2) { i } else { x % 40_000 };
        let key = format!("key{k:08}");
        if x.is_multiple_of(5) {
            db.delete(key.as_bytes()).unwrap();
        } else {
            db.put(key.as_bytes(), &[b'v'; 40]).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let s = db.stats();
    // A deep tree: the levels compactions wrote into or moved tables
    // into, not the levels holding tables once settled. On background
    // threads the settled shape is the scheduler's: L0 may have just gone
    // down whole and the level below it may have just drained into the
    // next (a loaded machine left tables [0, 0, 0, 2, 7, 39] and
    // [3, 0, 0, 0, 6, 37], one level short of two sorted levels and L0).
    let tables: Vec<u64> = s.levels.iter().map(|l| l.tables).collect();
    let sorted_written = s.levels[1..]
        .iter()
        .filter(|l| l.bytes_written + l.bytes_moved_in > 0)
        .count();
    let sorted_in_use = s.levels[1..].iter().filter(|l| l.tables > 0).count();
    println!(
        "tables {tables:?}, {sorted_written} levels below L0 written into; {} merges, {} moves",
        s.compactions, s.trivial_moves
    );
    assert!(
        sorted_written >= 3 && sorted_in_use >= 2,
        "a deep tree: {sorted_written} levels below L0 written into, tables {tables:?}"
    );
    assert!(
        s.compactions > 0 && s.trivial_moves > 0,
        "{} merges, {} moves",
        s.compactions,
        s.trivial_moves
    );

    let sum = |f: fn(&bloomlsm::LevelStats) -> u64| s.levels.iter().map(f).sum::<u64>();
    assert_eq!(sum(|l| l.bytes_written), s.bytes_written);
    assert_eq!(sum(|l| l.bytes_compacted_read), s.bytes_compacted_read);
    assert_eq!(s.total.bytes_written, s.bytes_written);
    assert_eq!(s.levels[0].bytes_moved_in, 0, "nothing moves into L0");
    assert_eq!(s.levels[0].writes_into, s.flushes);
    assert_eq!(sum(|l| l.writes_into), s.flushes + s.compactions);
    assert!(sum(|l| l.bytes_moved_in) > 0);
    for (level, l) in s.levels.iter().enumerate() {
        assert!(
            l.file_bytes <= l.bytes_written + l.bytes_moved_in,
            "L{level}: {} live bytes, only {} written and {} moved in",
            l.file_bytes,
            l.bytes_written,
            l.bytes_moved_in
        );
    }
    let flushed_only = s.levels[1..].iter().all(|l| l.bytes_written == 0);
    assert!(!flushed_only, "compactions wrote below L0");
    assert_eq!(
        s.bytes_written - s.bytes_compacted_read,
        s.total.file_bytes,
        "written minus compacted away must be what is live"
    );
}
