//! A get from a thread-local destructor (a per-thread cache or session
//! that reads the store as its thread ends) under `use_direct_reads`: the
//! direct reads' per-thread bounce buffer may already be destroyed then
//! (thread-local destructors run in the reverse order of first use). Reads
//! through the page cache answer there; direct reads must answer the same,
//! not panic (a panic escaping a thread-local destructor aborts).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::cell::RefCell;
use std::sync::{Arc, mpsc};

use bloomlsm::{Db, Options};
use common::disk_dir;

type Answer = std::thread::Result<bloomlsm::Result<Option<Vec<u8>>>>;

/// Gets `key` from the store as its thread ends, and sends the answer.
struct GetOnDrop {
    job: Option<(Arc<Db>, Vec<u8>, mpsc::Sender<Answer>)>,
}

impl Drop for GetOnDrop {
    fn drop(&mut self) {
        if let Some((db, key, done)) = self.job.take() {
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.get(&key)));
            let _ = done.send(got);
        }
    }
}

thread_local! {
    static AT_EXIT: RefCell<GetOnDrop> = const { RefCell::new(GetOnDrop { job: None }) };
}

#[test]
fn a_get_from_a_thread_local_destructor_answers() {
    let Some(dir) = disk_dir() else { return };
    for direct in [false, true] {
        let path = dir.path().join(format!("store-{direct}"));
        let options = Options {
            use_direct_reads: direct,
            // No block stays cached: every get of a table key reads a file.
            block_cache_bytes: 1,
            ..Options::default()
        };
        let db = Arc::new(Db::open(&path, options).unwrap());
        for i in 0..100u32 {
            db.put(format!("key{i:03}").as_bytes(), &[i as u8; 100])
                .unwrap();
        }
        db.flush().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = Arc::clone(&db);
        std::thread::spawn(move || {
            // The destructor's thread-local is first used before any read,
            // so it is destroyed after whatever the reads set up.
            AT_EXIT
                .with(|e| e.borrow_mut().job = Some((Arc::clone(&reader), b"key042".to_vec(), tx)));
            assert_eq!(reader.get(b"key007").unwrap(), Some(vec![7; 100]));
        })
        .join()
        .unwrap();
        let got = rx.recv().unwrap();
        let got = got.unwrap_or_else(|_| panic!("direct={direct}: the get panicked"));
        assert_eq!(got.unwrap(), Some(vec![42; 100]), "direct={direct}");
    }
}
