//! Reads through snapshots racing a close: every answer is the store's
//! (the value written, each key present) or `Closed`, never the emptied
//! view of the closed store read as its content (a key reported absent,
//! a scan short of pairs). Deep narrow trees, work inline and in the
//! background; several closes per run. Pass or fail depends on no
//! thread's timing: any wrong answer fails, whenever it comes.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::{Db, Error, Options};
use common::narrow_tree::narrow_tree_options;
use common::{key, scratch_dir, value};

const KEYS: u64 = 300;

fn options(background_work: bool) -> Options {
    Options {
        background_work,
        ..narrow_tree_options()
    }
}

#[test]
fn reads_racing_a_close_answer_the_store_or_closed() {
    let dir = scratch_dir();
    for round in 0..8u64 {
        let db = Db::open(dir.path(), options(round % 2 == 0)).unwrap();
        if round == 0 {
            for i in 0..KEYS {
                db.put(&key(i), &value(i)).unwrap();
            }
        }
        let started = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..3u64)
            .map(|t| {
                let snapshot = db.snapshot();
                let iter = db.scan::<&[u8], _>(..).unwrap();
                let started = Arc::clone(&started);
                std::thread::spawn(move || {
                    let mut iter = Some(iter);
                    let mut i = t;
                    loop {
                        started.store(true, Ordering::Release);
                        let k = i % KEYS;
                        match snapshot.get(&key(k)) {
                            Ok(v) => assert_eq!(v, Some(value(k)), "round {round} key {k}"),
                            Err(Error::Closed) => break,
                            Err(e) => panic!("{e}"),
                        }
                        match snapshot.scan(key(k)..key(k + 3)) {
                            Ok(it) => {
                                let mut n = 0;
                                for r in it {
                                    match r {
                                        Ok(_) => n += 1,
                                        Err(Error::Closed) => {
                                            n = usize::MAX;
                                            break;
                                        }
                                        Err(e) => panic!("{e}"),
                                    }
                                }
                                if n != usize::MAX {
                                    assert_eq!(n as u64, 3.min(KEYS - k), "round {round}");
                                }
                            }
                            Err(Error::Closed) => break,
                            Err(e) => panic!("{e}"),
                        }
                        if let Some(it) = iter.as_mut() {
                            match it.next() {
                                Some(Ok(_)) => {}
                                Some(Err(Error::Closed)) | None => iter = None,
                                Some(Err(e)) => panic!("{e}"),
                            }
                        }
                        i += 7;
                    }
                    // Once closed, closed for good.
                    assert!(matches!(snapshot.get(&key(0)), Err(Error::Closed)));
                })
            })
            .collect();
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        for i in (0..KEYS).step_by(5) {
            db.put(&key(i), &value(i)).unwrap();
        }
        db.close().unwrap();
        for r in readers {
            r.join().unwrap();
        }
    }
}
