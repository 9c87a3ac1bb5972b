//! The writer behind `TableFiles::write`: takes entries in table order and
//! cuts them into tables, only between user keys.

use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;

use bloomlsm_filter::planning;
use bloomlsm_sstable::{EntryKind, TableBuilder, WritableFile};

use super::TableFiles;
use super::cuts::OutputCuts;
use crate::counters::Counters;
use crate::cursor::EntrySink;
use crate::error::Result;
use crate::filter_budget::{FilterAllowance, table_filter_bytes};
use crate::fs::names;
use crate::options::MIN_FILTER_BITS_PER_KEY;
use crate::version::TableHandle;

/// Bytes buffered before a table's bytes go to its file (RocksDB's
/// `writable_file_max_buffer_size` default): a table is written in a few
/// large writes instead of two per data block. `finish` flushes and fsyncs.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// The builder of the table being written, over its buffered file.
type Builder = TableBuilder<BufWriter<Box<dyn WritableFile>>>;

/// Where the tables of one `TableFiles::write` go, and their filters.
#[derive(Clone, Copy, Debug)]
pub(super) struct OutputSpec {
    pub(super) level: usize,
    pub(super) bits_per_key: f64,
    /// Bounds the filter bytes of all the write's tables together.
    pub(super) allowance: Option<FilterAllowance>,
}

/// The filter bytes a write's finished tables were allowed and took.
/// Invariant: `spent <= allowed` plus what the smallest filters took
/// beyond it: each table's filter fitted (at fewer bits per key if need
/// be) into what its own share and the earlier tables' leftovers make, but
/// never dropped for the allowance: a table that fits no filter there gets
/// the smallest one (at most its own uniform share, since the policy's
/// bits are at least `MIN_FILTER_BITS_PER_KEY`), and the tables after it
/// pay that back out of their shares. A table whose uniform share is
/// already the smallest filter (512 bits, one block) cannot take less at
/// any bits, and its part of a plan below uniform (negative excess) would
/// otherwise leave it, the first of a narrow compaction or a flush of
/// overwrites, without a filter.
#[derive(Clone, Copy, Debug)]
struct FilterSpend {
    allowance: FilterAllowance,
    allowed: f64,
    spent: u64,
}

impl FilterSpend {
    /// Bits per key for a table of `keys` keys asked `bits_per_key`: the
    /// most, at most those, whose filter fits what is left once this
    /// table's share is added, or else fits the smallest filter worth
    /// building (none only when `bits_per_key` asks for none).
    fn admit(&mut self, keys: u64, bits_per_key: f64) -> f64 {
        if bits_per_key < MIN_FILTER_BITS_PER_KEY {
            return 0.0;
        }
        let kind = self.allowance.kind();
        self.allowed += self.allowance.bytes_for(keys);
        let left = (self.allowed - self.spent as f64).max(0.0);
        let bits = planning::fit_bits_per_key(kind, keys, bits_per_key, left);
        if bits >= MIN_FILTER_BITS_PER_KEY {
            return bits;
        }
        let smallest = planning::planned_memory_bytes(kind, keys, MIN_FILTER_BITS_PER_KEY);
        planning::fit_bits_per_key(kind, keys, bits_per_key, smallest as f64)
            .max(MIN_FILTER_BITS_PER_KEY)
    }
}

/// Writes the entries it is given to new tables of one level. Invariant:
/// `last_key` is the user key of the last entry added (when `any`), so a
/// table is cut only where the user key changes and the tables of a sorted
/// level never share a user key.
pub(super) struct TableWriter<'a> {
    files: &'a TableFiles,
    spec: OutputSpec,
    /// Decides, at each new user key, whether the open table ends there.
    cuts: OutputCuts,
    counters: &'a Counters,
    filter_spend: Option<FilterSpend>,
    current: Option<(u64, Builder)>,
    last_key: Vec<u8>,
    any: bool,
    /// Finished tables, opened.
    pub(super) out: Vec<Arc<TableHandle>>,
    /// Every file created, finished or not (removed on failure).
    pub(super) created: Vec<PathBuf>,
}

impl<'a> TableWriter<'a> {
    pub(super) fn new(
        files: &'a TableFiles,
        spec: OutputSpec,
        cuts: OutputCuts,
        counters: &'a Counters,
    ) -> Self {
        Self {
            files,
            spec,
            cuts,
            counters,
            filter_spend: spec.allowance.map(|allowance| FilterSpend {
                allowance,
                allowed: 0.0,
                spent: 0,
            }),
            current: None,
            last_key: Vec::new(),
            any: false,
            out: Vec::new(),
            created: Vec::new(),
        }
    }

    /// Finishes the open table and fsyncs the directory once.
    pub(super) fn finish(&mut self) -> Result<()> {
        if let Some((number, builder)) = self.current.take() {
            self.finish_table(number, builder)?;
        }
        if !self.out.is_empty() {
            self.files.sync_dir()?;
        }
        Ok(())
    }

    /// Finishes one table, its filter fitted into the write's allowance,
    /// and opens it.
    fn finish_table(&mut self, number: u64, mut builder: Builder) -> Result<()> {
        if let Some(spend) = &mut self.filter_spend {
            let bits = spend.admit(builder.distinct_keys(), self.spec.bits_per_key);
            if bits < self.spec.bits_per_key {
                builder.set_filter_bits_per_key(bits);
            }
        }
        let summary = builder.finish()?;
        let handle = self
            .files
            .finish(self.spec.level, number, summary, self.counters)?;
        if let Some(spend) = &mut self.filter_spend {
            spend.spent += table_filter_bytes(&handle);
        }
        self.out.push(handle);
        Ok(())
    }
}

impl EntrySink for TableWriter<'_> {
    fn add(&mut self, user_key: &[u8], seq: u64, kind: EntryKind, value: &[u8]) -> Result<()> {
        let new_key = !self.any || self.last_key != user_key;
        if new_key
            && self.cuts.cut_before(
                user_key,
                self.current
                    .as_ref()
                    .map(|(_, builder)| builder.estimated_file_size()),
            )
            && let Some((number, builder)) = self.current.take()
        {
            self.finish_table(number, builder)?;
        }
        let builder = match &mut self.current {
            Some((_, builder)) => builder,
            None => {
                let number = self.files.new_file_number()?;
                let path = names::table(&self.files.dir, number);
                let file =
                    BufWriter::with_capacity(WRITE_BUFFER_BYTES, self.files.fs.create(&path)?);
                self.created.push(path.clone());
                let options = self.files.table_options(self.spec.bits_per_key);
                let (_, builder) = self
                    .current
                    .insert((number, TableBuilder::new(file, &path, options)));
                builder
            }
        };
        builder.add(user_key, seq, kind, value)?;
        if new_key {
            self.last_key.clear();
            self.last_key.extend_from_slice(user_key);
            self.any = true;
        }
        Ok(())
    }
}
