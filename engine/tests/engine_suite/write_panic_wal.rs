//! A panic (a bug, here in a `FileSystem` the caller supplied) in the
//! middle of a WAL append, half the record written: the write is not
//! acknowledged, and writes must stop, as for any panic under the write
//! lock. Before, the next put was appended after the torn record and
//! acknowledged, and the reopen could not read past the tear: the store
//! did not open (or lost that acknowledged put).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm::fs::{FileSystem, FsResult, RealFs};
use bloomlsm::sstable::WritableFile;
use bloomlsm::{Db, Error, Options, StopCause, SyncMode};

use common::real_fs_methods::real_fs_methods;
use common::scratch_dir;

/// `RealFs`, except that once armed, the next write to a WAL writes half
/// its bytes and panics.
#[derive(Debug, Default)]
struct PanicsMidWalWrite {
    armed: Arc<AtomicBool>,
}

#[derive(Debug)]
struct HalfThenPanic {
    inner: Box<dyn WritableFile>,
    armed: Arc<AtomicBool>,
}

impl Write for HalfThenPanic {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > 1 && self.armed.swap(false, Ordering::SeqCst) {
            self.inner.write_all(&buf[..buf.len() / 2])?;
            panic!("injected panic in a WAL write");
        }
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl WritableFile for HalfThenPanic {
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
}

impl FileSystem for PanicsMidWalWrite {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        let inner = RealFs.create(path)?;
        if path.extension().is_some_and(|x| x == "wal") {
            return Ok(Box::new(HalfThenPanic {
                inner,
                armed: Arc::clone(&self.armed),
            }));
        }
        Ok(inner)
    }
    real_fs_methods!(append_at overwrite open_read open_read_direct read_all rename remove list
        create_dir_all remove_dir sync_dir exists lock lock_shared);
}

fn options(sync: SyncMode) -> Options {
    Options {
        sync,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn a_panic_in_a_wal_append_stops_writes_and_the_store_reopens() {
    torn_append(SyncMode::Never);
}

/// The WAL's header says every record was fsynced: recovery reads it
/// strictly, and the torn record is still only its tail.
#[test]
fn a_panic_in_a_synced_wal_append_stops_writes_and_the_store_reopens() {
    torn_append(SyncMode::Always);
}

fn torn_append(sync: SyncMode) {
    let dir = scratch_dir();
    let fs = Arc::new(PanicsMidWalWrite::default());
    let db = Db::open_with_fs(
        dir.path(),
        options(sync),
        Arc::clone(&fs) as Arc<dyn FileSystem>,
    )
    .unwrap();
    for i in 0..100 {
        db.put(&key(i), b"v").unwrap();
    }
    fs.armed.store(true, Ordering::SeqCst);
    let torn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.put(b"torn", b"t")));
    assert!(torn.is_err(), "the append panics");
    assert!(!fs.armed.load(Ordering::SeqCst));
    let next = db.put(b"after", b"a");
    let acknowledged = next.is_ok();
    drop(db);
    // Whatever happened, the store opens with every acknowledged write.
    let db = Db::open(dir.path(), options(sync)).expect("the store reopens");
    for i in 0..100 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"v".to_vec()), "key {i}");
    }
    if acknowledged {
        assert_eq!(
            db.get(b"after").unwrap(),
            Some(b"a".to_vec()),
            "acknowledged"
        );
    }
    db.close().unwrap();
    match next {
        Err(Error::WritesStopped(stop)) => assert_eq!(stop.cause(), StopCause::Panic),
        other => panic!("the put after the panic: {other:?}"),
    }
}
