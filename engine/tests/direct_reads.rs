//! `Options::use_direct_reads`: table reads with `O_DIRECT` return exactly
//! what was written, really bypass the page cache, still pass through the
//! `FileSystem` (so faults are injected), and a file system that refuses
//! direct I/O makes `Db::open` fail naming the path, with no fallback.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, Options};

fn options(direct: bool) -> Options {
    Options {
        use_direct_reads: direct,
        // Small memtables and cache: many tables, and gets that read files.
        memtable_bytes: 64 << 10,
        block_cache_bytes: 16 << 10,
        target_file_bytes: 256 << 10,
        l1_bytes: 512 << 10,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 100_000_000).into_bytes()
}

/// Values of varied lengths, so blocks and entries sit at unaligned offsets
/// and the last block of each table ends at an unaligned file tail.
fn value(i: u32) -> Vec<u8> {
    let len = 1 + (i as usize * 37) % 700;
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

const N: u32 = 6000;

/// Whether `dir` is on a file system whose reads reach a device, so that
/// `read_bytes` of `/proc/self/io` counts them: not tmpfs or ramfs (memory
/// file systems, which newer kernels open with `O_DIRECT` too, as when
/// `TMPDIR=/dev/shm`).
fn reads_reach_a_device(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statfs is plain old data, for which all zero bytes are valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a statfs the call
    // fills; both outlive the call.
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statfs {}", dir.display());
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target.
    let kind = st.f_type as i64;
    let on_device = kind != TMPFS_MAGIC && kind != RAMFS_MAGIC;
    if !on_device {
        println!(
            "skipped: {} is in memory, no device reads to count",
            dir.display()
        );
    }
    on_device
}

fn fill(db: &Db) {
    for i in 0..N {
        db.put(&key(i), &value(i)).unwrap();
    }
    for i in (0..N).step_by(7) {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
}

fn check(db: &Db) {
    for i in 0..N {
        let want = (i % 7 != 0).then(|| value(i));
        assert_eq!(db.get(&key(i)).unwrap(), want, "key {i}");
        assert_eq!(db.get(format!("zz{i}").as_bytes()).unwrap(), None);
    }
    let mut count = 0;
    let mut last: Option<Vec<u8>> = None;
    for item in db.scan::<&[u8], _>(..).unwrap() {
        let (k, _) = item.unwrap();
        assert!(last.as_deref() < Some(k.as_slice()));
        last = Some(k);
        count += 1;
    }
    assert_eq!(count, (0..N).filter(|i| i % 7 != 0).count());
}

/// `flags` of every file of this process open read-only under `dir` whose
/// name ends `.sst` (tables being written are open write-only).
/// The open flags of every read-only descriptor of a live table of `dir`,
/// with the table's path.
fn table_fds(dir: &Path) -> Vec<(std::path::PathBuf, i32)> {
    let dir = dir.canonicalize().unwrap();
    let mut flags = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if target.starts_with(&dir) && target.extension().is_some_and(|e| e == "sst") {
            let info = std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                entry.file_name().to_string_lossy()
            ))
            .unwrap();
            let f = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .map(|v| i32::from_str_radix(v.trim(), 8).unwrap())
                .unwrap();
            if f & libc::O_ACCMODE == libc::O_RDONLY {
                flags.push((target, f));
            }
        }
    }
    flags
}

/// True when every live table of `dir` has exactly one `O_DIRECT`
/// descriptor (its point reads) and one buffered one (its bulk reads by
/// compactions and filter rebuilds).
fn each_table_reads_points_direct(dir: &Path) -> bool {
    let mut per_table = std::collections::BTreeMap::<_, (usize, usize)>::new();
    for (path, f) in table_fds(dir) {
        let (direct, buffered) = per_table.entry(path).or_default();
        if f & libc::O_DIRECT != 0 {
            *direct += 1;
        } else {
            *buffered += 1;
        }
    }
    !per_table.is_empty() && per_table.values().all(|&counts| counts == (1, 1))
}

/// `read_bytes` of an io accounting file (/proc/self/io for the process,
/// /proc/thread-self/io for the calling thread): bytes read from storage.
fn read_bytes_of(io: &str) -> u64 {
    std::fs::read_to_string(io)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap()
}

/// Bytes this process had read from storage.
fn device_read_bytes() -> u64 {
    read_bytes_of("/proc/self/io")
}

#[test]
fn direct_reads_return_what_was_written_through_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options(true)).unwrap();
        fill(&db);
        check(&db);
        db.compact().unwrap();
        check(&db);
        assert!(db.stats().total.data_blocks_read > 0);
    }
    let db = Db::open(dir.path(), options(true)).unwrap();
    check(&db);
    // The same store read through the page cache gives the same answers.
    drop(db);
    check(&Db::open(dir.path(), options(false)).unwrap());
}

#[test]
fn table_files_are_open_with_o_direct_only_when_asked() {
    for direct in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(direct)).unwrap();
        fill(&db);
        // A compaction running in the background opens its outputs (a direct
        // descriptor, then a buffered one) while the descriptors are listed.
        db.wait_for_background_work().unwrap();
        if direct {
            assert!(each_table_reads_points_direct(dir.path()));
        } else {
            let fds = table_fds(dir.path());
            assert!(!fds.is_empty());
            for (path, f) in fds {
                assert_eq!(f & libc::O_DIRECT, 0, "{} flags {f:o}", path.display());
            }
        }
    }
}

#[test]
fn block_reads_of_cached_files_still_reach_the_device() {
    let dir = tempfile::tempdir().unwrap();
    if !reads_reach_a_device(dir.path()) {
        return;
    }
    let db = Db::open(dir.path(), options(true)).unwrap();
    fill(&db);
    // The tables were just written: the page cache holds them, so only
    // reads that bypass it show up in read_bytes.
    let (bytes, blocks) = (device_read_bytes(), db.stats().total.data_blocks_read);
    for i in 0..N {
        db.get(&key(i)).unwrap();
    }
    let read = device_read_bytes() - bytes;
    let blocks = db.stats().total.data_blocks_read - blocks;
    assert!(blocks > 1000, "{blocks} block reads");
    // Each block read (4 KiB of entries and a trailer) costs the device at
    // least its own bytes.
    assert!(
        read >= blocks * 4096,
        "{read} bytes from storage for {blocks} block reads"
    );
}

#[test]
fn faults_are_injected_into_direct_reads() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(true), Arc::new(fs.clone())).unwrap();
    fill(&db);
    // A compaction opening its outputs (one descriptor, then the other)
    // must not race the listing.
    db.wait_for_background_work().unwrap();
    assert!(each_table_reads_points_direct(dir.path()));
    fs.set_short_reads(true);
    let before = fs.faults_injected();
    let failed = (0..200).filter(|&i| db.get(&key(i)).is_err()).count();
    assert!(failed > 0);
    assert!(fs.faults_injected() > before);
    fs.set_short_reads(false);
    for i in 1..200 {
        let want = (i % 7 != 0).then(|| value(i));
        assert_eq!(db.get(&key(i)).unwrap(), want);
    }
}

fn assert_refused(err: Error, dir: &Path) {
    let text = err.to_string();
    match &err {
        Error::Io { path, source } => {
            assert!(path.starts_with(dir), "{text}");
            assert_eq!(source.kind(), std::io::ErrorKind::Unsupported, "{text}");
        }
        other => panic!("not an I/O error: {other}"),
    }
    assert!(text.contains(&dir.display().to_string()), "{text}");
    assert!(text.contains("O_DIRECT"), "{text}");
}

#[test]
fn a_file_system_refusing_direct_io_fails_open_naming_the_path() {
    // A new store, and one that already holds tables.
    for with_tables in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        if with_tables {
            let db = Db::open_with_fs(dir.path(), options(false), Arc::new(fs.clone())).unwrap();
            fill(&db);
        }
        fs.set_refuse_direct_io(true);
        let err = Db::open_with_fs(dir.path(), options(true), Arc::new(fs.clone())).unwrap_err();
        assert_refused(err, dir.path());
        // Cached reads never ask for direct I/O.
        let db = Db::open_with_fs(dir.path(), options(false), Arc::new(fs.clone())).unwrap();
        if with_tables {
            check(&db);
        }
    }
}

/// tmpfs refused `O_DIRECT` before Linux 6.6 and accepts it since; whichever
/// this kernel does, the store must agree with it: refuse at open, naming the
/// path, where the kernel refuses, and read correctly where it accepts.
#[test]
fn dev_shm_store_agrees_with_the_kernel_about_o_direct() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let kernel_accepts = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    std::fs::remove_file(&probe).unwrap();
    let store = dir.path().join("store");
    match Db::open(&store, options(true)) {
        Ok(db) => {
            assert!(
                kernel_accepts,
                "opened although the kernel refuses O_DIRECT"
            );
            fill(&db);
            check(&db);
            db.wait_for_background_work().unwrap();
            assert!(each_table_reads_points_direct(&store));
        }
        Err(err) => {
            assert!(
                !kernel_accepts,
                "refused although the kernel accepts: {err}"
            );
            assert_refused(err, &store);
        }
    }
}

/// Bytes this thread has had read from storage (`read_bytes` of
/// /proc/thread-self/io): with inline background work, flushes and
/// compactions run on the writing thread, and other tests' reads (on their
/// own threads) do not count.
fn thread_device_read_bytes() -> u64 {
    read_bytes_of("/proc/thread-self/io")
}

#[test]
fn compactions_read_through_the_page_cache_and_gets_bypass_it() {
    let dir = tempfile::tempdir().unwrap();
    if !reads_reach_a_device(dir.path()) {
        return;
    }
    let inline = Options {
        background_work: false,
        ..options(true)
    };
    let db = Db::open(dir.path(), inline).unwrap();
    let before = thread_device_read_bytes();
    // Every table just written is in the page cache: compactions that read
    // their inputs through it cost the device nothing, where direct reads
    // of the inputs would cost about the bytes compacted (11.8 MB for the
    // 10.4 MB compacted when they did). What remains is each new table's
    // open (footer, properties, index and filter: about 3%).
    fill(&db);
    db.compact().unwrap();
    let compacted = db.stats().bytes_compacted_read;
    let during_writes = thread_device_read_bytes() - before;
    assert!(compacted > 1 << 20, "{compacted} bytes compacted");
    assert!(
        during_writes < compacted / 10,
        "{during_writes} device bytes read by flushes and compactions of {compacted} bytes"
    );
    // Point reads still go to the device.
    let before = thread_device_read_bytes();
    let blocks = db.stats().total.data_blocks_read;
    for i in 0..N {
        db.get(&key(i)).unwrap();
    }
    let blocks = db.stats().total.data_blocks_read - blocks;
    let read = thread_device_read_bytes() - before;
    assert!(blocks > 1000, "{blocks} block reads");
    assert!(
        read >= blocks * 4096,
        "{read} device bytes for {blocks} block reads"
    );
    check(&db);
    db.close().unwrap();
}
