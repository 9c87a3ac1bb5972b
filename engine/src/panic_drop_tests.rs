//! A panic (a bug) in inline work that nobody catches unwinds through the
//! caller's frames, dropping the `Db` it owns: the drop (the close, best
//! effort) must neither panic again (an abort) nor hang, must release the
//! directory lock, and the store must reopen with every acknowledged
//! write.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::{Db, Options, SyncMode};

fn options() -> Options {
    Options {
        sync: SyncMode::Never,
        memtable_bytes: 4 << 10,
        l0_compaction_trigger: 2,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 7919 % 100_000).into_bytes()
}

#[test]
fn a_store_dropped_by_an_uncaught_inline_panic_reopens_with_every_write() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = dir.path().to_path_buf();
    let acknowledged = Arc::new(AtomicU64::new(0));
    let (done, finished) = mpsc::channel();
    let counted = Arc::clone(&acknowledged);
    let owner = std::thread::spawn(move || {
        let _signal = Finished(done);
        let db = Db::open(&path, options()).unwrap();
        db.inner
            .merge_pause
            .set(Some(Arc::new(|| panic!("injected compaction panic"))));
        for i in 0..100_000 {
            // Uncaught: the first compaction's panic unwinds out of here.
            db.put(&key(i), format!("{i:032}").as_bytes()).unwrap();
            counted.store(i + 1, Ordering::SeqCst);
        }
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("HANG: the unwinding thread never finished dropping the store");
    assert!(owner.join().is_err(), "the thread panicked");
    let written = acknowledged.load(Ordering::SeqCst);
    assert!(written > 0 && written < 100_000, "{written}");
    let db = Db::open(dir.path(), options()).expect("the drop released the lock");
    for i in 0..written {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(format!("{i:032}").into_bytes()),
            "key {i}"
        );
    }
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}

/// Sends when dropped: the last thing the thread's unwind does.
struct Finished(mpsc::Sender<()>);

impl Drop for Finished {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}
