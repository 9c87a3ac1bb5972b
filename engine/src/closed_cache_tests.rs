//! A close lets go of the store's memory as well as its files: a
//! `Snapshot` or `DbIter` kept past the close holds the store's shared
//! state alive, and with it the block cache; its blocks were kept until
//! the last of them dropped, up to `block_cache_bytes` per closed store
//! for an embedder that keeps a snapshot across close and reopen cycles.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{Db, Options};

fn options(background_work: bool) -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        l1_bytes: 8 << 10,
        level_size_ratio: 3,
        num_levels: 7,
        block_size: 256,
        block_cache_bytes: 1 << 20,
        background_work,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 7919 % 3000).into_bytes()
}

#[test]
fn a_snapshot_or_iterator_kept_past_close_holds_no_cached_block() {
    let dir = crate::scratch_dirs::scratch_dir();
    let mut kept_snapshots = Vec::new();
    let mut kept_iters = Vec::new();
    for cycle in 0..4u64 {
        let background_work = cycle % 2 == 1;
        let db = Db::open(dir.path(), options(background_work)).unwrap();
        for i in 0..1500u64 {
            let k = key(i + cycle * 500);
            if i % 5 == 4 {
                db.delete(&k).unwrap();
            } else {
                db.put(&k, format!("{cycle}-{i:040}").as_bytes()).unwrap();
            }
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        assert!(
            db.inner
                .current
                .load()
                .version
                .levels
                .iter()
                .filter(|l| !l.is_empty())
                .count()
                >= 3,
            "cycle {cycle}: the tree is not deep"
        );
        let snapshot = db.snapshot();
        for i in 0..3000u64 {
            snapshot.get(&key(i)).unwrap();
        }
        let mut iter = db.scan::<&[u8], _>(..).unwrap();
        iter.next().unwrap().unwrap();
        let store = std::sync::Arc::clone(&db.inner);
        assert!(
            store.tables.cache().used_bytes() > 0,
            "cycle {cycle}: nothing cached"
        );
        db.close().unwrap();
        assert_eq!(
            store.tables.cache().used_bytes(),
            0,
            "cycle {cycle}: blocks of the closed store stay cached"
        );
        // Reads past the close refuse, and cache nothing again.
        assert!(matches!(snapshot.get(&key(1)), Err(crate::Error::Closed)));
        assert!(matches!(iter.next(), Some(Err(crate::Error::Closed))));
        assert_eq!(store.tables.cache().used_bytes(), 0, "cycle {cycle}");
        drop(store);
        kept_snapshots.push(snapshot);
        kept_iters.push(iter);
    }
}
