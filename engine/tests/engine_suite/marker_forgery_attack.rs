//! Review rev6 attack on the close marker's vouching
//! (`wal::ends_with_close_marker`, `replay::replay_logs`): an intact close
//! marker at a WAL's end makes replay read that WAL and every older one
//! strictly, as if fsynced whole. Bytes that merely look like a marker at
//! a WAL's end must not: a value that ends with a closed WAL's last 20
//! bytes (a backup of a WAL stored in the store, say) puts them there when
//! its write is the last one logged, and a power loss that lost a page of
//! that `SyncMode::Never` WAL before them must end the log there (a prefix
//! of the writes), never refuse the store as corrupt.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::{FaultFs, UnsyncedFate};
use bloomlsm::{Db, Options, SyncMode};

use common::{Model, contents};

const PAGE: usize = 4096;

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        background_work: false,
        ..Options::default()
    }
}

/// The newest WAL of the store in `dir` after `writes` puts and a clean
/// close (then one more put and close when `reopen`, so its log is past
/// `writes`): its bytes end with the close marker.
fn closed_wal(dir: &Path, writes: u64, reopen: bool) -> Vec<u8> {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..writes {
        db.put(&common::key(i), b"backed up").unwrap();
    }
    db.close().unwrap();
    if reopen {
        let db = Db::open(dir, options()).unwrap();
        db.put(b"last", b"backed up").unwrap();
        db.close().unwrap();
    }
    let bytes = std::fs::read(common::newest_wal(dir)).unwrap();
    common::close_marker_offset(&bytes);
    bytes
}

/// The store in `dir` (holding tables, or not yet made) opened on a
/// `FaultFs` under `UnsyncedFate::Pages(seed)`, three writes whose WAL
/// spans three pages, the last one's value `backup`, then a power loss
/// with the store running. With `own_page`, the last write starts its
/// WAL's third page. Returns the prefixes of the writes and whether the
/// power loss lost a page before the last write's marker-like bytes and
/// kept them at the WAL's end.
fn write_and_lose_power(
    dir: &Path,
    seed: u64,
    backup: &[u8],
    own_page: bool,
) -> (Vec<Model>, bool) {
    let fs = FaultFs::new();
    fs.set_unsynced_fate(UnsyncedFate::Pages(seed));
    let db = Db::open_with_fs(dir, options(), Arc::new(fs.clone())).unwrap();
    let wal_len = || std::fs::metadata(common::newest_wal(dir)).unwrap().len() as usize;
    let mut models = vec![contents(&db)];
    let mut put = |i: u64, value: Vec<u8>| {
        db.put(&common::key(i), &value).unwrap();
        let mut m = models.last().unwrap().clone();
        m.insert(common::key(i), value);
        models.push(m);
    };
    let before = wal_len();
    put(100, vec![b'a'; 5000]);
    let overhead = wal_len() - before - 5000;
    let second = if own_page {
        2 * PAGE - wal_len() - overhead
    } else {
        3000
    };
    put(101, vec![b'b'; second]);
    assert!(!own_page || wal_len() == 2 * PAGE);
    put(102, backup.to_vec());
    // Every operation from here fails, the close's first fsync included.
    fs.fail_from_op(fs.ops());
    let _ = db.close();
    fs.heal();
    fs.simulate_power_loss().unwrap();
    let wal = std::fs::read(common::newest_wal(dir)).unwrap();
    let lost_early_page = wal
        .chunks(PAGE)
        .take(wal.len() / PAGE)
        .any(|p| p[p.len() - 64..].iter().all(|&b| b == 0));
    (
        models,
        lost_early_page && wal.ends_with(&backup[backup.len() - 20..]),
    )
}

/// For 48 seeds, both opens: every power loss opens with a prefix of the
/// writes. Returns the refusals and how many cases lost an early page
/// and kept the marker-like bytes.
fn refusals(store: impl Fn(&Path), backup: &[u8], own_page: bool) -> (Vec<String>, usize) {
    let mut refused = Vec::new();
    let mut lost_a_page = 0;
    for seed in 0..48u64 {
        for read_only in [false, true] {
            let dir = common::scratch_dir();
            store(dir.path());
            let (models, lost) = write_and_lose_power(dir.path(), seed, backup, own_page);
            lost_a_page += usize::from(lost);
            match common::open_either(dir.path(), options(), read_only) {
                Ok(db) => assert!(
                    models.contains(&contents(&db)),
                    "seed {seed} read_only {read_only}: not a prefix"
                ),
                Err(e) => refused.push(format!("seed {seed} read_only {read_only}: {e}")),
            }
        }
    }
    (refused, lost_a_page)
}

fn assert_none_refused((refused, lost_a_page): (Vec<String>, usize)) {
    assert!(
        lost_a_page > 0,
        "no seed lost an early page and kept the last"
    );
    assert!(
        refused.is_empty(),
        "{} power losses refused as corruption ({lost_a_page} lost an early page and \
         kept the value's marker-like bytes), e.g.:\n{}",
        refused.len(),
        refused
            .iter()
            .take(4)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The value is a copy of the store's own WAL from an earlier clean close:
/// its marker's sequence is one the log has since moved past (the reopen
/// flushed those writes), whatever the power loss kept of its write.
/// Before the fix (main at 50b5f3d): 32 of 96 power losses refused as
/// corruption (`BeforeIntact` at the first damaged record).
#[test]
fn a_value_holding_the_stores_own_closed_wal_does_not_make_a_power_loss_refused() {
    let origin = common::scratch_dir();
    let backup = closed_wal(origin.path(), 10, false);
    let store = |dir: &Path| {
        closed_wal(dir, 10, false);
    };
    assert_none_refused(refusals(store, &backup, false));
}

/// The value is another store's closed WAL, whose marker's sequence this
/// log could reach, in a write alone in the WAL's last page: when the
/// power loss keeps that page, the write is intact and ends at the file's
/// end with the marker-like bytes inside it. Before the fix: 38 of 96
/// power losses refused as corruption.
#[test]
fn a_value_holding_another_stores_closed_wal_does_not_make_a_power_loss_refused() {
    let origin = common::scratch_dir();
    let backup = closed_wal(origin.path(), 300, true);
    assert_none_refused(refusals(|_| {}, &backup, true));
}

/// Rounds of open, writes overwriting the same keys across several WAL
/// rotations, clean close, a power loss, and the newest WAL's header
/// rewrite undone (as on a file system without `overwrite`: the WAL ends
/// in a marker but says "unsynced"), checked by a read-only open and then
/// reopened read-write. Every acknowledged write is there and no
/// older version wins, in both sync modes. Would catch a marker written
/// at a sequence the log does not go on at (say `next_seq - 1`: refused
/// as `EmptyBatch`), or a reopen that reused the marker's sequence for
/// an older version.
#[test]
fn rounds_of_close_and_reopen_with_unsealed_marked_wals_keep_every_write() {
    for sync in [SyncMode::Always, SyncMode::Never] {
        let dir = common::scratch_dir();
        let options = Options {
            sync,
            memtable_bytes: 4 << 10,
            background_work: false,
            ..Options::default()
        };
        let mut model = Model::new();
        for round in 0..8u64 {
            let fs = FaultFs::new();
            fs.set_unsynced_fate(UnsyncedFate::Pages(round));
            let db = Db::open_with_fs(dir.path(), options.clone(), Arc::new(fs.clone())).unwrap();
            assert_eq!(contents(&db), model, "{sync:?} round {round}: reopened");
            for i in 0..60u64 {
                let key = common::key(i % 40);
                let value = format!("round {round} write {i} {}", "v".repeat(80)).into_bytes();
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            db.close().unwrap();
            fs.simulate_power_loss().unwrap();
            let newest = common::newest_wal(dir.path());
            let mut bytes = std::fs::read(&newest).unwrap();
            common::close_marker_offset(&bytes);
            if sync == SyncMode::Never {
                // The seal's rewrite undone: the header written at the
                // WAL's creation (flags 0), as without `overwrite`.
                assert_eq!(bytes[10] & 1, 1, "sealed");
                common::set_wal_flags(&mut bytes, 0);
                std::fs::write(&newest, &bytes).unwrap();
            }
            let ro = Db::open_read_only(dir.path(), options.clone()).unwrap();
            assert_eq!(contents(&ro), model, "{sync:?} round {round}: read-only");
            assert_eq!(ro.stats().wal_replay_cut, None, "{sync:?} round {round}");
        }
    }
}
