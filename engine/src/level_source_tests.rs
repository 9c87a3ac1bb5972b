//! `LevelSource`: a level's tables read back to back. A read that fails
//! part way through a table ends the level; polling on must not move to
//! the next table, which would skip the rest of the failed one (a scan
//! would then list keys past a gap as if none lay between).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bloomlsm_sstable::{EntryKind, RandomAccessFile, Table, TableBuilder, TableOptions};

use super::LevelSource;
use crate::scratch_dirs::scratch_dir;

/// A table file whose reads fail while `failing` is set.
#[derive(Debug)]
struct SwitchedFile {
    inner: std::fs::File,
    failing: Arc<AtomicBool>,
}

impl RandomAccessFile for SwitchedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        RandomAccessFile::read_exact_at(&self.inner, buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        RandomAccessFile::len(&self.inner)
    }
}

/// Writes keys `keys` (each with a 100-byte value) into a table of small
/// blocks at `dir/name`.
fn write_table(dir: &Path, name: &str, keys: std::ops::Range<u32>) -> PathBuf {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    let options = TableOptions {
        block_size: 256,
        ..TableOptions::default()
    };
    let mut builder = TableBuilder::new(file, &path, options);
    for k in keys {
        let key = format!("key{k:06}");
        builder
            .add(key.as_bytes(), u64::from(k) + 1, EntryKind::Put, &[7; 100])
            .unwrap();
    }
    builder.finish().unwrap();
    path
}

fn open(path: &Path, id: u64, failing: &Arc<AtomicBool>) -> Arc<Table> {
    let file = SwitchedFile {
        inner: std::fs::File::open(path).unwrap(),
        failing: Arc::clone(failing),
    };
    Arc::new(Table::open(Arc::new(file), path, id, None).unwrap())
}

#[test]
fn a_failed_read_ends_the_level_instead_of_skipping_to_the_next_table() {
    let dir = scratch_dir();
    let first_path = write_table(dir.path(), "000001.sst", 0..200);
    let second_path = write_table(dir.path(), "000002.sst", 200..400);
    let first_fails = Arc::new(AtomicBool::new(false));
    let never = Arc::new(AtomicBool::new(false));
    let first = open(&first_path, 1, &first_fails);
    let second = open(&second_path, 2, &never);

    let mut level = LevelSource::new(&first, vec![second], b"", None).unwrap();
    // The first block is read by the seek; its entries come without reads.
    let head = level.next().unwrap().unwrap();
    assert_eq!(head.user_key, b"key000000");
    first_fails.store(true, Ordering::SeqCst);
    let mut listed = 1;
    let error = loop {
        match level.next() {
            Some(Ok(_)) => listed += 1,
            Some(Err(e)) => break e,
            None => panic!("the level ended after {listed} entries without its read error"),
        }
    };
    assert!(listed < 200, "the first table was read whole: {listed}");
    assert!(error.to_string().contains("000001.sst"), "{error}");
    // Polled on, the level must not go on to the second table's keys.
    let after: Vec<_> = level.by_ref().take(3).collect();
    assert!(
        after.is_empty(),
        "after the error the level went on with {} more items, the first {:?}",
        after.len(),
        after[0]
            .as_ref()
            .map(|e| String::from_utf8_lossy(&e.user_key).into_owned())
    );
}
