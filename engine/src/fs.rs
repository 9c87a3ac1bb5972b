//! Every file-system call the store makes goes through [`FileSystem`], so
//! tests can inject faults and simulate power loss. [`RealFs`] is the real one.

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomlsm_sstable::{RandomAccessFile, WritableFile};

mod dir_lock;
pub mod direct;
pub mod fault;
pub(crate) mod forks;

/// A held directory lock; released on drop.
pub trait DirLock: Send + Sync + Debug {
    /// Whether taking the lock created its file: a failed open removes a
    /// LOCK it created. `None` when unknown; the open then judges by its
    /// listing before the lock, which a racing failed open can fool (it
    /// may remove the LOCK listed, so that this open creates another).
    fn created_file(&self) -> Option<bool> {
        None
    }

    /// Makes this lock exclusive if no other process shares it: `true`
    /// when it is (or already was) the only holder and the path it was
    /// taken through still names the file locked. An open that created
    /// `LOCK` unlinks it at release (or failure) only then: unlinked while
    /// another process's reader holds it, the file would let a writer
    /// create a fresh `LOCK` and take it beside that reader; and a file
    /// renamed over the name may be a writer's lock. Default: `true` (a
    /// lock that is never shared is exclusive already, as the default
    /// [`FileSystem::lock_shared`]'s is). A file system whose
    /// `lock_shared` does share must override it for its lock type, or a
    /// read-only open that created `LOCK` unlinks it from under another
    /// process's reader.
    fn try_exclusive(&self) -> bool {
        true
    }
}

/// A file-system call that failed, and the path it concerned.
#[derive(Debug, thiserror::Error)]
#[error("I/O error on {}: {source}", path.display())]
pub struct FsError {
    /// The file or directory.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl FsError {
    /// The OS error's kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

/// Result of a [`FileSystem`] call.
pub type FsResult<T> = Result<T, FsError>;

/// Attaches the path an I/O result concerns.
pub trait AtPath<T> {
    /// `self` with `path` on its error.
    fn at(self, path: &Path) -> FsResult<T>;
}

impl<T> AtPath<T> for io::Result<T> {
    fn at(self, path: &Path) -> FsResult<T> {
        self.map_err(|source| FsError {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// The file-system operations the store uses. Every error names the path
/// it concerns ([`FsError`]), so callers never attach it themselves.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates (truncating) a file for sequential writing.
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>>;
    /// Opens an existing file of at least `len` bytes to append at `len`
    /// (bytes past it are cut first: an append that never completed). An
    /// error of kind `InvalidData` when the file is shorter. The default
    /// refuses with kind `Unsupported`; on any error the store rebuilds a
    /// table's filter by writing a new table file instead.
    fn append_at(&self, path: &Path, len: u64) -> FsResult<Box<dyn WritableFile>> {
        let _ = len;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system does not append to existing files",
        ))
        .at(path)
    }
    /// Writes `bytes` over the existing file `path` at `offset`, in place
    /// (never creating or truncating it), then fsyncs the file's data.
    /// Until that fsync returns, a power loss may leave each sector of the
    /// range old or new, in any mix (each sector whole: devices write 512
    /// bytes atomically). The default refuses with kind `Unsupported`; the
    /// store then leaves a WAL's header as it is (`DbInner::shutdown`).
    fn overwrite(&self, path: &Path, offset: u64, bytes: &[u8]) -> FsResult<()> {
        let _ = (offset, bytes);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system does not overwrite files in place",
        ))
        .at(path)
    }
    /// Opens a file for positioned reads.
    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>>;
    /// Opens a file for positioned reads that bypass the page cache
    /// (`O_DIRECT`, for `Options::use_direct_reads`); an error of kind
    /// `Unsupported` where the file system refuses direct I/O, never a
    /// silent fallback to cached reads.
    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> FsResult<Vec<u8>>;
    /// Renames a file, replacing the target.
    fn rename(&self, from: &Path, to: &Path) -> FsResult<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> FsResult<()>;
    /// File names in a directory.
    fn list(&self, dir: &Path) -> FsResult<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> FsResult<()>;
    /// Creates one directory, whose parent exists: an error of kind
    /// `AlreadyExists` when `dir` exists, so a caller knows which
    /// directories it made itself (a failed open removes only those). The
    /// default checks [`Self::exists`] then calls [`Self::create_dir_all`],
    /// which another process may race: file systems over a real one
    /// override it with `mkdir`.
    fn create_dir(&self, dir: &Path) -> FsResult<()> {
        if self.exists(dir) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists)).at(dir);
        }
        self.create_dir_all(dir)
    }
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> FsResult<()>;
    /// fsyncs a directory, making created, renamed and removed entries durable.
    fn sync_dir(&self, dir: &Path) -> FsResult<()>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on `path` (created if missing); `Ok(None)`
    /// when another holder has it, in another process or in this one.
    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>>;
    /// The lock a read-only open takes: a read lock, which excludes every
    /// writer and is shared with read-only opens in other processes (in
    /// this process a second open is refused, as for [`FileSystem::lock`]);
    /// `path` is created if missing and opened for reading alone where it
    /// cannot be opened for writing (a read-only mount, a backup without
    /// write permission). Default: `lock` (exclusive, shared with none).
    fn lock_shared(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        self.lock(path)
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

/// An append-only file whose every `write_all` reaches the OS at once.
#[derive(Debug)]
struct PlainFile(File);

impl Write for PlainFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl WritableFile for PlainFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl FileSystem for RealFs {
    fn create(&self, path: &Path) -> FsResult<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .at(path)?;
        Ok(Box::new(PlainFile(file)))
    }

    fn append_at(&self, path: &Path, len: u64) -> FsResult<Box<dyn WritableFile>> {
        let mut file = OpenOptions::new().write(true).open(path).at(path)?;
        cut_to(&mut file, len).at(path)?;
        Ok(Box::new(PlainFile(file)))
    }

    fn overwrite(&self, path: &Path, offset: u64, bytes: &[u8]) -> FsResult<()> {
        use std::os::unix::fs::FileExt;
        let file = OpenOptions::new().write(true).open(path).at(path)?;
        file.write_all_at(bytes, offset)
            .and_then(|()| file.sync_data())
            .at(path)
    }

    fn open_read(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(File::open(path).at(path)?))
    }

    fn open_read_direct(&self, path: &Path) -> FsResult<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(direct::DirectFile::open(path).at(path)?))
    }

    fn read_all(&self, path: &Path) -> FsResult<Vec<u8>> {
        fs::read(path).at(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> FsResult<()> {
        fs::rename(from, to).at(to)
    }

    fn remove(&self, path: &Path) -> FsResult<()> {
        fs::remove_file(path).at(path)
    }

    fn list(&self, dir: &Path) -> FsResult<Vec<String>> {
        let list = || -> io::Result<Vec<String>> {
            let mut names = Vec::new();
            for entry in fs::read_dir(dir)? {
                names.push(entry?.file_name().to_string_lossy().into_owned());
            }
            Ok(names)
        };
        list().at(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> FsResult<()> {
        fs::create_dir_all(dir).at(dir)
    }

    fn create_dir(&self, dir: &Path) -> FsResult<()> {
        fs::create_dir(dir).at(dir)
    }

    fn remove_dir(&self, dir: &Path) -> FsResult<()> {
        fs::remove_dir(dir).at(dir)
    }

    fn sync_dir(&self, dir: &Path) -> FsResult<()> {
        File::open(dir).and_then(|d| d.sync_all()).at(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        dir_lock::lock(path, false)
    }

    fn lock_shared(&self, path: &Path) -> FsResult<Option<Box<dyn DirLock>>> {
        dir_lock::lock(path, true)
    }
}

/// Cuts `file` to `len` bytes and positions it there, for
/// [`FileSystem::append_at`]; a file shorter than `len` is refused
/// (`InvalidData`), never extended.
pub(crate) fn cut_to(file: &mut File, len: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let found = file.metadata()?.len();
    if found < len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("file is {found} bytes, fewer than the {len} to append after"),
        ));
    }
    if found > len {
        file.set_len(len)?;
    }
    file.seek(SeekFrom::Start(len))?;
    Ok(())
}

/// Opens a table file for block reads: direct (`O_DIRECT`) when `direct`
/// (`Options::use_direct_reads`), else through the page cache.
pub(crate) fn open_table_file(
    fs: &dyn FileSystem,
    path: &Path,
    direct: bool,
) -> FsResult<Arc<dyn RandomAccessFile>> {
    if direct {
        fs.open_read_direct(path)
    } else {
        fs.open_read(path)
    }
}

/// For `Options::use_direct_reads`: opens `path` (a file of the store that
/// exists, such as the manifest) for direct reads and reads its first byte,
/// so a store on a file system that refuses `O_DIRECT` fails at `Db::open`
/// with an error naming the path, even before it holds any table.
pub(crate) fn check_direct_reads(fs: &dyn FileSystem, path: &Path) -> FsResult<()> {
    let file = fs.open_read_direct(path)?;
    let mut first = [0u8; 1];
    let mut read = || -> io::Result<()> {
        if !file.is_empty()? {
            file.read_exact_at(&mut first, 0)?;
        }
        Ok(())
    };
    read().at(path)
}

/// Names of the files in a store directory.
pub(crate) mod names {
    use super::*;

    /// The lock file.
    pub(crate) const LOCK: &str = "LOCK";
    /// The manifest.
    pub(crate) const MANIFEST: &str = "MANIFEST";
    /// A manifest being written.
    pub(crate) const MANIFEST_TMP: &str = "MANIFEST.tmp";

    pub(crate) fn table(dir: &Path, number: u64) -> PathBuf {
        dir.join(format!("{number:06}.sst"))
    }

    pub(crate) fn wal(dir: &Path, number: u64) -> PathBuf {
        dir.join(format!("{number:06}.wal"))
    }

    /// What a file name in the store directory is.
    #[derive(Debug, PartialEq, Eq)]
    pub(crate) enum FileType {
        Table(u64),
        Wal(u64),
        Temp,
        Manifest,
        Lock,
        Other,
    }

    /// What `name` is. A table or WAL name must be the one [`table`] or
    /// [`wal`] gives its number (`+5.sst` or `0000005.wal` is `Other`, left
    /// alone): recovery opens, replays and deletes files by number, so a
    /// second spelling of a number would be read or removed in place of
    /// another file. The only temporary file the store writes is
    /// [`MANIFEST_TMP`]; any other `.tmp` name is someone else's (recovery
    /// deletes temporaries, and a directory of only temporaries is opened
    /// as a new store).
    pub(crate) fn parse(name: &str) -> FileType {
        let number = |s: &str| s.parse::<u64>().ok().filter(|n| format!("{n:06}") == s);
        if name == LOCK {
            FileType::Lock
        } else if name == MANIFEST {
            FileType::Manifest
        } else if name == MANIFEST_TMP {
            FileType::Temp
        } else if let Some(n) = name.strip_suffix(".sst").and_then(number) {
            FileType::Table(n)
        } else if let Some(n) = name.strip_suffix(".wal").and_then(number) {
            FileType::Wal(n)
        } else {
            FileType::Other
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn only_the_names_the_store_writes_are_tables_and_wals() {
            let dir = Path::new("/store");
            for n in [0, 7, 999_999, 1_000_000, u64::MAX] {
                let table = table(dir, n);
                let wal = wal(dir, n);
                let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
                assert_eq!(parse(&name(&table)), FileType::Table(n));
                assert_eq!(parse(&name(&wal)), FileType::Wal(n));
            }
            for other in [
                "7.sst",
                "+000007.sst",
                "0000007.wal",
                " 000007.wal",
                "00000a.sst",
                ".sst",
            ] {
                assert_eq!(parse(other), FileType::Other, "{other}");
            }
            assert_eq!(parse(MANIFEST_TMP), FileType::Temp);
            for other in ["000007.sst.tmp", "notes.tmp", ".tmp", "MANIFEST.tmp.tmp"] {
                assert_eq!(parse(other), FileType::Other, "{other}");
            }
        }
    }
}
