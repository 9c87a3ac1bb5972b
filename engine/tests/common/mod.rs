//! Helpers shared by the engine's integration tests: keys, values, store
//! listings, hand-made WAL records, a seeded generator and scratch
//! directories for model tests. Each test binary uses a subset.
#![allow(dead_code)] // Not every test binary uses every helper.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

pub mod bounded_files;
pub mod child_entry;
pub mod crafted_manifest;
pub mod damaged_block;
pub mod descriptors;
pub mod format_v1;
pub mod held_iter;
pub mod live_tables;
pub mod model_run;
pub mod narrow_tree;
pub mod power_loss_fates;
pub mod real_fs_methods;
pub mod tree_shape;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The `i`-th key, in key order ("user0000000042").
pub fn key(i: u64) -> Vec<u8> {
    format!("user{i:010}").into_bytes()
}

/// A key next to `key(i)` that no test writes.
pub fn absent(i: u64) -> Vec<u8> {
    format!("user{i:010}-gone").into_bytes()
}

/// A short `i`-th key in key order ("key00042"), for narrow tables that
/// should hold many keys each.
pub fn short_key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A key between `short_key(i)` and `short_key(i + 1)` that no test writes.
pub fn short_absent(i: u64) -> Vec<u8> {
    format!("key{i:05}~").into_bytes()
}

/// Every pair `it` yields, in order (an error is a panic: the failure
/// report).
pub fn pairs(it: bloomlsm::DbIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| r.unwrap()).collect()
}

/// Whether the file system under `dir` serves the engine's `O_DIRECT`
/// reads (tests of direct reads are skipped where it does not).
pub fn direct_reads_work(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let ok = bloomlsm::fs::direct::DirectFile::open(&probe).is_ok();
    std::fs::remove_file(&probe).unwrap();
    ok
}

/// The `i`-th key of a sequence scattered over the key space (writes in
/// this order are not in key order, so every table overlaps many).
pub fn scattered_key(i: u64) -> Vec<u8> {
    format!("k{:012}", i.wrapping_mul(2_654_435_761) % 1_000_000_007).into_bytes()
}

/// A key next to `scattered_key(i)` that no test writes.
pub fn scattered_absent(i: u64) -> Vec<u8> {
    let mut k = scattered_key(i);
    k.push(b'x');
    k
}

/// The value `key(i)` gets from `fill`.
pub fn value(i: u64) -> Vec<u8> {
    format!("v{i}").into_bytes()
}

/// Writes `key(i) = value(i)` for `i` in `0..n`.
pub fn fill(db: &bloomlsm::Db, n: u64) {
    for i in 0..n {
        db.put(&key(i), &value(i)).unwrap();
    }
}

/// Checks `key(i) = value(i)` for `i` in `0..n`.
pub fn all_present(db: &bloomlsm::Db, n: u64) {
    for i in 0..n {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

/// File names in a directory, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The table files' names in a directory, sorted.
pub fn table_files(dir: &Path) -> Vec<String> {
    listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

/// The one table file in `dir` (panics, the failure report, unless there
/// is exactly one).
pub fn only_table(dir: &Path) -> PathBuf {
    let mut tables: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert_eq!(tables.len(), 1, "{tables:?}");
    tables.pop().unwrap()
}

/// The store's newest WAL.
pub fn newest_wal(dir: &Path) -> PathBuf {
    let name = listing(dir)
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .max()
        .unwrap();
    dir.join(name)
}

/// Ends `db`, open on `fs`, leaving its WALs as a crash would: the
/// close's first WAL fsync fails, so no WAL header is sealed as synced
/// (`engine/src/wal/seal.rs`), while every byte written stays in the files
/// (`FaultFs` writes through, and no power loss is simulated).
pub fn close_unsealed(db: bloomlsm::Db, fs: &bloomlsm::fs::fault::FaultFs) {
    fs.fail_only_op(fs.ops());
    assert!(db.close().is_err(), "the close's fsync was to fail");
}

/// Where a WAL's first record starts: past the 24-byte header (version 3)
/// that every WAL this build writes begins with
/// (`engine/src/wal/header.rs`: magic, version, flags, salt, crc32).
pub const WAL_RECORDS_START: usize = 24;

/// The salt in the version 3 header of WAL bytes `bytes` (bytes 12..20),
/// which every record's checksum of that file covers; `None` unless the
/// bytes begin with a version 3 header.
pub fn wal_salt(bytes: &[u8]) -> Option<u64> {
    (bytes.get(..10) == Some(&b"bloomWAL\x03\x00"[..]))
        .then(|| u64::from_le_bytes(bytes[12..20].try_into().unwrap()))
}

/// Where the close marker of WAL bytes `bytes` starts: the record a clean
/// close appends after the last write (an empty batch, 12 bytes of
/// payload: first sequence, op count 0; `engine/src/wal/seal.rs`), which a
/// test that tears "the last record" as a crash mid-append would must cut
/// before. Panics (the failure report) when the last record is not one.
pub fn close_marker_offset(bytes: &[u8]) -> usize {
    let mut at = WAL_RECORDS_START;
    let mut last = None;
    while at + 8 <= bytes.len() {
        last = Some(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
    }
    let marker = last.expect("a WAL with records");
    let payload = &bytes[marker + 8..];
    assert!(
        payload.len() == 12 && payload[8..12] == [0; 4],
        "the last record is not a close marker"
    );
    marker
}

/// Rewrites the header of WAL bytes `bytes` to say "synced" without
/// `CLOSED` (`engine/src/wal/header.rs`): what a `SyncMode::Always` WAL
/// says while its store runs. A test that cuts a cleanly closed WAL to
/// model a crash mid-append makes it read as that crash would leave it
/// (a closed WAL's cut end is damage, not a torn tail).
pub fn as_if_never_closed(bytes: &mut [u8]) {
    set_wal_flags(bytes, 1);
}

/// Rewrites the flags of the version 3 WAL header of `bytes` (bytes
/// 10..12) and its crc32 (of the 20 bytes before it, at 20..24), keeping
/// the salt.
pub fn set_wal_flags(bytes: &mut [u8], flags: u16) {
    assert!(wal_salt(bytes).is_some(), "not a version 3 WAL header");
    bytes[10..12].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
}

/// Where record `n` (from 0) of WAL bytes `bytes` starts, walking the
/// length fields of the records before it.
pub fn wal_record_offset(bytes: &[u8], n: usize) -> usize {
    let mut at = WAL_RECORDS_START;
    for _ in 0..n {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 8 + len;
    }
    at
}

/// A checksummed WAL record of one batch: a put of `key = "v"` at
/// `first_seq` (encoded by hand, as docs/DESIGN.md and the WAL module
/// describe it, so the engine's own encoder is not what is tested),
/// checksummed over the payload alone: a record of a version 1 or 2 WAL
/// (or of no WAL this build wrote).
pub fn wal_record(first_seq: u64, key: &[u8]) -> Vec<u8> {
    salted_wal_record(None, first_seq, key)
}

/// The records of version 3 WAL bytes `bytes` up to `end` (a record
/// boundary), re-checksummed without the salt: the body of a version 1
/// (no header) or version 2 WAL holding the same writes.
pub fn unsalted_records(bytes: &[u8], end: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = WAL_RECORDS_START;
    while at < end {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let payload = &bytes[at + 8..at + 8 + len];
        out.extend_from_slice(&bytes[at..at + 4]);
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(payload);
        at += 8 + len;
    }
    assert_eq!(at, end, "not a record boundary");
    out
}

/// [`wal_record`] as a record of the WAL whose bytes (its header at
/// least) are `wal`: checksummed under its salt when it has one (crc32 of
/// the salt's 8 bytes LE, then the payload).
pub fn wal_record_in(wal: &[u8], first_seq: u64, key: &[u8]) -> Vec<u8> {
    salted_wal_record(wal_salt(wal), first_seq, key)
}

fn salted_wal_record(salt: Option<u64>, first_seq: u64, key: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend_from_slice(&first_seq.to_le_bytes());
    payload.extend_from_slice(&1u32.to_le_bytes());
    payload.push(1);
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key);
    payload.extend_from_slice(&1u32.to_le_bytes());
    payload.push(b'v');
    let mut record = Vec::new();
    record.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    if let Some(salt) = salt {
        crc.update(&salt.to_le_bytes());
    }
    crc.update(&payload);
    record.extend_from_slice(&crc.finalize().to_le_bytes());
    record.extend_from_slice(&payload);
    record
}

/// One table record of the manifest, as its layout in `manifest.rs` says.
pub struct Record {
    pub level: u32,
    pub numbers: [u64; 5], // number, file size, entries, smallest seq, largest seq
    pub keys: [Vec<u8>; 2],
}

pub struct Manifest {
    pub version: u32,
    /// Next file number, last sequence, WAL number.
    pub counters: [u64; 3],
    pub tables: Vec<Record>,
}

fn u32_at(b: &[u8], at: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
    *at += 4;
    v
}

fn u64_at(b: &[u8], at: &mut usize) -> u64 {
    let v = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
    *at += 8;
    v
}

/// The store's manifest, decoded by the test's own reading of its layout.
pub fn read_manifest(dir: &std::path::Path) -> Manifest {
    let bytes = std::fs::read(dir.join("MANIFEST")).unwrap();
    let mut at = 8;
    let version = u32_at(&bytes, &mut at);
    at += 8; // payload length, crc
    let counters = [(); 3].map(|_| u64_at(&bytes, &mut at));
    let count = u32_at(&bytes, &mut at);
    let tables = (0..count)
        .map(|_| {
            let level = u32_at(&bytes, &mut at);
            let numbers = [(); 5].map(|_| u64_at(&bytes, &mut at));
            let keys = [(); 2].map(|_| {
                let len = u32_at(&bytes, &mut at) as usize;
                at += len;
                bytes[at - len..at].to_vec()
            });
            Record {
                level,
                numbers,
                keys,
            }
        })
        .collect();
    assert_eq!(at, bytes.len(), "the test's reading of the layout");
    Manifest {
        version,
        counters,
        tables,
    }
}

/// Writes `m` as the store's manifest, checksummed.
pub fn write_manifest(dir: &std::path::Path, m: &Manifest) {
    let mut payload = Vec::new();
    for c in m.counters {
        payload.extend_from_slice(&c.to_le_bytes());
    }
    payload.extend_from_slice(&(m.tables.len() as u32).to_le_bytes());
    for t in &m.tables {
        payload.extend_from_slice(&t.level.to_le_bytes());
        for n in t.numbers {
            payload.extend_from_slice(&n.to_le_bytes());
        }
        for k in &t.keys {
            payload.extend_from_slice(&(k.len() as u32).to_le_bytes());
            payload.extend_from_slice(k);
        }
    }
    let mut out = std::fs::read(dir.join("MANIFEST")).unwrap()[..8].to_vec();
    out.extend_from_slice(&m.version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..16]);
    crc.update(&payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&payload);
    std::fs::write(dir.join("MANIFEST"), out).unwrap();
}

/// What a store should hold: key to newest value.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `Db::open_read_only` of `dir` when `read_only`, else `Db::open`.
pub fn open_either(
    dir: &std::path::Path,
    options: bloomlsm::Options,
    read_only: bool,
) -> bloomlsm::Result<bloomlsm::Db> {
    if read_only {
        bloomlsm::Db::open_read_only(dir, options)
    } else {
        bloomlsm::Db::open(dir, options)
    }
}

/// Every live pair of `db`, by a full scan.
pub fn contents(db: &bloomlsm::Db) -> Model {
    db.scan::<&[u8], _>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// SplitMix64: a case is the same for a seed forever (the background
/// threads' timing aside).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    /// In `0..n` (modulo: the cases seeds were recorded with). REQUIRES: `n > 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// One of `items`, uniformly. REQUIRES: `items` is not empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The seeds a randomized test runs: `count_var` of them (`default` when
/// unset) from `first_var` (0 when unset), so a longer run can go past the
/// seeds the default run tries.
pub fn env_seeds(count_var: &str, first_var: &str, default: u64) -> std::ops::Range<u64> {
    let var = |name: &str, unset: u64| {
        std::env::var(name).map_or(unset, |s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
        })
    };
    let first = var(first_var, 0);
    first..first + var(count_var, default)
}

/// A directory for one store: in memory (`/dev/shm`) where there is one,
/// or under `BLOOMLSM_TEST_TMPDIR`. For tests that check answers, not
/// durability: on a disk the fsyncs of hundreds of flushes a case make
/// them ten times slower.
pub fn scratch_dir() -> tempfile::TempDir {
    let base = std::env::var_os("BLOOMLSM_TEST_TMPDIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::tempdir_in(base).unwrap()
}

/// A scratch directory on a disk file system, for tests of direct reads (`BLOOMLSM_DIRECT_TMPDIR`,
/// else `/var/tmp`), or `None` where the file system there is in memory or
/// refuses `O_DIRECT` (the test is then skipped, saying so).
pub fn disk_dir() -> Option<tempfile::TempDir> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let base = std::env::var_os("BLOOMLSM_DIRECT_TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/var/tmp".into());
    let dir = tempfile::tempdir_in(&base).ok()?;
    let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: statfs is plain old data, for which all zero bytes are valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a statfs the call fills.
    assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0);
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target.
    let kind = st.f_type as i64;
    if kind == TMPFS_MAGIC || kind == RAMFS_MAGIC || !direct_reads_work(dir.path()) {
        println!("skipped: {} is not a disk serving O_DIRECT", base.display());
        return None;
    }
    Some(dir)
}
