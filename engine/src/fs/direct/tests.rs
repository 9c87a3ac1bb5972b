//! Direct reads: any range, the tail, alignment, and what the device reads.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

/// Byte i of the test file.
fn byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 8)) as u8
}

fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    std::fs::write(&path, (0..len).map(byte).collect::<Vec<u8>>()).unwrap();
    (dir, path)
}

fn read(f: &DirectFile, offset: usize, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0xAA; len];
    f.read_exact_at(&mut buf, offset as u64)?;
    Ok(buf)
}

#[test]
fn reads_any_range_at_unaligned_offsets_and_the_tail() {
    // Not a multiple of ALIGN, and longer than one chunk.
    let len = MAX_CHUNK + 3 * ALIGN + 123;
    let (_dir, path) = file_of(len);
    let f = DirectFile::open(&path).unwrap();
    assert_eq!(f.len().unwrap(), len as u64);
    let ranges = [
        (0, 1),
        (0, ALIGN),
        (1, ALIGN),
        (ALIGN - 1, 2),
        (4093, 4101),
        (12_345, 7),
        (ALIGN, MAX_CHUNK),
        (17, MAX_CHUNK + 2 * ALIGN),
        (0, len),
        (len - 1, 1),
        (len - 48, 48),
        (len - 123, 123),
        (len - 5000, 5000),
    ];
    for (offset, n) in ranges {
        let got = read(&f, offset, n).unwrap();
        let want: Vec<u8> = (offset..offset + n).map(byte).collect();
        assert!(got == want, "range {offset}+{n}");
    }
    assert!(read(&f, len, 0).unwrap().is_empty());
}

#[test]
fn a_read_past_the_end_is_an_error_not_short_data() {
    let len = 2 * ALIGN + 10;
    let (_dir, path) = file_of(len);
    let f = DirectFile::open(&path).unwrap();
    for (offset, n) in [(len - 9, 10), (len, 1), (len + ALIGN, 3), (0, len + 1)] {
        let e = read(&f, offset, n).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{offset}+{n}");
    }
}

#[test]
fn the_file_is_open_with_o_direct() {
    use std::os::fd::AsRawFd;
    let (_dir, path) = file_of(10);
    let f = DirectFile::open(&path).unwrap();
    let fdinfo =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", f.file.as_raw_fd())).unwrap();
    let flags = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .map(|v| i32::from_str_radix(v.trim(), 8).unwrap())
        .unwrap();
    assert_ne!(flags & libc::O_DIRECT, 0, "{fdinfo}");
}

#[test]
fn the_bounce_window_is_aligned_and_sized() {
    let mut b = AlignedBuf::default();
    for (len, align) in [
        (ALIGN, ALIGN),
        (3 * ALIGN, 512),
        (512, 512),
        (ALIGN, ALIGN),
        (MAX_CHUNK, 1024),
    ] {
        let w = b.window(len, align);
        assert_eq!(w.len(), len);
        assert_eq!(w.as_ptr() as usize % align, 0);
    }
}

#[test]
fn the_alignment_is_the_kernels_and_divides_a_page() {
    let (_dir, path) = file_of(10);
    let f = DirectFile::open(&path).unwrap();
    let align = f.alignment();
    assert!(
        align.is_power_of_two() && (512..=ALIGN).contains(&align),
        "{align}"
    );
}

/// Bytes this thread has had read from storage (`read_bytes` of
/// /proc/thread-self/io), where the kernel accounts them.
fn thread_read_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/io").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn a_read_costs_the_device_its_aligned_range_only() {
    let len = 64 * ALIGN;
    let (_dir, path) = file_of(len);
    let f = DirectFile::open(&path).unwrap();
    let align = f.alignment();
    // A 4 KiB block at an offset that is not a multiple of any
    // alignment: the device reads the aligned range around it, no more.
    for (offset, n) in [(1000, 4096), (5 * ALIGN + 7, 4200), (3 * ALIGN, 100)] {
        let Some(before) = thread_read_bytes() else {
            return; // no I/O accounting in this kernel or container
        };
        let got = read(&f, offset, n).unwrap();
        let after = thread_read_bytes().unwrap();
        if after == before {
            // Not a block device (tmpfs serves O_DIRECT from memory):
            // nothing is read from storage to count.
            eprintln!("{} is not on a block device", path.display());
            return;
        }
        let want: Vec<u8> = (offset..offset + n).map(byte).collect();
        assert!(got == want, "range {offset}+{n}");
        let start = offset / align * align;
        let end = (offset + n).div_ceil(align) * align;
        assert_eq!(
            after - before,
            (end - start) as u64,
            "{offset}+{n} at {align}"
        );
    }
}

#[test]
fn refusal_names_the_cause_and_is_unsupported() {
    let e = refused(io::Error::from_raw_os_error(libc::EINVAL));
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    assert!(e.to_string().contains("O_DIRECT"), "{e}");
    assert!(is_refusal(&io::Error::from_raw_os_error(libc::EINVAL)));
    assert!(!is_refusal(&io::Error::from_raw_os_error(libc::ENOENT)));
}

/// A read made while the thread's bounce buffer is already destroyed: from
/// a thread-local destructor that runs after the buffer's (destructors run
/// in the reverse order of first use, so one first used before any direct
/// read runs after the buffer's). Buffered reads work there; a direct read
/// must too, not panic (which, escaping a thread-local destructor, aborts
/// the process).
#[test]
fn a_read_from_a_thread_local_destructor_after_the_buffer_is_gone() {
    use std::sync::mpsc;
    /// What the late read gave, or its panic.
    type Answer = std::thread::Result<io::Result<Vec<u8>>>;
    struct ReadOnDrop {
        file: Option<(DirectFile, mpsc::Sender<Answer>)>,
    }
    impl Drop for ReadOnDrop {
        fn drop(&mut self) {
            if let Some((file, done)) = self.file.take() {
                let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    read(&file, 5000, 300)
                }));
                done.send(got).unwrap();
            }
        }
    }
    thread_local! {
        static LATE: RefCell<ReadOnDrop> = const { RefCell::new(ReadOnDrop { file: None }) };
    }
    let (_dir, path) = file_of(3 * ALIGN);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // LATE first, then the bounce buffer by a read: the buffer is
        // destroyed first at thread exit.
        let file = DirectFile::open(&path).unwrap();
        LATE.with(|late| late.borrow_mut().file = Some((DirectFile::open(&path).unwrap(), tx)));
        assert_eq!(
            read(&file, 1, 10).unwrap(),
            (1..11).map(byte).collect::<Vec<_>>()
        );
    })
    .join()
    .unwrap();
    let got = rx.recv().unwrap();
    let got = got.unwrap_or_else(|_| panic!("the read panicked")).unwrap();
    assert!(got == (5000..5300).map(byte).collect::<Vec<_>>());
}

#[test]
fn alignments_over_a_page_are_kept_and_others_fall_back() {
    for (offset_align, mem_align, want) in [
        (512, 4, 512),
        (4096, 512, 4096),
        (8192, 512, 8192),
        (512, 16384, 16384),
        (65536, 4096, 65536),
        (131_072, 512, ALIGN),
        (3000, 512, ALIGN),
        (0, 0, ALIGN),
    ] {
        assert_eq!(
            usable_alignment(offset_align, mem_align),
            want,
            "{offset_align} {mem_align}"
        );
    }
}

#[test]
fn reads_at_alignments_of_devices_with_blocks_over_a_page() {
    // Before, an alignment over 4096 was replaced by 4096 and every read on
    // such a device failed as a refusal; the reads must also be right.
    let len = MAX_CHUNK + 5 * MAX_ALIGN + 321;
    let (_dir, path) = file_of(len);
    for align in [8192, 16384, MAX_ALIGN] {
        let f = DirectFile::open_aligned_to(&path, align).unwrap();
        let ranges = [
            (0, 1),
            (1, align),
            (align - 1, 2),
            (align + 17, 3 * align),
            (12_345, 70_000),
            (5, MAX_CHUNK + align),
            (0, len),
            (len - 1, 1),
            (len - 321, 321),
            (len - align - 7, align + 7),
        ];
        for (offset, n) in ranges {
            let got = read(&f, offset, n).unwrap();
            let want: Vec<u8> = (offset..offset + n).map(byte).collect();
            assert!(got == want, "align {align}, range {offset}+{n}");
        }
        let e = read(&f, len - 3, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "align {align}");
    }
}

fn kept_bounce_bytes() -> usize {
    BOUNCE.with(|b| b.borrow().storage.len())
}

#[test]
fn a_thread_keeps_a_block_sized_bounce_buffer_not_a_chunk() {
    let (_dir, path) = file_of(2 * MAX_CHUNK);
    let f = DirectFile::open(&path).unwrap();
    std::thread::spawn(move || {
        read(&f, 100, 4000).unwrap();
        let small = kept_bounce_bytes();
        assert!(small > 0 && small <= KEPT_BOUNCE_BYTES, "{small}");
        read(&f, 7, MAX_CHUNK + 10).unwrap();
        assert!(
            kept_bounce_bytes() <= KEPT_BOUNCE_BYTES + MAX_ALIGN,
            "{} kept after a chunk-sized read",
            kept_bounce_bytes()
        );
        read(&f, 4096, 4096).unwrap();
        assert!(kept_bounce_bytes() > 0);
    })
    .join()
    .unwrap();
}

#[test]
fn a_block_read_across_an_aligned_boundary_keeps_its_bounce_buffer_at_any_alignment() {
    // `KEPT_BOUNCE_BYTES` is "enough for a data block at any alignment":
    // a 4 KiB block that crosses a 64 KiB boundary on a device aligned to
    // 64 KiB needs a window of two units (plus the unit skipped to align
    // it). Freeing that buffer after each such read would allocate and
    // zero 192 KiB for every block read that crosses a boundary.
    let (_dir, path) = file_of(4 * MAX_ALIGN);
    let f = DirectFile::open_aligned_to(&path, MAX_ALIGN).unwrap();
    std::thread::spawn(move || {
        for round in 0..3 {
            let offset = (round + 1) * MAX_ALIGN - 100;
            let got = read(&f, offset, 4096).unwrap();
            assert!(got == (offset..offset + 4096).map(byte).collect::<Vec<_>>());
            assert!(
                kept_bounce_bytes() > 0,
                "round {round}: the buffer was freed after a block read"
            );
        }
    })
    .join()
    .unwrap();
}
