//! A compaction given up after its tables are written (the store shuts
//! down while `claim_written` would lower filters to make room for its
//! install), through the real `merge`: nothing installed, the outputs
//! deleted, no claim left held, every key found, and the next open (and
//! one after a power loss) recovers the tree as it was.

use std::sync::Arc;

use super::pick::{Compaction, DeeperRanges};
use crate::budget_test_shapes::{
    advance_sequence, filter_and_uniform_bytes, live_numbers, place, prefixed_key as key,
    static_budget_options,
};
use crate::fs::fault::FaultFs;
use crate::store_files::files_named;
use crate::{Db, FilterKind};

const BITS: f64 = 10.0;

fn memory(db: &Db) -> (u64, u64) {
    filter_and_uniform_bytes(db, BITS)
}

fn table_files(dir: &std::path::Path) -> Vec<String> {
    files_named(dir, "sst")
}

#[test]
fn a_compaction_given_up_after_its_write_leaves_the_store_as_it_was() {
    run(Stop::Shutdown);
}

/// The same compaction, whose room-making lowering after the write fails
/// at its install (the manifest write): the error leaves the same store.
#[test]
fn a_lowering_that_fails_after_the_write_leaves_the_store_as_it_was() {
    run(Stop::FailedLowering);
}

#[derive(PartialEq)]
enum Stop {
    Shutdown,
    FailedLowering,
}

fn run(stop: Stop) {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let fs_arc: Arc<dyn crate::fs::FileSystem> = Arc::new(fs.clone());
    let chunk: Vec<Vec<u8>> = (0..200).map(|i| key("k", i)).collect();
    {
        let db = Db::open_with_fs(
            dir.path(),
            static_budget_options(FilterKind::Ribbon, BITS),
            Arc::clone(&fs_arc),
        )
        .unwrap();
        advance_sequence(&db, 10_000);
        place(&db, 2, &chunk, 1_000, 8.0);
        db.close().unwrap();
    }
    let mut options = static_budget_options(FilterKind::Standard, BITS);
    options.target_file_bytes = 256;
    let db = Arc::new(Db::open_with_fs(dir.path(), options.clone(), Arc::clone(&fs_arc)).unwrap());
    advance_sequence(&db, 10_000);
    let (filters, uniform) = memory(&db);
    let over = (uniform - filters) as f64 * 8.0 / 20_000.0;
    let deep: Vec<_> = (0..20_000).map(|i| key("d", i)).collect();
    advance_sequence(&db, 50_000);
    place(&db, 3, &deep, 20_000, BITS + over - 0.01);
    let before = table_files(dir.path());
    let live_before: Vec<u64> = live_numbers(&db);
    let input = db.inner.current.load().version.levels[2][0].clone();

    // The store begins to shut down once the room-making loop is done,
    // while the merge writes.
    if stop == Stop::Shutdown {
        let hook = {
            let db = Arc::clone(&db);
            Arc::new(move || db.inner.bg.lock().shutdown = true) as Arc<dyn Fn() + Send + Sync>
        };
        db.inner.merge_pause.set(Some(hook));
    } else {
        let lowerings = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let hook = {
            let fs = fs.clone();
            let lowerings = Arc::clone(&lowerings);
            Arc::new(move || {
                lowerings.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                fs.fail_only_op(fs.ops());
            }) as Arc<dyn Fn() + Send + Sync>
        };
        db.inner.rebuild_pause.set(Some(hook));
    }
    let c = Compaction {
        level: 2,
        inputs: vec![input],
        output_level: 3,
        overlapping: Vec::new(),
        deeper: DeeperRanges::none(),
        grandparents: Vec::new(),
        next_pointer: None,
        trivial_move: false,
        bottom_cleanup: false,
    };
    let written_before = db
        .inner
        .counters
        .bytes_written
        .load(std::sync::atomic::Ordering::Relaxed);
    {
        let _compaction = db.inner.compaction_lock.lock();
        let merged = db.inner.merge(&c);
        assert_eq!(merged.is_err(), stop == Stop::FailedLowering, "{merged:?}");
    }
    db.inner.merge_pause.set(None);
    db.inner.rebuild_pause.set(None);
    fs.heal();
    let written = db
        .inner
        .counters
        .bytes_written
        .load(std::sync::atomic::Ordering::Relaxed)
        - written_before;
    assert!(
        written > 0,
        "the merge wrote nothing: not the case under test"
    );
    let live_after: Vec<u64> = live_numbers(&db);
    assert_eq!(live_after, live_before, "the tree changed");
    assert_eq!(db.inner.filter_claims.held(), 0, "a claim left held");
    assert_eq!(table_files(dir.path()), before, "files left or lost");
    for k in &chunk {
        assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()));
    }
    drop(c);
    let db = Arc::try_unwrap(db).ok().unwrap();
    // A failed lowering stopped writes, so the close leaves no close marker
    // and says why; a merge given up at shutdown stopped nothing.
    let closed = db.close();
    if stop == Stop::FailedLowering {
        assert!(
            matches!(closed, Err(crate::Error::WritesStopped(_))),
            "{closed:?}"
        );
    } else {
        closed.unwrap();
    }
    fs.set_revival(crate::fs::fault::Revival::All);
    fs.simulate_power_loss().unwrap();
    let db = Db::open_with_fs(dir.path(), options, fs_arc).unwrap();
    for k in chunk.iter().chain(deep.iter().step_by(97)) {
        assert_eq!(db.get(k).unwrap(), Some(b"v".to_vec()), "{k:?}");
    }
    let (filters, uniform) = memory(&db);
    assert!(
        filters as f64 <= uniform as f64 * 1.02,
        "{filters} vs {uniform}"
    );
    db.close().unwrap();
    assert_eq!(table_files(dir.path()), before, "orphans after reopen");
}
