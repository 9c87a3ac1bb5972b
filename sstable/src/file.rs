//! The two file capabilities a table needs, so the engine can route every
//! table read and write through its own file-system layer (and tests can
//! inject faults there).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

/// A file read by positioned reads, shared by many threads.
pub trait RandomAccessFile: Send + Sync + std::fmt::Debug {
    /// Fills `buf` from `offset`; an error if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// [`Self::read_exact_at`] for a pass over a whole table (compaction, a
    /// filter rebuild) rather than a point read. A file whose point reads
    /// bypass the page cache may serve these through it, as RocksDB's
    /// `use_direct_reads` leaves compaction reads buffered: the pass reads
    /// each block once, in order, and readahead serves it well.
    fn read_exact_at_bulk(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at(buf, offset)
    }
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// True for an empty file.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// A file written sequentially and then made durable.
pub trait WritableFile: Write + Send + std::fmt::Debug {
    /// Flushes buffers and fsyncs the file's data and metadata.
    fn sync(&mut self) -> io::Result<()>;
}

impl RandomAccessFile for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

impl WritableFile for File {
    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        self.sync_all()
    }
}

impl<W: WritableFile> WritableFile for io::BufWriter<W> {
    fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        self.get_mut().sync()
    }
}

impl WritableFile for Box<dyn WritableFile> {
    fn sync(&mut self) -> io::Result<()> {
        (**self).sync()
    }
}
