//! A table's filter, and the retry of a filter read that failed.
//!
//! A table's open reads its filter block. A read that fails (the OS call:
//! `EIO`, a reopen refused under a bound on open files) says nothing about
//! the bytes, so it is not damage: the table is read without its filter
//! (every key "maybe", a data block searched per lookup in its range) only
//! until a later lookup retries the read and it succeeds. Damage (the
//! block's checksum or handle, or a filter that does not decode), found at
//! the open or by a retry, is final: the table goes without its filter for
//! the rest of its life, as before.
//!
//! When a retry runs, counted in lookups that found the filter missing
//! (no clock: nothing here reads the time): the first such lookup retries,
//! and each failed retry doubles the lookups until the next, up to
//! [`MAX_RETRY_INTERVAL`]. So over the first L such lookups at most
//! floor(log2 L) + 1 retries run, and past the cap one per 65,536 lookups,
//! each of which searched a data block for want of the filter: a device
//! that keeps failing sees a few retries, then a vanishing share of the
//! table's reads, never a retry per lookup. A device that heals is retried
//! within as many lookups as the table has seen since its last retry (at
//! most the cap).
//!
//! The lookup that finds a retry due runs it (one read of the filter
//! block) unless another retry is running: every other lookup goes on
//! without the filter and never waits for it.
//!
//! Invariants:
//! - The filter is published whole (`OnceLock`): a lookup sees no filter,
//!   or one that passed its checksum and decoded, never part of one, so a
//!   retry never makes a lookup rule out a key the table holds.
//! - Once loaded, the filter stays for the table's life.
//! - A loaded filter costs a lookup one atomic load (the `OnceLock`'s).
//!   Only a table whose filter read failed has retry state to update.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloomlsm_filter::{AnyFilter, FilterKind};

use super::TableFile;
use crate::filter_status::{FilterLoadError, FilterStatus};
use crate::format::BlockHandle;

/// The most lookups between two retries of a filter read that keeps
/// failing.
pub const MAX_RETRY_INTERVAL: u64 = 1 << 16;

/// The status of every loaded filter.
static LOADED: FilterStatus = FilterStatus::Loaded;

/// A table's filter: loaded, absent, damaged, or awaiting a retry.
#[derive(Debug)]
pub(crate) struct FilterSlot {
    /// The filter, once loaded (at the open or by a retry).
    loaded: OnceLock<AnyFilter>,
    /// Why it is not loaded, if it is not.
    unloaded: Unloaded,
}

#[derive(Debug)]
enum Unloaded {
    /// Nothing to retry: loaded at the open, absent, or damaged.
    Final(FilterStatus),
    /// The open's read failed: lookups retry it.
    Retrying(Box<Retry>),
}

#[derive(Debug)]
struct Retry {
    handle: BlockHandle,
    /// The filter's kind as the table's properties record it.
    kind: Option<FilterKind>,
    /// `Unusable` with the open's failed read.
    at_open: FilterStatus,
    /// `Unusable` with the damage a retry found: no retry after it.
    damaged: OnceLock<FilterStatus>,
    /// Lookups that found the filter not loaded.
    misses: AtomicU64,
    /// The count of `misses` at which the next retry is due.
    due: AtomicU64,
    /// Lookups from the last failed retry to the next (written only by
    /// the lookup holding `closed`).
    interval: AtomicU64,
    /// Retries run.
    retries: AtomicU64,
    /// Whether the latest failed read (the open's, then each retry's) was
    /// the allocator's refusal (`OutOfMemory`) rather than the device's.
    refused_memory: AtomicBool,
    /// Held by the lookup running a retry; kept for good once the filter
    /// is loaded or a retry found it damaged (no retry starts then).
    closed: AtomicBool,
}

impl FilterSlot {
    /// The filter the open read, or why it is missing (`None`: the table
    /// has none). `kind` is the kind the table's properties record.
    pub(crate) fn new(
        loaded: Option<Result<AnyFilter, FilterLoadError>>,
        handle: BlockHandle,
        kind: Option<FilterKind>,
    ) -> Self {
        let slot = OnceLock::new();
        let unloaded = match loaded {
            None => Unloaded::Final(FilterStatus::Absent),
            Some(Ok(filter)) => {
                let _ = slot.set(filter);
                Unloaded::Final(FilterStatus::Loaded)
            }
            Some(Err(why @ FilterLoadError::Read { .. })) => Unloaded::Retrying(Box::new(Retry {
                handle,
                kind,
                refused_memory: AtomicBool::new(refused_memory(&why)),
                at_open: FilterStatus::Unusable(why),
                damaged: OnceLock::new(),
                misses: AtomicU64::new(0),
                due: AtomicU64::new(1),
                interval: AtomicU64::new(1),
                retries: AtomicU64::new(0),
                closed: AtomicBool::new(false),
            })),
            Some(Err(damage)) => Unloaded::Final(FilterStatus::Unusable(damage)),
        };
        Self {
            loaded: slot,
            unloaded,
        }
    }

    /// The filter, if loaded.
    #[inline]
    pub(crate) fn get(&self) -> Option<&AnyFilter> {
        self.loaded.get()
    }

    /// The filter for a lookup: loaded, or loaded now by a retry this
    /// lookup finds due (reading through `file`).
    #[inline]
    pub(crate) fn for_lookup(&self, file: &TableFile) -> Option<&AnyFilter> {
        if let Some(filter) = self.loaded.get() {
            return Some(filter);
        }
        match &self.unloaded {
            Unloaded::Final(_) => None,
            Unloaded::Retrying(retry) => retry.on_miss(&self.loaded, file),
        }
    }

    /// Loaded, absent, or unusable and why: while retries go on, the
    /// open's failed read; once a retry found damage, that.
    pub(crate) fn status(&self) -> &FilterStatus {
        if self.loaded.get().is_some() {
            return &LOADED;
        }
        match &self.unloaded {
            Unloaded::Final(status) => status,
            Unloaded::Retrying(retry) => retry.damaged.get().unwrap_or(&retry.at_open),
        }
    }

    /// The kind of the filter: loaded, or awaiting a retry (as the
    /// properties record it). `None` without one, or damaged.
    pub(crate) fn kind(&self) -> Option<FilterKind> {
        if let Some(filter) = self.loaded.get() {
            return Some(filter.kind());
        }
        self.awaited().and_then(|r| r.kind)
    }

    /// Bytes of memory the filter takes loaded, or will take once a retry
    /// loads it; 0 without one, or damaged.
    pub(crate) fn memory_bytes(&self) -> u64 {
        if let Some(filter) = self.loaded.get() {
            return bloomlsm_filter::Filter::memory_bytes(filter) as u64;
        }
        self.awaited().map_or(0, |r| {
            expected_memory_bytes(r.kind.unwrap_or(FilterKind::Blocked), r.handle.size)
        })
    }

    /// Whether a failed read awaits its retry (not loaded, not found
    /// damaged).
    pub(crate) fn awaits_retry(&self) -> bool {
        self.awaited().is_some()
    }

    /// Whether a failed read awaits its retry and the latest failure was
    /// the allocator's refusal (`OutOfMemory`), not the device's.
    pub(crate) fn read_refused_memory(&self) -> bool {
        self.awaited()
            .is_some_and(|r| r.refused_memory.load(Ordering::Relaxed))
    }

    /// Retries run so far.
    pub(crate) fn retries(&self) -> u64 {
        match &self.unloaded {
            Unloaded::Final(_) => 0,
            Unloaded::Retrying(retry) => retry.retries.load(Ordering::Relaxed),
        }
    }

    /// The retry state while the filter awaits a retry.
    fn awaited(&self) -> Option<&Retry> {
        match &self.unloaded {
            Unloaded::Retrying(retry)
                if self.loaded.get().is_none() && retry.damaged.get().is_none() =>
            {
                Some(retry)
            }
            _ => None,
        }
    }
}

impl Retry {
    /// A lookup found the filter not loaded: retries the read if one is
    /// due and none runs; the filter if it is loaded now.
    #[cold]
    fn on_miss<'a>(
        &self,
        loaded: &'a OnceLock<AnyFilter>,
        file: &TableFile,
    ) -> Option<&'a AnyFilter> {
        let n = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
        if n < self.due.load(Ordering::Relaxed)
            || self
                .closed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        // A retry that ended between this lookup's check and its claim
        // may have loaded it, or moved the next retry on (its stores are
        // seen now, after the claim's acquire).
        if let Some(filter) = loaded.get() {
            return Some(filter);
        }
        if n < self.due.load(Ordering::Relaxed) {
            self.closed.store(false, Ordering::Release);
            return None;
        }
        let read = {
            // A read that unwinds (a bug below it) backs off and leaves the
            // next retry to a later lookup, as a failed read does; held, the
            // claim would end the table's retries for good.
            let unwinding = BackOffOnUnwind { retry: self, n };
            let read = file.load_filter(self.handle);
            std::mem::forget(unwinding);
            read
        };
        self.retries.fetch_add(1, Ordering::Relaxed);
        match read {
            // Stays closed: nothing to retry once loaded.
            Ok(filter) => Some(loaded.get_or_init(|| filter)),
            Err(failed @ FilterLoadError::Read { .. }) => {
                self.refused_memory
                    .store(refused_memory(&failed), Ordering::Relaxed);
                self.back_off(n);
                None
            }
            Err(damage) => {
                // Stays closed: damage is final.
                let _ = self.damaged.set(FilterStatus::Unusable(damage));
                None
            }
        }
    }

    /// After the failed retry of lookup `n`: the next is due twice as many
    /// lookups on (at most `MAX_RETRY_INTERVAL`), and may be claimed.
    fn back_off(&self, n: u64) {
        let interval = (self.interval.load(Ordering::Relaxed) * 2).min(MAX_RETRY_INTERVAL);
        self.interval.store(interval, Ordering::Relaxed);
        self.due.store(n + interval, Ordering::Relaxed);
        self.closed.store(false, Ordering::Release);
    }
}

/// Backs a retry off when dropped, which happens only if its read unwinds
/// (it is forgotten once the read returns).
struct BackOffOnUnwind<'a> {
    retry: &'a Retry,
    n: u64,
}

impl Drop for BackOffOnUnwind<'_> {
    fn drop(&mut self) {
        self.retry.retries.fetch_add(1, Ordering::Relaxed);
        self.retry.back_off(self.n);
    }
}

/// Bytes of memory a filter of `kind` whose encoding is `encoded` bytes
/// takes once decoded (`planning::memory_bytes_of_encoded`: exact for
/// every filter this build writes or reads).
fn expected_memory_bytes(kind: FilterKind, encoded: u64) -> u64 {
    bloomlsm_filter::planning::memory_bytes_of_encoded(kind, encoded)
}

/// Whether a failed filter read is the allocator's refusal.
fn refused_memory(failed: &FilterLoadError) -> bool {
    matches!(failed, FilterLoadError::Read { source, .. }
        if source.kind() == std::io::ErrorKind::OutOfMemory)
}

#[cfg(test)]
mod tests {
    use bloomlsm_filter::{Filter, KeyHash};

    use super::*;

    /// The bytes counted for a filter awaiting its retry are the bytes it
    /// takes once loaded, for every table kind: a retry that loads it
    /// changes no memory budget.
    #[test]
    fn expected_memory_bytes_are_the_loaded_filters() {
        for kind in [
            FilterKind::Standard,
            FilterKind::Blocked,
            FilterKind::Ribbon,
        ] {
            for keys in [0u64, 1, 7, 100, 5000] {
                for bits in [1.0, 6.5, 10.0, 20.0] {
                    let hashes: Vec<KeyHash> =
                        (0..keys).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
                    let Ok(filter) = AnyFilter::build(kind, &hashes, bits) else {
                        continue;
                    };
                    let encoded = filter.to_bytes().len() as u64;
                    assert_eq!(
                        expected_memory_bytes(kind, encoded),
                        filter.memory_bytes() as u64,
                        "{kind:?} {keys} keys at {bits}"
                    );
                }
            }
        }
    }
}
