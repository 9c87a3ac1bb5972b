//! Crafted table sizes (every checksum valid): a manifest may record a
//! table's size as large as its file, and a sparse file (tmpfs, XFS,
//! btrfs) holds up to 2^63 - 1 bytes while taking a few pages. Each table
//! below is its flushed bytes, a hole, and a copy of its footer ending at
//! 2^63 - 1 (the footer's handles are offsets from the file's start, so
//! the table opens, its blocks all verified); the bytes between are dead,
//! as an in-place filter rebuild leaves them. Three such tables sum past
//! 2^64: `stats` and the compactions' pick must not panic (debug) or wrap
//! (release) on the sum.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use bloomlsm::{Db, Options};
use common::crafted_manifest::record_tables;
use common::scratch_dir;

/// The largest size a sparse file may have on Linux (`MAX_LFS_FILESIZE`).
const HUGE: u64 = i64::MAX as u64;
const FOOTER_LEN: u64 = 64;

/// `n` flushed tables of 100 keys each, closed.
fn tables(dir: &Path, options: &Options, n: u32) {
    let db = Db::open(dir, options.clone()).unwrap();
    for t in 0..n {
        for i in 0..100u32 {
            db.put(format!("k{t}-{i:03}").as_bytes(), b"v").unwrap();
        }
        db.flush().unwrap();
    }
    db.close().unwrap();
}

/// Makes the table at `path` end at `size`: its footer copied to the
/// file's new end, the hole before it left sparse. False if the file
/// system refuses a file that large.
fn stretch(path: &Path, size: u64) -> bool {
    let bytes = std::fs::read(path).unwrap();
    let footer = &bytes[bytes.len() - FOOTER_LEN as usize..];
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(size - FOOTER_LEN)).unwrap();
    file.write_all(footer).is_ok()
}

#[test]
fn table_sizes_past_u64_in_sum_do_not_overflow_stats() {
    let dir = scratch_dir();
    let options = Options {
        background_work: false,
        ..Options::default()
    };
    tables(dir.path(), &options, 3);
    let mut stretched = 0;
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            if !stretch(&path, HUGE) {
                eprintln!("skipped: the file system refuses a file of {HUGE} bytes");
                return;
            }
            stretched += 1;
        }
    }
    assert_eq!(stretched, 3);
    record_tables(dir.path(), HUGE, None);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k1-007").unwrap(), Some(b"v".to_vec()));
    let stats = db.stats();
    assert_eq!(stats.total.tables, 3);
    assert_eq!(stats.total.file_bytes, u64::MAX, "{:?}", stats.total);
    // A write, then the compactions' pick, which sums each level's sizes.
    db.put(b"k9", b"v").unwrap();
    db.wait_for_background_work().unwrap();
    db.put(b"k9", b"w").unwrap();
    db.close().unwrap();
}
