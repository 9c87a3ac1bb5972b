//! Flushing frozen memtables to L0 tables, oldest first.

use crate::counters::Counters;
use crate::error::Result;
use crate::filter_budget::PlannedWrite;
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::table_files::OutputCuts;

impl DbInner {
    /// Writes every frozen memtable to an L0 table, oldest first, each
    /// installed with its memtable retired in the same swap. Stops with
    /// `WritesStopped` once writes are stopped.
    pub(crate) fn flush_all_immutable(&self) -> Result<()> {
        let _flush = self.flush_lock.lock();
        loop {
            self.check_writable()?;
            let sv = self.current.load_full();
            let Some(oldest) = sv.imm.last().cloned() else {
                return Ok(());
            };
            // Entries bound the table's distinct keys from above.
            let (plan, claim) = self.plan_filters(PlannedWrite {
                level: 0,
                keys: oldest.len() as u64,
                removed: &[],
            });
            let tables = self.tables.write(
                0,
                OutputCuts::one_table(),
                &plan,
                &self.counters,
                &mut |out| oldest.write_to(out),
            )?;
            self.install(VersionEdit {
                added: &tables,
                flushed: Some(&oldest),
                ..VersionEdit::default()
            })?;
            drop(claim);
            Counters::add(&self.counters.flushes, 1);
            Counters::add(&self.counters.levels[0].writes_into, 1);
            self.stall_cv.notify_all();
        }
    }
}
