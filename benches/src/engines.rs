//! The engines under test behind one interface, with mirrored settings.

use std::path::Path;

use anyhow::{Context, Result};
use bloomlsm::{Db, FilterKind, Options, SyncMode};
use bloomlsm_filter::Filter as _;
use bloomlsm_filter::planning::RunShape;
use rocksdb::statistics::Ticker;

use crate::probes::LevelProbes;
use crate::rocks_probes::{self, parse_property};

/// Read-path counters of an engine, as cumulative totals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReadCounters {
    /// Data blocks read from files (block cache misses).
    pub data_block_reads: u64,
    /// Filter probes that said "absent" (reads saved).
    pub filter_negatives: u64,
    /// Filter "maybe" answers for keys not in the table.
    pub filter_false_positives: u64,
}

/// Descriptors RocksDB's table cache leaves to files other than tables
/// (`kNumNonTableCacheFiles`): its table cache holds `max_open_files`
/// less this many.
const ROCKSDB_NON_TABLE_FILES: usize = 10;

/// The smallest write buffer RocksDB takes: it raises any smaller
/// `write_buffer_size` to this, silently (`SanitizeOptions` in
/// `db/column_family.cc`; its LOG then shows `Options.write_buffer_size:
/// 65536`).
pub const ROCKSDB_MIN_WRITE_BUFFER_BYTES: usize = 64 << 10;

/// Settings both engines share.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Mirror {
    /// Bits per key of the filters (0: none).
    pub bits_per_key: f64,
    /// Block cache bytes.
    pub block_cache_bytes: u64,
    /// Data block size.
    pub block_size: usize,
    /// Memtable (write buffer) bytes; both engines run at
    /// `memtable_bytes_in_effect`.
    pub memtable_bytes: usize,
    /// Target table size.
    pub target_file_bytes: u64,
    /// L1 byte budget.
    pub l1_bytes: u64,
    /// Table reads bypass the page cache (`O_DIRECT`) on both engines.
    pub direct_io: bool,
    /// Key plus value bytes of the loaded entries (0: unknown, taken as
    /// 116); sizes the tables RocksDB's Ribbon filter is calibrated on.
    #[serde(default)]
    pub entry_bytes: usize,
    /// L0 tables at which writes slow down, on both engines (0: each
    /// engine's own default).
    #[serde(default)]
    pub l0_slowdown_trigger: usize,
    /// L0 tables at which writes stop, on both engines (0: each engine's
    /// own default).
    #[serde(default)]
    pub l0_stop_trigger: usize,
    /// Most table files open at once on both engines (0: no bound, every
    /// table keeps its file open). Ours: `Options::max_open_files`;
    /// RocksDB: `max_open_files` of this plus the 10 descriptors its table
    /// cache leaves to other files, so both hold this many tables open
    /// (RocksDB raises `max_open_files` to at least 20, so at most 10
    /// tables fewer than 10 are not mirrored exactly).
    #[serde(default)]
    pub max_open_files: usize,
}

impl Mirror {
    /// The settings `make bench` mirrors on both engines by default: 10
    /// bits per key, 8 MiB block cache, 4 KiB blocks, 8 MiB memtables and
    /// tables, 64 MiB L1, buffered reads, 16-byte keys with 100-byte values;
    /// each engine's own L0 slowdown and stop triggers.
    pub fn bench_defaults() -> Self {
        Self {
            l0_slowdown_trigger: 0,
            l0_stop_trigger: 0,
            bits_per_key: 10.0,
            block_cache_bytes: 8 << 20,
            block_size: 4096,
            memtable_bytes: 8 << 20,
            target_file_bytes: 8 << 20,
            l1_bytes: 64 << 20,
            direct_io: false,
            entry_bytes: 16 + 100,
            max_open_files: 0,
        }
    }

    /// The memtable bytes both engines run at: `memtable_bytes`, but at
    /// least RocksDB's minimum write buffer, which RocksDB would apply to
    /// itself alone (with 32 KiB asked, its memtables held 64 KiB, about
    /// 800 entries of 48 bytes, where ours held about 460).
    pub fn memtable_bytes_in_effect(&self) -> usize {
        self.memtable_bytes.max(ROCKSDB_MIN_WRITE_BUFFER_BYTES)
    }

    /// Keys a full table of `target_file_bytes` holds, about: each entry
    /// also stores an 8-byte sequence and tag and about 3 bytes of lengths.
    pub fn keys_per_table(&self) -> u64 {
        let entry = if self.entry_bytes == 0 {
            116
        } else {
            self.entry_bytes
        };
        self.target_file_bytes / (entry as u64 + 11)
    }
}

/// Memory an engine keeps for its tables, and what it wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct EngineSpace {
    /// Bytes of filters of the live tables.
    pub filter_bytes: u64,
    /// Bytes of indexes of the live tables (ours: in memory; RocksDB's: the
    /// index blocks, which it keeps as they are on disk).
    pub index_bytes: u64,
    /// Bytes of table files written by flushes and compactions.
    pub table_bytes_written: u64,
}

/// One engine in the comparison. `Sync`: read workloads call it from
/// several threads at once.
pub trait Engine: Sync {
    /// Name in reports.
    fn name(&self) -> &str;
    /// Writes a key.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads a key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads up to `n` pairs from `start`.
    fn scan(&self, start: &[u8], n: usize) -> Result<usize>;
    /// Flushes memtables and waits for background compaction to settle.
    fn settle(&self) -> Result<()>;
    /// Cumulative read counters.
    fn counters(&self) -> ReadCounters;
    /// Bytes of filters held for the live tables.
    fn filter_bytes(&self) -> Result<u64>;
    /// Bytes of the store's files on disk.
    fn disk_bytes(&self) -> Result<u64>;
    /// Filter and index memory and bytes written by flush and compaction.
    fn space(&self) -> Result<EngineSpace>;
    /// The tree's shape in words (tables and keys or bytes per level).
    fn levels(&self) -> Result<String>;
    /// Bytes written into, read from and moved into each level by flushes
    /// and compactions since open, as a text table (RocksDB: the
    /// "Compaction Stats" block of its `rocksdb.stats` property).
    fn compaction_stats(&self) -> Result<String>;
    /// The runs an absent get probes (each L0 table, each level below)
    /// with their keys and keys per table, where the engine reports them;
    /// empty otherwise.
    fn runs(&self) -> Vec<RunShape>;
    /// The kind of filter of our engines (none for RocksDB).
    fn filter_kind(&self) -> Option<FilterKind> {
        None
    }
    /// Every level with its tables, keys and filter bytes, and cumulative
    /// filter probes and block reads of point reads there (RocksDB: of the
    /// threads that switched counting on).
    fn level_probes(&self) -> Result<Vec<LevelProbes>>;
    /// Switches per-level counting of this thread's point reads on or off
    /// (RocksDB counts per thread; ours always counts).
    fn count_probes_on_this_thread(&self, _on: bool) {}
    /// The tree in one line for `--shape-every`: per level, tables and MB,
    /// and where the engine lists its tables' key ranges (RocksDB's
    /// `live_files`), the share of the key space its tables span (the share
    /// of absent gets that probe it), the extent from its first table's
    /// smallest key to its last's largest, and those two keys.
    fn shape(&self) -> String {
        shape_of(&self.tables())
    }
    /// Every live table (empty where the engine cannot list them).
    fn tables(&self) -> Vec<TableDump> {
        Vec::new()
    }
}

/// One live table: its level, key range and entries.
#[derive(Clone, Debug, PartialEq)]
pub struct TableDump {
    /// Level (0: the overlapping tables).
    pub level: usize,
    /// Smallest key.
    pub smallest: Vec<u8>,
    /// Largest key.
    pub largest: Vec<u8>,
    /// Entries (RocksDB: `num_entries`).
    pub entries: u64,
    /// File bytes.
    pub bytes: u64,
}

/// Per level: tables, MB, the share of the key space its tables span (the
/// share of absent gets that probe it), the extent from its first table's
/// smallest key to its last's largest, and those two keys.
pub fn shape_of(tables: &[TableDump]) -> String {
    let mut tables: Vec<&TableDump> = tables.iter().collect();
    tables.sort_by(|a, b| (a.level, &a.smallest).cmp(&(b.level, &b.smallest)));
    let deepest = tables.iter().map(|t| t.level).max().unwrap_or(0);
    let mut out = Vec::new();
    for level in 0..=deepest {
        let l: Vec<_> = tables.iter().filter(|t| t.level == level).collect();
        let (Some(first), Some(last)) = (l.first(), l.last()) else {
            continue;
        };
        let span: f64 = l
            .iter()
            .map(|t| key_fraction(&t.largest) - key_fraction(&t.smallest))
            .sum();
        let extent = key_fraction(&last.largest) - key_fraction(&first.smallest);
        let bytes: u64 = l.iter().map(|t| t.bytes).sum();
        out.push(format!(
            "L{level} {}t {:.2}MB span {:.2} extent {:.2} [{:.2},{:.2}]",
            l.len(),
            bytes as f64 / 1048576.0,
            span,
            extent,
            key_fraction(&first.smallest),
            key_fraction(&last.largest)
        ));
    }
    out.join(" | ")
}

/// Every table of `tables` in one line each, level then smallest key:
/// `table NAME WHEN L<level> <smallest> <largest> <entries>` with the keys
/// as fractions of the key space.
pub fn dump_tables(name: &str, when: &str, tables: &[TableDump]) -> String {
    let mut tables: Vec<&TableDump> = tables.iter().collect();
    tables.sort_by(|a, b| (a.level, &a.smallest).cmp(&(b.level, &b.smallest)));
    tables
        .iter()
        .map(|t| {
            format!(
                "table {name} {when} L{} {:.6} {:.6} {}\n",
                t.level,
                key_fraction(&t.smallest),
                key_fraction(&t.largest),
                t.entries
            )
        })
        .collect()
}

/// A key of the benchmark (`keys::present_key`: decimal digits, then
/// padding) as a fraction of its key space.
fn key_fraction(key: &[u8]) -> f64 {
    let digits: Vec<u8> = key.iter().copied().take_while(u8::is_ascii_digit).collect();
    let n: f64 = std::str::from_utf8(&digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0.0);
    n / 10f64.powi(digits.len() as i32)
}

/// bloomlsm. Under the optimized policy the engine keeps filter memory at
/// uniform's throughout the load and rebuilds filters whose level's budget
/// moved by itself (`settle` waits for that too): no final rebuild here.
pub struct Bloom {
    name: String,
    db: Db,
    kind: FilterKind,
}

impl Bloom {
    /// Opens bloomlsm in `dir` with the mirrored settings.
    pub fn open(
        name: &str,
        dir: &Path,
        m: &Mirror,
        kind: FilterKind,
        optimized: bool,
    ) -> Result<Self> {
        let mut options = Options {
            block_cache_bytes: m.block_cache_bytes,
            block_size: m.block_size,
            memtable_bytes: m.memtable_bytes_in_effect(),
            target_file_bytes: m.target_file_bytes,
            l1_bytes: m.l1_bytes,
            sync: SyncMode::Never,
            use_direct_reads: m.direct_io,
            max_open_files: (m.max_open_files > 0).then_some(m.max_open_files),
            ..Options::default().with_bits_per_key(m.bits_per_key)
        };
        if m.l0_slowdown_trigger > 0 {
            options.l0_slowdown_trigger = m.l0_slowdown_trigger;
        }
        if m.l0_stop_trigger > 0 {
            options.l0_stop_trigger = m.l0_stop_trigger;
        }
        options.filter_kind = kind;
        if optimized {
            options.filter_policy = bloomlsm::FilterPolicy::Optimized {
                bits_per_key: m.bits_per_key,
            };
        }
        let db = Db::open(dir, options).context("opening bloomlsm")?;
        Ok(Self {
            name: name.to_string(),
            db,
            kind,
        })
    }

    /// The store.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for Bloom {
    fn name(&self) -> &str {
        &self.name
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put(key, value)?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let mut count = 0;
        for item in self.db.scan(start..)?.take(n) {
            item?;
            count += 1;
        }
        Ok(count)
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        self.db.wait_for_background_work()?;
        Ok(())
    }
    fn counters(&self) -> ReadCounters {
        let s = self.db.stats();
        ReadCounters {
            data_block_reads: s.total.data_blocks_read,
            filter_negatives: s.total.filter_negatives,
            filter_false_positives: s.total.filter_false_positives,
        }
    }
    fn filter_bytes(&self) -> Result<u64> {
        Ok(self.db.stats().total.filter_bytes)
    }
    fn disk_bytes(&self) -> Result<u64> {
        dir_bytes(self.db.path())
    }
    fn space(&self) -> Result<EngineSpace> {
        // The index's memory is what the tables hold beyond their filters;
        // measured on a second, cache-less open of each live table file.
        let mut index_bytes = 0;
        for entry in std::fs::read_dir(self.db.path()).context("listing store directory")? {
            let path = entry.context("reading directory entry")?.path();
            if path.extension().is_some_and(|e| e == "sst") {
                match bloomlsm_sstable::Table::open_path(&path, 0, None) {
                    Ok(t) => {
                        let filter = t.filter().map_or(0, |f| f.memory_bytes());
                        index_bytes += (t.memory_bytes() - filter) as u64;
                    }
                    // Deleted by a compaction since the listing.
                    Err(_) if !path.exists() => {}
                    Err(e) => return Err(e).context("opening a table to measure its index"),
                }
            }
        }
        let s = self.db.stats();
        Ok(EngineSpace {
            filter_bytes: s.total.filter_bytes,
            index_bytes,
            table_bytes_written: s.bytes_written,
        })
    }
    fn levels(&self) -> Result<String> {
        let s = self.db.stats();
        let levels: Vec<String> = s
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tables > 0)
            .map(|(i, l)| {
                format!(
                    "L{i}: {} tables, {} keys, {:.2} bits/key",
                    l.tables, l.entries, l.bits_per_key
                )
            })
            .collect();
        Ok(levels.join("; "))
    }
    fn compaction_stats(&self) -> Result<String> {
        let s = self.db.stats();
        let mb = |b: u64| b as f64 / (1 << 20) as f64;
        let mut out =
            String::from("Level  Files  Size(MB)  Write(MB)  Read(MB)  Moved in(MB)  Writes\n");
        for (i, l) in s.levels.iter().enumerate() {
            if l.tables == 0 && l.bytes_written == 0 && l.bytes_moved_in == 0 {
                continue;
            }
            out += &format!(
                "L{i:<5} {:>5} {:>9.1} {:>10.1} {:>9.1} {:>13.1} {:>7}\n",
                l.tables,
                mb(l.file_bytes),
                mb(l.bytes_written),
                mb(l.bytes_compacted_read),
                mb(l.bytes_moved_in),
                l.writes_into
            );
        }
        out += &format!(
            "Sum    {:>5} {:>9.1} {:>10.1} {:>9.1} {:>13.1} {:>7}\n",
            s.total.tables,
            mb(s.total.file_bytes),
            mb(s.total.bytes_written),
            mb(s.total.bytes_compacted_read),
            mb(s.total.bytes_moved_in),
            s.total.writes_into
        );
        Ok(out)
    }
    fn runs(&self) -> Vec<RunShape> {
        // Tables of a level are taken as equal shares of it (stats are per
        // level).
        let mut runs = Vec::new();
        for (level, l) in self.db.stats().levels.iter().enumerate() {
            if l.tables == 0 {
                continue;
            }
            let table_keys = l.entries / l.tables;
            if level == 0 {
                runs.extend((0..l.tables).map(|_| RunShape {
                    keys: table_keys,
                    table_keys,
                }));
            } else {
                runs.push(RunShape {
                    keys: l.entries,
                    table_keys,
                });
            }
        }
        runs
    }
    fn tables(&self) -> Vec<TableDump> {
        bloomlsm::table_records(self.db.path())
            .unwrap_or_default()
            .into_iter()
            .map(|t| TableDump {
                level: t.level,
                smallest: t.smallest_key,
                largest: t.largest_key,
                entries: t.entries,
                bytes: t.file_size,
            })
            .collect()
    }
    fn filter_kind(&self) -> Option<FilterKind> {
        Some(self.kind)
    }
    fn level_probes(&self) -> Result<Vec<LevelProbes>> {
        Ok(self
            .db
            .stats()
            .levels
            .iter()
            .enumerate()
            .map(|(level, l)| LevelProbes {
                level,
                tables: l.tables,
                keys: l.entries,
                filter_bytes: l.filter_bytes,
                probes: l.filter_negatives
                    + l.filter_false_positives
                    + l.filter_true_positives
                    + l.probes_without_filter,
                // Counted over absent gets only (`probes::profile`): there a
                // table without a usable filter wastes a block read as a
                // false positive does.
                false_positives: l.filter_false_positives + l.probes_without_filter,
                block_reads: l.data_blocks_read,
            })
            .collect())
    }
}

/// RocksDB through the `rocksdb` crate.
pub struct Rocks {
    name: String,
    db: rocksdb::DB,
    options: rocksdb::Options,
    dir: std::path::PathBuf,
    read: rocksdb::ReadOptions,
    write: rocksdb::WriteOptions,
}

impl Rocks {
    /// Opens RocksDB in `dir` with the mirrored settings: full (format
    /// version 5) bloom filters, no compression, same block size and cache,
    /// filters and index in memory, WAL on and fsync off, statistics on.
    /// With `ribbon`, Ribbon filters (`set_ribbon_filter`) at the same
    /// memory instead of Bloom.
    pub fn open(name: &str, dir: &Path, m: &Mirror, ribbon: bool) -> Result<Self> {
        let mut table = rocksdb::BlockBasedOptions::default();
        if m.bits_per_key > 0.0 {
            if ribbon {
                // Equal memory: the Bloom-equivalent at which RocksDB's own
                // filters of tables this size take `bits_per_key` (the bits
                // it really spent are reported as filter bytes per key).
                let scratch = dir.with_extension("ribbon-calibration");
                let bloom_bits = crate::rocks_ribbon::bloom_equivalent_for_memory(
                    &scratch,
                    m.bits_per_key,
                    m.keys_per_table(),
                )?;
                eprintln!(
                    "{name}: Ribbon at {:.3} Bloom-equivalent bits/key for {} bits/key of memory",
                    bloom_bits, m.bits_per_key
                );
                table.set_ribbon_filter(bloom_bits);
            } else {
                table.set_bloom_filter(m.bits_per_key, false);
            }
        }
        table.set_format_version(5);
        table.set_block_size(m.block_size);
        let cache = rocksdb::Cache::new_lru_cache(m.block_cache_bytes as usize);
        table.set_block_cache(&cache);
        table.set_cache_index_and_filter_blocks(false);
        let mut options = rocksdb::Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        options.set_compression_type(rocksdb::DBCompressionType::None);
        options.set_write_buffer_size(m.memtable_bytes_in_effect());
        options.set_target_file_size_base(m.target_file_bytes);
        options.set_max_bytes_for_level_base(m.l1_bytes);
        options.set_level_zero_file_num_compaction_trigger(4);
        if m.l0_slowdown_trigger > 0 {
            options.set_level_zero_slowdown_writes_trigger(m.l0_slowdown_trigger as i32);
        }
        if m.l0_stop_trigger > 0 {
            options.set_level_zero_stop_writes_trigger(m.l0_stop_trigger as i32);
        }
        options.set_max_background_jobs(2);
        options.set_max_open_files(if m.max_open_files > 0 {
            i32::try_from(m.max_open_files + ROCKSDB_NON_TABLE_FILES).unwrap_or(i32::MAX)
        } else {
            -1
        });
        options.enable_statistics();
        options.set_use_direct_reads(m.direct_io);
        let db = rocksdb::DB::open(&options, dir).context("opening rocksdb")?;
        let mut write = rocksdb::WriteOptions::default();
        write.set_sync(false);
        write.disable_wal(false);
        Ok(Self {
            name: name.to_string(),
            db,
            options,
            dir: dir.to_path_buf(),
            read: rocksdb::ReadOptions::default(),
            write,
        })
    }
}

impl Engine for Rocks {
    fn name(&self) -> &str {
        &self.name
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_opt(key, &self.read)?)
    }
    fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
        let mode = rocksdb::IteratorMode::From(start, rocksdb::Direction::Forward);
        let mut count = 0;
        for item in self.db.iterator(mode).take(n) {
            item?;
            count += 1;
        }
        Ok(count)
    }
    fn settle(&self) -> Result<()> {
        self.db.flush()?;
        loop {
            let pending = self
                .db
                .property_int_value("rocksdb.compaction-pending")?
                .unwrap_or(0);
            let running = self
                .db
                .property_int_value("rocksdb.num-running-compactions")?
                .unwrap_or(0);
            let flushing = self
                .db
                .property_int_value("rocksdb.num-running-flushes")?
                .unwrap_or(0);
            if pending == 0 && running == 0 && flushing == 0 {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    fn counters(&self) -> ReadCounters {
        let t = |ticker| self.options.get_ticker_count(ticker);
        let positive = t(Ticker::BloomFilterFullPositive);
        let true_positive = t(Ticker::BloomFilterFullTruePositive);
        ReadCounters {
            data_block_reads: t(Ticker::BlockCacheDataMiss),
            filter_negatives: t(Ticker::BloomFilterUseful),
            filter_false_positives: positive.saturating_sub(true_positive),
        }
    }
    fn filter_bytes(&self) -> Result<u64> {
        let props = self
            .db
            .property_value("rocksdb.aggregated-table-properties")?
            .unwrap_or_default();
        Ok(parse_property(&props, "filter block size").unwrap_or(0))
    }
    fn disk_bytes(&self) -> Result<u64> {
        dir_bytes(&self.dir)
    }
    fn space(&self) -> Result<EngineSpace> {
        let props = self
            .db
            .property_value("rocksdb.aggregated-table-properties")?
            .unwrap_or_default();
        let t = |ticker| self.options.get_ticker_count(ticker);
        Ok(EngineSpace {
            filter_bytes: parse_property(&props, "filter block size").unwrap_or(0),
            index_bytes: parse_property(&props, "index block size").unwrap_or(0),
            table_bytes_written: t(Ticker::FlushWriteBytes) + t(Ticker::CompactWriteBytes),
        })
    }
    fn levels(&self) -> Result<String> {
        let mut levels = Vec::new();
        for level in 0..7 {
            let files = self
                .db
                .property_value(&format!("rocksdb.num-files-at-level{level}"))?
                .unwrap_or_default();
            if files.trim() != "0" && !files.is_empty() {
                levels.push(format!("L{level}: {} tables", files.trim()));
            }
        }
        Ok(levels.join("; "))
    }
    fn compaction_stats(&self) -> Result<String> {
        let text = self.db.property_value("rocksdb.stats")?.unwrap_or_default();
        Ok(compaction_stats_block(&text))
    }
    fn runs(&self) -> Vec<RunShape> {
        Vec::new()
    }
    fn level_probes(&self) -> Result<Vec<LevelProbes>> {
        rocks_probes::level_probes(&self.db, 7)
    }
    fn count_probes_on_this_thread(&self, on: bool) {
        rocks_probes::count_on_this_thread(on);
    }
    fn tables(&self) -> Vec<TableDump> {
        let Ok(files) = self.db.live_files() else {
            return Vec::new();
        };
        files
            .into_iter()
            .map(|f| TableDump {
                level: usize::try_from(f.level).unwrap_or(0),
                smallest: f.start_key.unwrap_or_default(),
                largest: f.end_key.unwrap_or_default(),
                entries: f.num_entries,
                bytes: f.size as u64,
            })
            .collect()
    }
}

fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).context("listing store directory")? {
        let entry = entry.context("reading directory entry")?;
        total += entry.metadata().context("reading file metadata")?.len();
    }
    Ok(total)
}

/// The per-level table of RocksDB's "Compaction Stats" section of
/// `rocksdb.stats`: its header line through the `Sum` row (empty when the
/// text has none).
pub fn compaction_stats_block(stats: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in stats.lines() {
        if !inside && line.trim_start().starts_with("Level") {
            inside = true;
        }
        if inside {
            out += line;
            out.push('\n');
            if line.trim_start().starts_with("Sum") {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::compaction_stats_block;

    #[test]
    fn the_compaction_stats_block_is_cut_from_header_to_sum() {
        let text = "\n** Compaction Stats [default] **\n\
            Level    Files   Size     Score Read(GB)\n\
            ----------------------------------------\n  \
            L0      2/0    1.23 MB   0.5      0.0\n  \
            Sum    205/0   120.00 MB   0.0      1.1\n  \
            Int      0/0    0.00 KB   0.0      0.0\n\n\
            ** Compaction Stats [default] **\n\
            Priority    Files   Size\n";
        let block = compaction_stats_block(text);
        assert!(block.starts_with("Level    Files"));
        assert!(block.trim_end().ends_with("1.1"));
        assert!(block.contains("L0      2/0"));
        assert!(!block.contains("Int") && !block.contains("Priority"));
        assert_eq!(compaction_stats_block("no stats here"), "");
    }
}
