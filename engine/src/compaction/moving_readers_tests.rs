//! Readers against tables moving down: background flushes and
//! compactions (mostly trivial moves, since the writer appends ascending
//! keys) run while readers check every acknowledged write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::shape_model_tests::{Rng, key, options};
use crate::{Db, Options};

/// Background flushes and compactions (mostly trivial moves: the writer
/// appends ascending keys) while readers check that every acknowledged
/// write is visible at its version or a later one.
#[test]
fn readers_see_every_acknowledged_write_while_tables_move_down() {
    const KEYS: u64 = 6000;
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        background_work: true,
        ..options(true)
    };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let latest: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let written = Arc::new(AtomicU64::new(0));
    let parse = |v: &[u8]| -> u64 {
        let s = std::str::from_utf8(v).unwrap();
        s.rsplit_once(':').unwrap().1.parse().unwrap()
    };
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (db, latest, written) =
                (Arc::clone(&db), Arc::clone(&latest), Arc::clone(&written));
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + r);
                let mut reads = 0u64;
                loop {
                    let n = written.load(Ordering::Acquire);
                    if n >= KEYS {
                        return reads;
                    }
                    if n == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let k = rng.below(n);
                    let want = latest[k as usize].load(Ordering::Acquire);
                    let got = db.get(&key(k)).unwrap();
                    let got = got.map(|v| parse(&v));
                    assert!(
                        got.is_some_and(|g| g >= want),
                        "key {k}: got version {got:?}, acknowledged {want}"
                    );
                    reads += 1;
                }
            })
        })
        .collect();
    let mut rng = Rng(99);
    let mut version = 0u64;
    let mut put = |k: u64| {
        version += 1;
        db.put(&key(k), format!("{k}:{version}").as_bytes())
            .unwrap();
        latest[k as usize].fetch_max(version, Ordering::Release);
    };
    for i in 0..KEYS {
        // Every key in order; now and then an overwrite of an old one (a
        // table that then meets the moved ones by a key or two).
        put(i);
        written.store(i + 1, Ordering::Release);
        if i > 10 && rng.below(8) == 0 {
            put(rng.below(i));
        }
    }
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    eprintln!(
        "{reads} reads; {} flushes, {} trivial moves, {} compactions",
        stats.flushes, stats.trivial_moves, stats.compactions
    );
    assert!(stats.trivial_moves > 0);
}
