//! Compactions: pick (a pure function of the tree, `pick.rs`), merge and
//! write (here), install (`install.rs`). Each output table gets a NEW filter
//! built from exactly the keys it holds; nothing is ever removed from a
//! filter. Inputs are deleted only after the manifest that drops them is
//! durable and the last reader holding them lets go (`version.rs`).

mod cleanup;
mod deletion;
mod futile;
mod level_cursor;
mod pick;
mod retain;
mod targets;
mod widen;

#[cfg(test)]
mod aligned_outputs_tests;
#[cfg(test)]
mod cleanup_tests;
#[cfg(test)]
mod deletion_tests;
#[cfg(test)]
mod futile_tests;
#[cfg(test)]
mod given_up_tests;
#[cfg(test)]
mod move_shapes_tests;
#[cfg(test)]
mod moving_readers_tests;
#[cfg(test)]
mod pick_liveness_tests;
#[cfg(test)]
mod pick_tests;
#[cfg(test)]
mod shape_model_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod widen_tests;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_sstable::TableIter;

use crate::counters::Counters;
use crate::cursor::EntryCursor;
use crate::error::Result;
use crate::filter_budget::{PlannedWrite, table_keys};
use crate::inner::DbInner;
use crate::install::VersionEdit;
use crate::merging_cursor::MergingCursor;
use crate::table_files::OutputCuts;
use crate::version::TableHandle;

pub(crate) use futile::{FutileCleanups, FutileEdit};
use level_cursor::LevelCursor;
pub(crate) use pick::Compaction;
use retain::Retain;

impl DbInner {
    /// Runs compactions until no level needs one, the store shuts down, or
    /// writes stop.
    #[cfg(test)]
    pub(crate) fn compact_while_needed(&self) -> Result<()> {
        self.compact_while(|| true)
    }

    /// Runs compactions until no level needs one, the store shuts down,
    /// writes stop, or `go_on()` says no after a compaction.
    pub(crate) fn compact_while(&self, go_on: impl Fn() -> bool) -> Result<()> {
        while self.compact_once()? && go_on() {}
        Ok(())
    }

    /// Runs one compaction if any level needs one; returns whether it did
    /// (`false` too once the store shuts down). Picks under the compaction
    /// lock, so the input set is exactly the tables live when the merge
    /// starts.
    pub(crate) fn compact_once(&self) -> Result<bool> {
        if self.shutting_down() {
            return Ok(false);
        }
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let installs = self.installs.load(Ordering::Acquire);
        let sv = self.current.load_full();
        let picked = {
            let mut pointers = self.compact_pointer.lock();
            let picked = pick::pick(&sv.version.levels, &self.options, &pointers);
            if let Some(c) = &picked
                && let Some(p) = &c.next_pointer
            {
                pointers[c.level] = p.clone();
            }
            picked
        };
        // Only when no level needs a compaction: tombstones over older
        // data go down, then the bottom is cleaned.
        let Some(c) = picked
            .or_else(|| self.pick_deletion_compaction(installs, &sv.version.levels))
            .or_else(|| self.pick_bottom_cleanup(installs, &sv.version.levels))
        else {
            return Ok(false);
        };
        #[cfg(test)]
        self.pick_pause.pause();
        self.merge(&c)?;
        self.stall_cv.notify_all();
        Ok(true)
    }

    /// Merges every table of every level into the deepest level in use.
    pub(crate) fn compact_all(&self) -> Result<()> {
        let _compaction = self.compaction_lock.lock();
        self.check_writable()?;
        let sv = self.current.load_full();
        match pick::pick_all(&sv.version.levels) {
            Some(c) => self.merge(&c),
            None => Ok(()),
        }
    }

    /// The path of one compaction, top to bottom: read the inputs, keep
    /// what readers and snapshots can still see (tombstones dropped only
    /// where no deeper level can hold the key), write new tables with new
    /// filters, install them in place of the inputs (which are deleted when
    /// the last reader holding them lets go).
    /// REQUIRES: the compaction lock is held and every input is live.
    fn merge(&self, c: &Compaction<Arc<TableHandle>>) -> Result<()> {
        if c.trivial_move {
            return self.trivial_move(c);
        }
        let inputs: Vec<Arc<TableHandle>> = c.all_inputs().cloned().collect();
        let mut merged = MergingCursor::new(input_cursors(&inputs));
        // Read after the inputs were chosen: a snapshot registered later has
        // a sequence at or above every entry of the inputs, so the newest
        // version of each key, always kept, is the one it sees.
        let snapshots: Vec<u64> = self.snapshots.lock().keys().copied().collect();
        let oldest_snapshot = snapshots.first().copied();
        let mut retain = Retain::new(snapshots, c.deeper.checker());
        // The inputs' distinct keys bound the outputs' from above.
        let write = PlannedWrite {
            level: c.output_level,
            keys: inputs.iter().map(|t| table_keys(t)).sum(),
            removed: &inputs,
        };
        // Given up once the store shuts down while filters are lowered to
        // make room for it (nothing written yet; it runs after the reopen).
        let Some((plan, claim)) = self.lower_and_plan_filters(write)? else {
            return Ok(());
        };
        for t in &inputs {
            Counters::add(&self.counters.bytes_compacted_read, t.meta.file_size);
            Counters::add(
                &self.counters.levels[t.meta.level].bytes_compacted_read,
                t.meta.file_size,
            );
        }
        #[cfg(test)]
        self.merge_pause.pause();
        let outputs = self.tables.write(
            c.output_level,
            OutputCuts::new(self.options.target_file_bytes, c.grandparents.clone()),
            &plan,
            &self.counters,
            &mut |out| retain.run(&mut merged, out),
        )?;
        let written = match self.claim_written(write, &plan, &outputs) {
            Ok(Some(claim)) => claim,
            // Never offered to an install: deleted. Given up once the
            // store shuts down.
            Ok(None) => {
                discard(&outputs);
                return Ok(());
            }
            Err(e) => {
                discard(&outputs);
                return Err(e);
            }
        };
        // Recorded counts, each bounded only by its table's data bytes (a
        // crafted store's may be near 2^63): summed saturating.
        let entries = |ts: &[Arc<TableHandle>]| {
            ts.iter()
                .fold(0u64, |sum, t| sum.saturating_add(t.meta.entries))
        };
        // A cleanup that dropped nothing (the picker's rule says it cannot
        // happen): its outputs are not cleaned again while the snapshots
        // stay, or it would loop. Recorded by the install itself.
        let futile = c.bottom_cleanup && entries(&outputs) >= entries(&inputs);
        self.install(VersionEdit {
            added: &outputs,
            removed: &inputs,
            flushed: &[],
            futile: FutileEdit {
                written_under: futile.then_some(oldest_snapshot),
                copied: &[],
            },
        })?;
        drop(written);
        drop(claim);
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.levels[c.output_level].writes_into, 1);
        if c.bottom_cleanup {
            Counters::add(&self.counters.bottom_cleanups, 1);
        }
        Ok(())
    }

    /// The deletion-triggered compaction due, if any (`deletion.rs`), for
    /// the tree `levels`; never without `Options::deletion_compaction_ratio`.
    /// `installs`: `self.installs` read before `levels` was taken from the
    /// view (a later install always moves the count past a remembered
    /// fruitless search, as for `pick_bottom_cleanup`).
    fn pick_deletion_compaction(
        &self,
        installs: u64,
        levels: &[Vec<Arc<TableHandle>>],
    ) -> Option<Compaction<Arc<TableHandle>>> {
        let ratio = self.options.deletion_compaction_ratio?;
        if self.no_deletion_pick_at.load(Ordering::Acquire) == installs {
            return None;
        }
        let picked = deletion::pick_deletion_compaction(levels, &self.options, ratio, |t| {
            let p = t.table.properties();
            deletion::Deletions {
                tombstones: p.tombstones,
                entries: p.entries,
            }
        });
        match &picked {
            Some(_) => Counters::add(&self.counters.deletion_compactions, 1),
            None => self.no_deletion_pick_at.store(installs, Ordering::Release),
        }
        picked
    }

    /// The bottommost cleanup due, if any (`cleanup.rs`), for the tree
    /// `levels` and the live snapshots. `installs`: `self.installs` read
    /// before `levels` was taken from the view.
    pub(crate) fn pick_bottom_cleanup(
        &self,
        installs: u64,
        levels: &[Vec<Arc<TableHandle>>],
    ) -> Option<Compaction<Arc<TableHandle>>> {
        let garbage = |t: &Arc<TableHandle>| {
            let p = t.table.properties();
            p.tombstones + p.entries.saturating_sub(p.distinct_keys)
        };
        // Most trees have nothing to clean: find that out without taking
        // the snapshot lock, and once per tree, not per inline write. A
        // tree with no candidate under any snapshot has none until an
        // install changes it; `levels` is at least as new as `installs`
        // says, so a later install always moves the count past the mark.
        if self.no_cleanup_at.load(Ordering::Acquire) == installs {
            return None;
        }
        if cleanup::pick_bottom_cleanup(levels, None, garbage).is_none() {
            self.no_cleanup_at.store(installs, Ordering::Release);
            return None;
        }
        let oldest_snapshot = self.snapshots.lock().keys().next().copied();
        // Candidates held back by a snapshot: the answer changes only with
        // the tree (an install, which also changes `cleanup_futile`) or the
        // oldest snapshot's sequence, so it is searched once per pair.
        let searched = (installs, oldest_snapshot);
        if *self.no_cleanup_under.lock() == Some(searched) {
            return None;
        }
        // Records change only in installs (`futile.rs`): nothing here
        // prunes them against `levels`, which may be older than the
        // newest install.
        let futile = self.cleanup_futile.held_back(oldest_snapshot);
        let picked = cleanup::pick_bottom_cleanup(levels, oldest_snapshot, |t| {
            if futile.contains(&t.meta.number) {
                0
            } else {
                garbage(t)
            }
        });
        if picked.is_none() {
            *self.no_cleanup_under.lock() = Some(searched);
        }
        picked
    }
}

impl DbInner {
    /// Moves the inputs to the output level by a manifest edit: the files
    /// are not read or written. Sound because no output-level table meets
    /// them and they do not meet each other (so the output level stays
    /// sorted and disjoint), and every version moves (tombstones and what
    /// snapshots see included), merely one level deeper, where it still
    /// shadows everything below it.
    /// REQUIRES: the compaction lock is held and every input is live.
    fn trivial_move(&self, c: &Compaction<Arc<TableHandle>>) -> Result<()> {
        let moved: Vec<Arc<TableHandle>> = c
            .inputs
            .iter()
            .map(|t| Arc::new(t.moved_to(c.output_level)))
            .collect();
        self.install_moving(
            VersionEdit {
                added: &moved,
                ..VersionEdit::default()
            },
            &c.inputs,
        )?;
        Counters::add(&self.counters.trivial_moves, 1);
        for t in &c.inputs {
            Counters::add(
                &self.counters.levels[c.output_level].bytes_moved_in,
                t.meta.file_size,
            );
        }
        Ok(())
    }
}

/// One cursor per L0 table (they may overlap) and one per deeper level (its
/// tables are disjoint and sorted, so they are read one after another).
/// REQUIRES: `inputs` grouped by level, each level's tables in key order.
fn input_cursors(inputs: &[Arc<TableHandle>]) -> Vec<Box<dyn EntryCursor>> {
    let mut cursors: Vec<Box<dyn EntryCursor>> = Vec::new();
    let mut i = 0;
    while i < inputs.len() {
        let level = inputs[i].meta.level;
        if level == 0 {
            cursors.push(Box::new(TableIter::new(
                Arc::clone(&inputs[i].table),
                false,
            )));
            i += 1;
            continue;
        }
        let run = inputs[i..]
            .iter()
            .take_while(|t| t.meta.level == level)
            .count();
        cursors.push(Box::new(LevelCursor::new(inputs[i..i + run].to_vec())));
        i += run;
    }
    cursors
}

/// Deletes tables that were written and never offered to an install.
fn discard(tables: &[Arc<TableHandle>]) {
    for t in tables {
        t.mark_obsolete();
    }
}
