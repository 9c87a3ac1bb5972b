//! Every live table keeps its file open, so a store can run out of file
//! descriptors (`RLIMIT_NOFILE`). Then the flush or compaction that cannot
//! open its output stops writes with the OS error (`EMFILE`) in its
//! `StopCause`, reads of what is stored go on, and a reopen under a higher
//! limit holds every acknowledged write.
//!
//! One test in its own binary: it lowers the limit of the whole process.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod common;

use bloomlsm::{Db, Error, Options, StopCause};

use common::scratch_dir;

/// Narrow tables, work done inline: every few puts a new table file.
fn options() -> Options {
    Options {
        memtable_bytes: 4 << 10,
        target_file_bytes: 4 << 10,
        l1_bytes: 16 << 10,
        background_work: false,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:09}", i.wrapping_mul(2_654_435_761) % 1_000_000_007).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("{i:0100}").into_bytes()
}

fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

fn set_soft_limit(soft: u64) -> libc::rlimit {
    // SAFETY: rlimit is plain old data; getrlimit fills it.
    let mut old: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a valid rlimit the call writes.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    let new = libc::rlimit {
        rlim_cur: soft.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit the call reads.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) }, 0);
    old
}

#[test]
fn running_out_of_descriptors_stops_writes_with_emfile_and_loses_nothing() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    // Room for the store's WAL, manifest and about 40 tables.
    let old = set_soft_limit(open_descriptors() + 40);
    let mut written = 0;
    let stop = loop {
        assert!(written < 1_000_000, "writes never stopped");
        match db.put(&key(written), &value(written)) {
            Ok(()) => written += 1,
            Err(Error::WritesStopped(stop)) => break stop,
            Err(e) => {
                // The put whose own work failed (its WAL rotation, say):
                // an I/O error of its own, then refusals.
                assert!(e.io_kind().is_some(), "{e}");
                match db.put(b"next", b"put") {
                    Err(Error::WritesStopped(stop)) => break stop,
                    other => panic!("after {e}: {other:?}"),
                }
            }
        }
    };
    assert!(written > 100, "stopped after {written} puts: {stop}");
    assert!(
        matches!(
            stop.cause(),
            StopCause::Io {
                raw_os_error: Some(libc::EMFILE),
                ..
            }
        ),
        "{stop:?}"
    );
    // What is stored still reads (every table already open keeps its
    // descriptor; the memtables answer the rest).
    for i in (0..written).step_by(7) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    let closed = db.close();
    assert!(
        matches!(&closed, Err(Error::WritesStopped(s)) if *s == stop),
        "{closed:?}"
    );

    set_soft_limit(old.rlim_cur);
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..written {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.put(b"after", b"reopen").unwrap();
    db.close().unwrap();
}
