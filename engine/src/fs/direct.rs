//! Positioned reads that bypass the operating system's page cache
//! (`O_DIRECT`), for `Options::use_direct_reads`.
//!
//! `O_DIRECT` requires the buffer address, the file offset and the length of
//! every read to be multiples of what the file's file system and device
//! allow (usually the device's logical block size, 512 or 4096 bytes).
//! Callers (the table reader) ask for arbitrary byte ranges, so
//! [`DirectFile`] reads the enclosing aligned range into an aligned bounce
//! buffer and copies the asked-for bytes out. The alignment is asked of the
//! kernel per file (`statx` with `STATX_DIOALIGN`, Linux 6.1 and later), so a
//! 4 KiB block at an arbitrary offset on a 512-byte device costs 4.5 KiB of
//! device reads, not the 8 KiB that page alignment would; where the kernel
//! cannot say, [`ALIGN`] (4096, a multiple of every logical block size up to
//! the page size) is used.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::path::Path;

use bloomlsm_sstable::RandomAccessFile;

/// Alignment of the buffer address, offset and length of direct reads where
/// the kernel does not report the file's own.
pub const ALIGN: usize = 4096;

/// Largest aligned range read by one system call; longer reads (a table's
/// index or filter at open) are split into chunks of this size so the
/// per-thread bounce buffer stays small.
pub const MAX_CHUNK: usize = 256 << 10;

/// A heap buffer of which an [`ALIGN`]-aligned window is handed out.
/// Over-allocating by `ALIGN` and starting at the first aligned byte needs
/// no `unsafe` and no custom allocator.
#[derive(Debug, Default)]
struct AlignedBuf {
    storage: Vec<u8>,
}

impl AlignedBuf {
    /// A window of exactly `len` bytes starting at a multiple of `align`.
    /// REQUIRES: `align` is a power of two of at most [`ALIGN`].
    fn window(&mut self, len: usize, align: usize) -> &mut [u8] {
        // Room for `len` bytes after any start a window of alignment up to
        // ALIGN may need, so the storage is reused across alignments.
        if self.storage.len() < len + ALIGN {
            self.storage = vec![0; len + ALIGN];
        }
        // `align_offset` on a u8 pointer is always computable (< align).
        let start = self.storage.as_ptr().align_offset(align);
        &mut self.storage[start..start + len]
    }
}

thread_local! {
    /// One bounce buffer per thread: block reads happen on many threads at
    /// once and must not contend, and a thread reads one range at a time.
    static BOUNCE: RefCell<AlignedBuf> = RefCell::new(AlignedBuf::default());
}

/// A file opened with `O_DIRECT`: every read goes to the device, whether or
/// not the page cache holds the bytes.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    /// Offset, length and buffer address of every read are multiples of
    /// this power of two (at most [`ALIGN`]).
    align: usize,
}

/// The alignment direct reads of `file` need, as the kernel reports it
/// (the larger of its offset and memory alignments), or [`ALIGN`] where it
/// does not (kernels before 6.1, other systems) or reports something this
/// reader does not use (not a power of two, or above [`ALIGN`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn direct_alignment(file: &File) -> usize {
    use std::os::fd::AsRawFd;
    // SAFETY: `statx` is a plain value struct of integers; all zeroes is a
    // valid value of it.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: the fd is open for the life of `file`; the empty path with
    // AT_EMPTY_PATH names that fd; `stx` is a valid, writable statx.
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return ALIGN;
    }
    let align = stx.stx_dio_offset_align.max(stx.stx_dio_mem_align) as usize;
    if align.is_power_of_two() && align <= ALIGN {
        align
    } else {
        ALIGN
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn direct_alignment(_file: &File) -> usize {
    ALIGN
}

/// The error for a file system that will not do direct I/O: its kind is
/// `Unsupported` and it says what to change, so `Db::open` reports it with
/// the path rather than silently reading through the page cache.
pub fn refused(cause: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "the file system refuses direct I/O (O_DIRECT): {cause}; \
             Options::use_direct_reads needs a file system that supports it \
             (ext4, xfs, btrfs), or turn it off"
        ),
    )
}

/// True for the error a file system gives when it does not support
/// `O_DIRECT` (at `open`, or at the first aligned read).
fn is_refusal(e: &io::Error) -> bool {
    #[cfg(target_os = "linux")]
    {
        e.raw_os_error() == Some(libc::EINVAL)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = e;
        false
    }
}

impl DirectFile {
    /// Opens `path` for direct reads; an `Unsupported` error (see
    /// [`refused`]) where the file system refuses `O_DIRECT`.
    #[cfg(target_os = "linux")]
    pub fn open(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| if is_refusal(&e) { refused(e) } else { e })?;
        let align = direct_alignment(&file);
        Ok(Self { file, align })
    }

    /// The alignment of this file's reads (see [`direct_alignment`]).
    pub fn alignment(&self) -> usize {
        self.align
    }

    /// Direct reads are implemented for Linux only.
    #[cfg(not(target_os = "linux"))]
    pub fn open(_path: &Path) -> io::Result<Self> {
        Err(refused(io::Error::new(
            io::ErrorKind::Unsupported,
            "direct reads are implemented on Linux only",
        )))
    }

    /// Reads the aligned range `[start, start + window.len())` into
    /// `window`; returns the bytes read, fewer only at the end of the file.
    /// REQUIRES: `start` and `window.len()` are multiples of `self.align`
    /// and `window` starts at a `self.align`-aligned address.
    fn read_aligned(&self, window: &mut [u8], start: u64) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let mut filled = 0;
        while filled < window.len() {
            match self
                .file
                .read_at(&mut window[filled..], start + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => {
                    filled += n;
                    // Only the last block of a file can be partial; past
                    // it a further read would be unaligned.
                    if filled % self.align != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_refusal(&e) => return Err(refused(e)),
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }

    /// Fills `buf` from `offset` through `bounce`, one aligned chunk of at
    /// most `MAX_CHUNK` bytes at a time.
    fn read_through(&self, bounce: &mut AlignedBuf, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let align = self.align as u64;
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let start = pos / align * align;
            let end = (offset + buf.len() as u64).div_ceil(align) * align;
            let len = (end - start).min(MAX_CHUNK as u64) as usize;
            let window = bounce.window(len, self.align);
            let got = self.read_aligned(window, start)?;
            // Bytes of `buf` this chunk can supply, and where they start.
            let skip = (pos - start) as usize;
            let want = (len - skip).min(buf.len() - done);
            if got < skip + want {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "direct read of {} bytes at offset {offset} ends past the end of the file",
                        buf.len()
                    ),
                ));
            }
            buf[done..done + want].copy_from_slice(&window[skip..skip + want]);
            done += want;
        }
        Ok(())
    }
}

impl RandomAccessFile for DirectFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        BOUNCE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut bounce) => self.read_through(&mut bounce, buf, offset),
            // Not reachable (a read never starts another on its thread),
            // but a fresh buffer is correct either way.
            Err(_) => self.read_through(&mut AlignedBuf::default(), buf, offset),
        })
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
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
}
