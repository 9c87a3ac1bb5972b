//! `stats`: what the filters saved, in total and per level.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use bloomlsm::{Db, LevelStats, TableMeta, WalCut, WalCutCause};
use bloomlsm_sstable::{RandomAccessFile, Table, TableIter};

use super::{Outcome, StoreFlags, open_to_study};
use crate::output::{Fields, Value};

/// Most stored keys that seed the absent keys (each absent key sorts right
/// after one, so it falls inside the tables' key ranges).
const MAX_SEED_KEYS: u64 = 100_000;

/// The store (and the absent gets asked for), the totals, then one row
/// per non-empty level.
pub fn run(path: &Path, store: StoreFlags, absent_gets: u64) -> Result<Outcome> {
    run_opening(path, absent_gets, &mut || open_to_study(path, store))
}

/// [`run`], opening the store with `open`, once: the seeds, the absent
/// gets and the figures all come from that one open, under its lock (no
/// writer can change the tree in between). The seeds are read from the
/// table files without the store's block cache ([`seed_keys`]), so the
/// absent gets still meet a cold cache.
fn run_opening(
    path: &Path,
    absent_gets: u64,
    open: &mut dyn FnMut() -> Result<Db>,
) -> Result<Outcome> {
    let db = open()?;
    let measured = measure(&db, path, absent_gets);
    let closed = db.close();
    let (absent_gets_run, s) = measured?;
    closed?;
    let levels: Vec<Value> = s
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.tables > 0)
        .map(|(i, l)| level_row(i, l))
        .collect();
    let mut fields = Fields::new().with("store", path.display().to_string());
    if absent_gets > 0 {
        fields.push("absent_gets_run", absent_gets_run);
    }
    let fields = fields
        .with("gets", s.gets)
        .with("table_probes", s.total.table_probes)
        .with("reads_saved", s.total.filter_negatives)
        .with("false_positives", s.total.filter_false_positives)
        .with("probes_without_filter", s.total.probes_without_filter)
        .with("observed_fpr", observed_fpr(&s.total))
        .with("theoretical_fpr", theoretical_fpr(&s.total))
        .with(
            "data_blocks_read_per_get",
            (s.gets > 0).then_some(s.data_blocks_read_per_get),
        )
        .with(
            "tables_without_usable_filter",
            s.total.tables_without_usable_filter,
        )
        .with("filter_read_retries", s.total.filter_read_retries)
        .with("levels", levels)
        .with("wal_replay_cut", s.wal_replay_cut.as_ref().map(wal_cut_row))
        .with(
            "wal_headers_salvaged",
            s.wal_headers_salvaged
                .iter()
                .map(|p| Value::from(p.display().to_string()))
                .collect::<Vec<_>>(),
        );
    Ok(Value::from(fields).into())
}

/// Runs the absent gets on `db` (seeded from its tables), then takes its
/// counters: how many gets ran, and the stats.
fn measure(db: &Db, path: &Path, absent_gets: u64) -> Result<(u64, bloomlsm::Stats)> {
    let seeds = if absent_gets > 0 {
        seed_keys(db, path, absent_gets)?
    } else {
        Vec::new()
    };
    let run = run_absent_gets(db, &seeds, absent_gets)?;
    Ok((run, db.stats()))
}

/// Where the open's WAL replay stopped short, and why (null when it
/// replayed every WAL whole).
fn wal_cut_row(c: &WalCut) -> Fields {
    Fields::new()
        .with("wal", c.path.display().to_string())
        .with("offset", c.offset)
        .with("bytes_not_replayed", c.bytes_not_replayed)
        .with("cause", cut_cause(c.cause))
}

/// Why a WAL replay stopped short, in words.
pub(super) fn cut_cause(cause: WalCutCause) -> &'static str {
    match cause {
        WalCutCause::TornTail => "torn tail",
        WalCutCause::UnsyncedWal => "damage in a WAL written without fsync",
        WalCutCause::PointInTime => "damage, point-in-time recovery",
        _ => "other",
    }
}

/// Stored keys spread over every table: each table of the manifest gives a
/// share of the seeds in proportion to its entries, its first keys (live,
/// deleted or overwritten: each is in the table's key range), read from
/// its file, not through `db`, so the store's block cache stays cold for
/// the absent gets. So every level's tables meet absent keys, not only
/// those holding the store's smallest keys. A store of no table (every
/// write still in the WAL) gives its smallest keys, from its memtables. A
/// table of one key meets no absent key (none is in its range).
fn seed_keys(db: &Db, path: &Path, absent_gets: u64) -> Result<Vec<Vec<u8>>> {
    let wanted = absent_gets.min(MAX_SEED_KEYS);
    // Read under the study open's lock: no writer can change the manifest
    // or remove a table it names.
    let tables = bloomlsm::table_records(path)?;
    let entries: u64 = tables.iter().map(|t| t.entries).sum();
    let mut stored = Vec::new();
    for table in &tables {
        let share =
            (u128::from(wanted) * u128::from(table.entries)).div_ceil(u128::from(entries.max(1)));
        stored.extend(first_keys(path, table, share.max(1) as usize)?);
    }
    if stored.is_empty() {
        // No table: only memtables are read, no block enters the cache.
        for item in db.scan::<&[u8], _>(..)?.take(wanted as usize) {
            stored.push(item?.0);
        }
    }
    Ok(stored)
}

/// The first `count` distinct user keys of `table` (a table of the store
/// in `dir`), read from its file at the size the manifest records, with no
/// block cache.
fn first_keys(dir: &Path, table: &TableMeta, count: usize) -> Result<Vec<Vec<u8>>> {
    let path = table.file_path(dir);
    let file = std::fs::File::open(&path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    first_keys_of(Arc::new(file), &path, table.file_size, count)
}

/// [`first_keys`] of the table that `file` (at `path`) holds in its first
/// `file_size` bytes.
fn first_keys_of(
    file: Arc<dyn RandomAccessFile>,
    path: &Path,
    file_size: u64,
    count: usize,
) -> Result<Vec<Vec<u8>>> {
    let table = Table::open_at(file, path, file_size, 0, None)?;
    // Block by block: the first few blocks are all a seed needs, where a
    // cursor that does not fill the cache reads 256 KiB ahead, for a pass
    // over the whole table. With no cache, filling it caches nothing.
    let mut iter = TableIter::new(Arc::new(table), true);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    while keys.len() < count && iter.advance()? {
        if keys.last().map(Vec::as_slice) != Some(iter.user_key()) {
            keys.push(iter.user_key().to_vec());
        }
    }
    Ok(keys)
}

/// `absent_gets` gets of keys that sort right after a seed (none without
/// seeds); returns how many ran.
fn run_absent_gets(db: &Db, seeds: &[Vec<u8>], absent_gets: u64) -> Result<u64> {
    if seeds.is_empty() {
        return Ok(0);
    }
    for i in 0..absent_gets {
        let mut key = seeds[(i as usize) % seeds.len()].clone();
        key.extend_from_slice(format!("\u{0}absent{i}").as_bytes());
        db.get(&key)?;
    }
    Ok(absent_gets)
}

/// False positives over the filters' answers; `None` (`-`, JSON null)
/// when no filter answered, where the library's 0 would read as a filter
/// that never erred.
fn observed_fpr(l: &LevelStats) -> Option<f64> {
    (l.filter_negatives + l.filter_false_positives > 0).then_some(l.observed_fpr)
}

/// The filters' expected rate; `None` (`-`, JSON null) when no table has
/// a usable filter (damaged, or none built): the library's 0 would read as
/// filters that never err, where every probe reads a block. The library
/// weights the rate by the keys of the filters in memory, and a filter of
/// a table (at least one key, above 0 bits per key) holds bytes: no filter
/// bytes is no filter to weight.
fn theoretical_fpr(l: &LevelStats) -> Option<f64> {
    (l.filter_bytes > 0).then_some(l.theoretical_fpr)
}

fn level_row(level: usize, l: &LevelStats) -> Value {
    Fields::new()
        .with("level", level)
        .with("tables", l.tables)
        .with("entries", l.entries)
        .with("tombstones", l.tombstones)
        .with("filter_bytes", l.filter_bytes)
        .with("bits_per_key", l.bits_per_key)
        .with("theoretical_fpr", theoretical_fpr(l))
        .with("table_probes", l.table_probes)
        .with("reads_saved", l.filter_negatives)
        .with("false_positives", l.filter_false_positives)
        .with("probes_without_filter", l.probes_without_filter)
        .with("observed_fpr", observed_fpr(l))
        .with("data_blocks_read", l.data_blocks_read)
        .into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

    use bloomlsm::{Options, WalRecovery};

    use super::*;

    /// The command line's defaults.
    fn flags() -> StoreFlags {
        StoreFlags {
            wal_recovery: WalRecovery::TolerateTornTail,
            num_levels: 7,
            use_direct_reads: false,
            max_open_files: None,
        }
    }

    /// One L0 table of 2,000 keys in 256-byte blocks, and two more in the
    /// WAL; closed.
    fn store() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            block_size: 256,
            background_work: false,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..2000u64 {
            db.put(format!("key{i:05}").as_bytes(), b"value").unwrap();
        }
        db.flush().unwrap();
        db.put(b"key99998", b"in the WAL").unwrap();
        db.put(b"key99999", b"in the WAL").unwrap();
        db.close().unwrap();
        dir
    }

    /// `stats --absent-gets` opened the store twice (once to seed, once
    /// to measure with a cold cache): a second open replays the WAL again
    /// and, between the two, another process could take the store and
    /// change it, so the seeds were drawn from another tree than the one
    /// measured. One open now, held from the seeds to the figures.
    #[test]
    fn absent_gets_open_the_store_once() {
        let dir = store();
        let mut opens = 0;
        let out = run_opening(dir.path(), 500, &mut || {
            opens += 1;
            open_to_study(dir.path(), flags())
        })
        .unwrap();
        assert_eq!(opens, 1);
        let Value::Fields(fields) = out.value else {
            panic!("not fields")
        };
        assert_eq!(fields.get("absent_gets_run"), Some(&Value::Int(500)));
        assert_eq!(fields.get("gets"), Some(&Value::Int(500)));
    }

    /// Bytes read through a file, by point and bulk reads alike.
    #[derive(Debug)]
    struct Counting {
        file: std::fs::File,
        bytes: std::sync::atomic::AtomicU64,
    }

    impl RandomAccessFile for Counting {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            let n = buf.len() as u64;
            self.bytes
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            RandomAccessFile::read_exact_at(&self.file, buf, offset)
        }

        fn len(&self) -> std::io::Result<u64> {
            RandomAccessFile::len(&self.file)
        }
    }

    /// Seeding reads the few data blocks holding a table's first keys, not
    /// a 256 KiB read-ahead window per table (a pass over a whole table's,
    /// `TableIter` without the cache): a store of a thousand 8 MiB tables
    /// read 256 MiB to seed `--absent-gets 1000`, one key per table.
    #[test]
    fn seeding_reads_only_the_blocks_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            Options {
                background_work: false,
                ..Options::default()
            },
        )
        .unwrap();
        for i in 0..20_000u64 {
            db.put(format!("key{i:06}").as_bytes(), &[b'v'; 40])
                .unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
        let tables = bloomlsm::table_records(dir.path()).unwrap();
        let t = &tables[0];
        assert!(t.file_size > 512 << 10, "{}", t.file_size);
        let path = t.file_path(dir.path());
        let counting = || {
            Arc::new(Counting {
                file: std::fs::File::open(&path).unwrap(),
                bytes: 0.into(),
            })
        };
        // What opening the table reads (footer, properties, index, filter).
        let open = counting();
        Table::open_at(open.clone(), &path, t.file_size, 0, None).unwrap();
        let opened = open.bytes.load(std::sync::atomic::Ordering::Relaxed);
        let seeded = counting();
        let keys = first_keys_of(seeded.clone(), &path, t.file_size, 10).unwrap();
        assert_eq!(keys.len(), 10);
        let read = seeded.bytes.load(std::sync::atomic::Ordering::Relaxed) - opened;
        // Ten keys of 50 bytes sit in the first 4 KiB block.
        assert!(read <= 2 * 4096 + 64, "{read} bytes read for 10 keys");
    }

    /// The seeds are read without the store's block cache, so the absent
    /// gets that follow on the same open meet a cold cache: a false
    /// positive's block is read from its file, as `data_blocks_read`
    /// counts, not served by the seeding's reads.
    #[test]
    fn seeding_leaves_the_block_cache_cold() {
        let dir = store();
        let db = open_to_study(dir.path(), flags()).unwrap();
        let seeds = seed_keys(&db, dir.path(), 500).unwrap();
        assert!(seeds.len() >= 100, "{}", seeds.len());
        assert_eq!(db.stats().block_cache_used_bytes, 0);
        db.close().unwrap();
    }
}
