//! Flushing frozen memtables to L0 tables: every frozen memtable waiting
//! when a flush starts goes into one table (RocksDB's flush job, which
//! picks every memtable ready to flush and writes one L0 file).
//!
//! A flush that falls behind the writes then makes one L0 table, not one
//! per memtable: an absent get probes one run, not several; L0 reaches its
//! compaction trigger with more bytes, so each L0 compaction moves more
//! down for the base level it rewrites; and one manifest install retires
//! them all. The versions written are the same either way (every version
//! of every memtable is kept, as separate tables would keep them), and the
//! table sits where its memtables' tables would have: newer than every L0
//! table, older than every memtable left.

use std::sync::Arc;

use crate::counters::Counters;
use crate::error::Result;
use crate::filter_budget::PlannedWrite;
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::memtable::MemTable;
use crate::table_files::OutputCuts;

impl DbInner {
    /// Writes the frozen memtables to L0, each time all of those waiting
    /// into one table, installed with those memtables retired in the same
    /// swap, until none is left. Stops with `WritesStopped` once writes are
    /// stopped.
    pub(crate) fn flush_all_immutable(&self) -> Result<()> {
        self.flush_immutable_while(|| true)
    }

    /// Writes every memtable frozen when its flush begins (all of them
    /// into one table) and returns: memtables frozen meanwhile are left
    /// to the next flush, so writers that go on freezing them cannot keep
    /// the caller waiting (`Db::flush` and the inline work after a write;
    /// `flush_tests::a_flush_returns_while_writers_keep_freezing_memtables`).
    pub(crate) fn flush_frozen_now(&self) -> Result<()> {
        self.flush_immutable_while(|| false)
    }

    /// As [`Self::flush_all_immutable`], but after each flush goes on only
    /// while `go_on()` says so: the first flush takes every frozen memtable
    /// waiting when it starts, and writers freezing more meanwhile cannot
    /// keep the loop going (`settle_background_work`).
    pub(crate) fn flush_immutable_while(&self, go_on: impl Fn() -> bool) -> Result<()> {
        let mut flush = self.flush_lock.lock();
        loop {
            // Between rounds the lock goes to a thread waiting for it (a
            // filter rebuild waits for the flushes in flight before it
            // plans, holding the compaction lock): while writers keep
            // freezing memtables this loop would otherwise hold it round
            // after round, and compactions would wait until L0 stopped
            // writes. Each round reads the tree afresh.
            parking_lot::MutexGuard::bump(&mut flush);
            self.check_writable()?;
            let sv = self.current.load_full();
            // Newest first; a rotation meanwhile only adds newer ones,
            // which the next turn of the loop takes.
            let frozen: Vec<Arc<MemTable>> = sv.imm.clone();
            if frozen.is_empty() {
                return Ok(());
            }
            #[cfg(test)]
            self.flush_pause.pause();
            let mems: Vec<&MemTable> = frozen.iter().map(|m| m.as_ref()).collect();
            // The table's distinct keys, counted in memory: the memtables'
            // entries would count a key overwritten in several of them once
            // per memtable, and plan the filter for a larger run than it is.
            let (plan, claim) = self.plan_filters(PlannedWrite {
                level: 0,
                keys: MemTable::merged_distinct_keys(&mems),
                removed: &[],
            });
            let tables = self.tables.write(
                0,
                OutputCuts::one_table(),
                &plan,
                &self.counters,
                &mut |out| MemTable::write_merged_to(&mems, out),
            )?;
            self.install(VersionEdit {
                added: &tables,
                flushed: &frozen,
                ..VersionEdit::default()
            })?;
            drop(claim);
            Counters::add(&self.counters.flushes, 1);
            Counters::add(&self.counters.levels[0].writes_into, 1);
            self.stall_cv.notify_all();
            if !go_on() {
                return Ok(());
            }
        }
    }
}
