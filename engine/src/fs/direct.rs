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
//! device reads, not the 8 KiB that page alignment would; a device whose
//! logical blocks are larger than a page (up to [`MAX_ALIGN`]) gets its own
//! alignment. Where the kernel cannot say, [`ALIGN`] (4096, a multiple of
//! every logical block size up to the page size) is used.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::path::Path;

use bloomlsm_sstable::RandomAccessFile;

/// Alignment of the buffer address, offset and length of direct reads where
/// the kernel does not report the file's own.
pub const ALIGN: usize = 4096;

/// Largest alignment the kernel may report that reads use. A larger report
/// (no such device is known) is replaced by [`ALIGN`], and the device then
/// refuses the reads (an `Unsupported` error, see [`refused`]).
pub const MAX_ALIGN: usize = 64 << 10;

/// Bounce buffer bytes a thread keeps between reads: enough for a data
/// block at any alignment. A larger read (a table's index or filter at
/// open, up to [`MAX_CHUNK`]) allocates its own and frees it after, so a
/// reader thread does not hold a quarter MiB for life.
const KEPT_BOUNCE_BYTES: usize = 64 << 10;

/// Largest aligned range read by one system call; longer reads (a table's
/// index or filter at open) are split into chunks of this size so the
/// per-thread bounce buffer stays small.
pub const MAX_CHUNK: usize = 256 << 10;

// Every chunk starts and ends aligned at any alignment used.
const _: () = assert!(MAX_CHUNK.is_multiple_of(MAX_ALIGN));

/// A heap buffer of which an aligned window is handed out. Over-allocating
/// by the alignment and starting at the first aligned byte needs no
/// `unsafe` and no custom allocator.
#[derive(Debug, Default)]
struct AlignedBuf {
    storage: Vec<u8>,
}

impl AlignedBuf {
    /// A window of exactly `len` bytes starting at a multiple of `align`.
    /// REQUIRES: `align` is a power of two.
    fn window(&mut self, len: usize, align: usize) -> &mut [u8] {
        // Room for `len` bytes after the at most `align - 1` bytes skipped
        // to the first aligned address.
        if self.storage.len() < len + align {
            self.storage = vec![0; len + align];
        }
        // `align_offset` on a u8 pointer is always computable (< align).
        let start = self.storage.as_ptr().align_offset(align);
        &mut self.storage[start..start + len]
    }

    /// Frees the storage if it is larger than a thread keeps between reads
    /// of a file aligned to `align`: a read of [`KEPT_BOUNCE_BYTES`] at
    /// any offset spans at most that plus one unit, and its window starts
    /// up to one more unit in.
    fn trim(&mut self, align: usize) {
        if self.storage.len() > KEPT_BOUNCE_BYTES + 2 * align {
            self.storage = Vec::new();
        }
    }
}

thread_local! {
    /// One bounce buffer per thread: block reads happen on many threads at
    /// once and must not contend, and a thread reads one range at a time.
    static BOUNCE: RefCell<AlignedBuf> = RefCell::new(AlignedBuf::default());
}

/// A file opened with `O_DIRECT`: every point read goes to the device,
/// whether or not the page cache holds the bytes. Bulk reads (a compaction's
/// or a filter rebuild's pass over the table) go through a second,
/// buffered descriptor of the same file, as RocksDB's `use_direct_reads`
/// leaves compaction reads buffered: they read each block once, in order.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    /// The same file without `O_DIRECT`, for bulk reads.
    buffered: File,
    /// Offset, length and buffer address of every read are multiples of
    /// this power of two (at most [`MAX_ALIGN`], which divides
    /// [`MAX_CHUNK`]).
    align: usize,
}

/// The alignment direct reads of `file` need, as the kernel reports it
/// (the larger of its offset and memory alignments), or [`ALIGN`] where it
/// does not (kernels before 6.1, other systems); see [`usable_alignment`].
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
    usable_alignment(stx.stx_dio_offset_align, stx.stx_dio_mem_align)
}

/// The alignment reads use for the kernel's reported offset and memory
/// alignments: the larger, if it is a power of two of at most
/// [`MAX_ALIGN`]; else [`ALIGN`] (0, the report of a file that cannot do
/// direct I/O, or a value no device has).
fn usable_alignment(offset_align: u32, mem_align: u32) -> usize {
    let align = offset_align.max(mem_align) as usize;
    if align.is_power_of_two() && align <= MAX_ALIGN {
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
        let buffered = File::open(path)?;
        Ok(Self {
            file,
            buffered,
            align,
        })
    }

    /// [`DirectFile::open`] with reads aligned to `align` instead of the
    /// kernel's figure (a multiple of it works on any device), so tests
    /// cover the alignments of devices this machine does not have.
    #[cfg(test)]
    fn open_aligned_to(path: &Path, align: usize) -> io::Result<Self> {
        assert!(align.is_power_of_two() && align <= MAX_ALIGN);
        let mut file = Self::open(path)?;
        assert_eq!(align % file.align, 0, "not a multiple of the device's");
        file.align = align;
        Ok(file)
    }

    /// The alignment of this file's reads: the larger of the offset and
    /// memory alignments the kernel reports for direct I/O on it, or
    /// [`ALIGN`] where it reports none this reader uses.
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
        let read = BOUNCE.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut bounce) => {
                let read = self.read_through(&mut bounce, buf, offset);
                bounce.trim(self.align);
                read
            }
            // Not reachable (a read never starts another on its thread),
            // but a fresh buffer is correct either way.
            Err(_) => self.read_through(&mut AlignedBuf::default(), buf, offset),
        });
        match read {
            Ok(read) => read,
            // The thread's buffer is already destroyed: a read from a
            // thread-local destructor as the thread ends (`with` would
            // panic there, and a panic escaping such a destructor aborts).
            Err(_) => self.read_through(&mut AlignedBuf::default(), buf, offset),
        }
    }

    fn read_exact_at_bulk(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.buffered, buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
