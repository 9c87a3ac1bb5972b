//! A filter rebuild that panics in its second pass (the tables flushed
//! while the first pass ran, rebuilt after the switch to the new policy)
//! leaves the old policy live, as a failed rebuild does: `Db::options`
//! promises the new policy only once `rebuild_filters` returned `Ok`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Db, FilterPolicy, Options, StopCause, SyncMode, WriteBatch};

#[test]
fn a_rebuild_that_panics_after_the_policy_switch_leaves_the_old_policy() {
    let dir = crate::scratch_dirs::scratch_dir();
    let old = FilterPolicy::Uniform { bits_per_key: 10.0 };
    let new = FilterPolicy::Uniform { bits_per_key: 4.0 };
    let db = Db::open(
        dir.path(),
        Options {
            sync: SyncMode::Never,
            // The hook's write must not run inline work: that waits for
            // the compaction lock the rebuild holds.
            background_work: true,
            filter_policy: old.clone(),
            ..Options::default()
        },
    )
    .unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    // The first pause (first pass, old policy still live): a flush makes a
    // table the second pass must rebuild. The second pause panics.
    let calls = Arc::new(AtomicUsize::new(0));
    let inner = Arc::clone(&db.inner);
    let hook_calls = Arc::clone(&calls);
    db.inner.rebuild_pause.set(Some(Arc::new(move || {
        if hook_calls.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut batch = WriteBatch::new();
            batch.put(b"b", b"2");
            inner.write(batch).unwrap();
            inner.rotate_memtable(&mut inner.write.lock()).unwrap();
            inner.flush_all_immutable().unwrap();
        } else {
            panic!("injected rebuild panic");
        }
    })));
    let rebuilt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.rebuild_filters(new.clone())
    }));
    db.inner.rebuild_pause.set(None); // The hook holds the store: no cycle.
    assert!(rebuilt.is_err(), "the second pass did not run: {rebuilt:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    match db.put(b"c", b"3") {
        Err(crate::Error::WritesStopped(stop)) => assert_eq!(stop.cause(), StopCause::Panic),
        other => panic!("{other:?}"),
    }
    // The rebuild never returned `Ok`: the old policy is the live one.
    assert_eq!(db.options().filter_policy, old);
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    drop(db);
}
