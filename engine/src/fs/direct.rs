//! Positioned reads that bypass the operating system's page cache
//! (`O_DIRECT`), for `Options::use_direct_reads`.
//!
//! `O_DIRECT` requires the buffer address, the file offset and the length of
//! every read to be multiples of the device's logical block size. Callers
//! (the table reader) ask for arbitrary byte ranges, so [`DirectFile`] reads
//! the enclosing aligned range into an aligned bounce buffer and copies the
//! asked-for bytes out. [`ALIGN`] (4096) is a multiple of every logical block
//! size Linux supports up to the page size, so one constant serves all
//! devices a store is likely to sit on.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::path::Path;

use bloomlsm_sstable::RandomAccessFile;

/// Alignment of the buffer address, offset and length of every direct read.
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
    /// An aligned window of exactly `len` bytes.
    /// REQUIRES: `len` is a multiple of `ALIGN`.
    fn window(&mut self, len: usize) -> &mut [u8] {
        if self.storage.len() < len + ALIGN {
            self.storage = vec![0; len + ALIGN];
        }
        // `align_offset` on a u8 pointer is always computable (< ALIGN).
        let start = self.storage.as_ptr().align_offset(ALIGN);
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
        Ok(Self { file })
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
    /// REQUIRES: `start` and `window.len()` are multiples of `ALIGN` and
    /// `window` starts at an `ALIGN`-aligned address.
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
                    if filled % ALIGN != 0 {
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
        let align = ALIGN as u64;
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let start = pos / align * align;
            let end = (offset + buf.len() as u64).div_ceil(align) * align;
            let len = (end - start).min(MAX_CHUNK as u64) as usize;
            let window = bounce.window(len);
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
        for len in [ALIGN, 3 * ALIGN, ALIGN, MAX_CHUNK] {
            let w = b.window(len);
            assert_eq!(w.len(), len);
            assert_eq!(w.as_ptr() as usize % ALIGN, 0);
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
