//! Flushing frozen memtables to L0 tables, oldest first.

use std::sync::Arc;

use crate::counters::Counters;
use crate::error::Result;
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::options::table_bits_per_key;

impl DbInner {
    /// Writes every frozen memtable to an L0 table, oldest first, each
    /// installed with its memtable retired in the same swap. Stops with
    /// `WritesStopped` once writes are stopped.
    pub(crate) fn flush_all_immutable(&self) -> Result<()> {
        let _flush = self.flush_lock.lock();
        loop {
            self.check_writable()?;
            let sv = Arc::clone(&self.current.read());
            let Some(oldest) = sv.imm.last().cloned() else {
                return Ok(());
            };
            let bits = table_bits_per_key(
                &self.filter_policy.read(),
                &self.options,
                &sv.version.levels,
                0,
            );
            let tables = self
                .tables
                .write(0, u64::MAX, bits, &self.counters, &mut |out| {
                    oldest.write_to(out)
                })?;
            self.install(VersionEdit {
                added: &tables,
                flushed: Some(&oldest),
                ..VersionEdit::default()
            })?;
            Counters::add(&self.counters.flushes, 1);
            self.stall_cv.notify_all();
        }
    }
}
