//! Old views are freed: every `SuperVersion`, `Version`, memtable and
//! table handle the store ever made visible is dropped once no iterator,
//! snapshot or job holds it. Weak references to each one seen (after
//! every round of writes, and the one each held iterator took) must all
//! be dead once the iterators and snapshots are gone and the store has
//! settled, except those the current view holds. Deep narrow trees,
//! overwrites and deletes, filter rebuilds and rebalancing, work inline
//! and in the background, and a bound on open files.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::{Arc, Weak};

use crate::memtable::MemTable;
use crate::version::{SuperVersion, TableHandle, Version};
use crate::{Db, FilterPolicy, Options};

fn options(background_work: bool) -> Options {
    Options {
        filter_policy: FilterPolicy::Optimized { bits_per_key: 6.0 },
        block_size: 128,
        memtable_bytes: 2048,
        target_file_bytes: 1024,
        l1_bytes: 2048,
        level_size_ratio: 2,
        num_levels: 7,
        l0_compaction_trigger: 2,
        background_work,
        max_open_files: Some(2),
        ..Options::default()
    }
}

#[derive(Default)]
struct Seen {
    views: Vec<Weak<SuperVersion>>,
    versions: Vec<Weak<Version>>,
    mems: Vec<Weak<MemTable>>,
    tables: Vec<Weak<TableHandle>>,
}

impl Seen {
    fn record(&mut self, db: &Db) {
        let sv = db.inner.current.load_full();
        self.views.push(Arc::downgrade(&sv));
        self.versions.push(Arc::downgrade(&sv.version));
        for m in std::iter::once(&sv.mem).chain(&sv.imm) {
            self.mems.push(Arc::downgrade(m));
        }
        for t in sv.version.levels.iter().flatten() {
            self.tables.push(Arc::downgrade(t));
        }
    }
}

/// The distinct ones still alive (one may be seen more than once).
fn alive<T>(weak: &[Weak<T>]) -> Vec<Arc<T>> {
    let mut alive: Vec<Arc<T>> = Vec::new();
    for a in weak.iter().filter_map(Weak::upgrade) {
        if !alive.iter().any(|b| Arc::ptr_eq(&a, b)) {
            alive.push(a);
        }
    }
    alive
}

#[test]
fn every_view_no_reader_holds_is_freed() {
    for background_work in [false, true] {
        let dir = crate::scratch_dirs::scratch_dir();
        let db = Db::open(dir.path(), options(background_work)).unwrap();
        let mut seen = Seen::default();
        let mut iters = Vec::new();
        let mut snapshots = Vec::new();
        let mut rng = 22u64;
        for round in 0..40u64 {
            for i in 0..60u64 {
                rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let k = format!("k{:05}", (rng >> 33) % 300).into_bytes();
                if i.is_multiple_of(3) {
                    db.delete(&k).unwrap();
                } else {
                    db.put(&k, format!("v{round}-{i}-{}", "x".repeat(20)).as_bytes())
                        .unwrap();
                }
            }
            seen.record(&db);
            if round.is_multiple_of(4) {
                let mut it = db.scan::<&[u8], _>(..).unwrap();
                it.next();
                iters.push(it);
                snapshots.push(db.snapshot());
            }
            if round % 9 == 8 {
                iters.drain(..iters.len() / 2);
                snapshots.drain(..snapshots.len() / 2);
            }
            if round == 20 {
                db.rebuild_filters(FilterPolicy::Uniform { bits_per_key: 3.0 })
                    .unwrap();
            }
        }
        drop(iters);
        drop(snapshots);
        db.wait_for_background_work().unwrap();
        seen.record(&db);
        let what = format!("background_work {background_work}");
        // A background thread's cycle may still hold the view before the
        // settle's last install for a moment after the wait returns: wait
        // until none does (the deadline only stops a hang). Inline nothing
        // else holds a view.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while background_work
            && alive(&seen.views).len() > 1
            && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
        let sv = db.inner.current.load_full();
        let views = alive(&seen.views);
        assert_eq!(views.len(), 1, "{what}: views alive");
        assert!(Arc::ptr_eq(&views[0], &sv), "{what}");
        drop(views);
        assert_eq!(alive(&seen.versions).len(), 1, "{what}: versions alive");
        let mems = alive(&seen.mems);
        assert!(sv.imm.is_empty(), "{what}");
        assert_eq!(mems.len(), 1, "{what}: memtables alive");
        drop(mems);
        let live: usize = sv.version.levels.iter().map(Vec::len).sum();
        assert_eq!(
            alive(&seen.tables).len(),
            live,
            "{what}: table handles alive"
        );
        // The current view is held by the store and by `sv` alone (with
        // background threads, a cycle may load it at any moment).
        if !background_work {
            assert_eq!(Arc::strong_count(&sv), 2, "{what}");
        }
        drop(sv);
        db.close().unwrap();
        // Closed: nothing of the store's views is left.
        assert!(alive(&seen.views).is_empty(), "{what}: after close");
        assert!(alive(&seen.tables).is_empty(), "{what}: after close");
    }
}
