//! The bound on open table files: never more held open than the bound,
//! files closed by it reopen and read right, from many threads at once.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;

use super::*;
use crate::fs::RealFs;

/// Byte `i` of file `n`.
fn byte(n: u64, i: usize) -> u8 {
    (i as u64 ^ n.wrapping_mul(131)).wrapping_mul(31) as u8
}

const FILE_BYTES: usize = 10_000;

/// `count` files in a fresh directory and a lazy file for each.
fn files(count: u64, open_files: &Arc<OpenTableFiles>) -> (tempfile::TempDir, Vec<LazyTableFile>) {
    let dir = tempfile::tempdir().unwrap();
    let lazy = (0..count)
        .map(|n| {
            let path = dir.path().join(format!("{n:06}.sst"));
            std::fs::write(
                &path,
                (0..FILE_BYTES).map(|i| byte(n, i)).collect::<Vec<u8>>(),
            )
            .unwrap();
            LazyTableFile::new(n, path, Arc::new(RealFs), false, Arc::clone(open_files))
        })
        .collect();
    (dir, lazy)
}

/// Descriptors this process has open on files in `dir`.
fn descriptors_in(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn check_read(file: &LazyTableFile, n: u64, offset: usize, len: usize) {
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset as u64).unwrap();
    let want: Vec<u8> = (offset..offset + len).map(|i| byte(n, i)).collect();
    assert!(buf == want, "file {n} at {offset}+{len}");
}

#[test]
fn never_more_files_open_than_the_bound_and_closed_ones_reopen() {
    let open_files = Arc::new(OpenTableFiles::new(3));
    let (dir, lazy) = files(10, &open_files);
    assert_eq!(
        descriptors_in(dir.path()),
        0,
        "nothing opened before a read"
    );
    for round in 0..3 {
        for (n, file) in lazy.iter().enumerate() {
            check_read(file, n as u64, 17 * round + n, 100);
            assert!(open_files.len() <= 3);
            assert!(
                descriptors_in(dir.path()) <= 3,
                "{}",
                descriptors_in(dir.path())
            );
        }
    }
    assert_eq!(file_len(&lazy[4]), FILE_BYTES as u64);
    // Ten files read round robin through three places: after the first
    // round at most three are still open when a round starts.
    assert!(open_files.opens() >= 10 + 7 + 7, "{}", open_files.opens());
}

fn file_len(file: &LazyTableFile) -> u64 {
    file.len().unwrap()
}

#[test]
fn a_file_read_again_and_again_is_opened_once() {
    let open_files = Arc::new(OpenTableFiles::new(2));
    let (dir, lazy) = files(2, &open_files);
    for i in 0..100 {
        check_read(&lazy[i % 2], (i % 2) as u64, i, 1000);
    }
    assert_eq!(open_files.opens(), 2);
    assert_eq!(descriptors_in(dir.path()), 2);
}

#[test]
fn closing_a_file_lets_go_of_its_descriptor() {
    let open_files = Arc::new(OpenTableFiles::new(8));
    let (dir, lazy) = files(3, &open_files);
    for (n, file) in lazy.iter().enumerate() {
        check_read(file, n as u64, 0, 10);
    }
    assert_eq!(descriptors_in(dir.path()), 3);
    open_files.close(1);
    assert_eq!(descriptors_in(dir.path()), 2);
    assert_eq!(open_files.len(), 2);
    check_read(&lazy[1], 1, 5000, 5000);
    assert_eq!(open_files.opens(), 4);
}

#[test]
fn a_file_that_cannot_be_reopened_is_a_reopen_error_with_the_os_number() {
    let open_files = Arc::new(OpenTableFiles::new(1));
    let (dir, lazy) = files(2, &open_files);
    check_read(&lazy[0], 0, 0, 10);
    std::fs::remove_file(dir.path().join("000000.sst")).unwrap();
    // Still open: the unlinked file reads on.
    check_read(&lazy[0], 0, 100, 10);
    // Once let go, it cannot be opened again.
    open_files.close(0);
    check_read(&lazy[1], 1, 0, 10);
    let mut buf = [0; 10];
    let e = lazy[0].read_exact_at(&mut buf, 0).unwrap_err();
    // The read's error says the reopen failed (no block was read), with
    // the OS error inside, of its kind.
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    let reopen = e
        .get_ref()
        .and_then(|r| r.downcast_ref::<bloomlsm_sstable::ReopenError>())
        .unwrap_or_else(|| panic!("not a ReopenError: {e:?}"));
    assert_eq!(reopen.source.raw_os_error(), Some(libc::ENOENT), "{e}");
    assert_eq!(
        crate::Error::io("t.sst", e).raw_os_error(),
        Some(libc::ENOENT)
    );
}

#[test]
fn readers_on_many_threads_read_right_through_a_small_bound() {
    let open_files = Arc::new(OpenTableFiles::new(2));
    let (dir, lazy) = files(12, &open_files);
    let lazy = Arc::new(lazy);
    let threads = 4;
    std::thread::scope(|s| {
        for t in 0..threads {
            let lazy = Arc::clone(&lazy);
            let dir = dir.path();
            s.spawn(move || {
                for i in 0..400usize {
                    let n = (i * 7 + t * 3) % lazy.len();
                    check_read(&lazy[n], n as u64, (i * 13) % 9000, 1000);
                    // A file let go stays open only while a read that took
                    // it is in flight: one per thread at most.
                    let open = descriptors_in(dir);
                    assert!(open <= 2 + threads, "{open} open");
                }
            });
        }
    });
    assert!(descriptors_in(dir.path()) <= 2);
}

#[test]
fn a_failed_open_is_not_counted_as_an_open() {
    // `Stats::table_file_opens` counts files opened: an open that failed
    // (the file gone, EMFILE) opened nothing, and a store under a
    // descriptor limit must not report ever more opens for reads that
    // each failed.
    let open_files = Arc::new(OpenTableFiles::new(1));
    let (dir, lazy) = files(1, &open_files);
    check_read(&lazy[0], 0, 0, 10);
    assert_eq!(open_files.opens(), 1);
    std::fs::remove_file(dir.path().join("000000.sst")).unwrap();
    open_files.close(0);
    let mut buf = [0; 10];
    for _ in 0..3 {
        lazy[0].read_exact_at(&mut buf, 0).unwrap_err();
    }
    assert_eq!(open_files.opens(), 1, "failed opens counted");
    assert_eq!(open_files.len(), 0);
}

#[test]
fn the_largest_bound_allocates_nothing_up_front() {
    // `Some(usize::MAX)` is a valid option ("no bound" in effect): the
    // set must not size anything by it (quick_cache 0.7 allocates its
    // table lazily; an eager `with_capacity` would abort the open).
    let open_files = Arc::new(OpenTableFiles::new(usize::MAX));
    let (_dir, lazy) = files(3, &open_files);
    for (n, file) in lazy.iter().enumerate() {
        check_read(file, n as u64, 10, 100);
    }
    assert_eq!(open_files.len(), 3);
}
