//! Filter budgets from the tree as it is: how many bits per key a table
//! about to be written gets, and which live table's filter is furthest from
//! its share (for the background rebalancing in `rebalance.rs`).
//!
//! The runs an absent get probes are every L0 table (they overlap) and each
//! non-empty level below (one table per level). Under
//! `FilterPolicy::Optimized { bits_per_key: b }` the optimum spreads
//! b x (keys in the tree) bits over the runs by Monkey for the live sizes,
//! at the slope of the store's filter kind (`planning::fpr_slope`), with
//! every L0 run at least b (an L0 run is not always the smallest: see
//! `optimum`).
//!
//! Invariant (equal memory at every moment): after every install the
//! filter bytes of the live tables are at most what uniform filters at b
//! would take for the same tables (`planned_memory_bytes` of each, in the
//! kind of its filter: a store reopened with another filter kind keeps its
//! tables' old filters until they are rewritten), plus
//! the bytes by which a write's key estimate exceeded the keys it wrote,
//! plus the smallest filters that narrow tables keep where the budget
//! could not pay for them (no table loses its filter to the budget).
//! A write is planned as one filter over all its keys; its tables'
//! filters together stay within what that plan spends
//! ([`FilterAllowance`], kept by the table writer), however many narrow
//! tables it cuts.
//! A write gets the optimum's bits for its run, capped by what the budget
//! has left: uniform's bytes for the tree after the edit, minus the filters
//! of the tables that stay, minus what writes in flight have claimed
//! (`FilterClaims`: what each adds to the tree's excess over uniform, its
//! filters over its own share plus the share its removed tables' filters
//! left unused, which writes planned meanwhile still see as free); but
//! never fewer than the lesser of the optimum's and uniform's bits within
//! that own share less the removed tables' unused share, which adds to no
//! excess: a fresh L0 table, the run every absent get probes first, is
//! never left without a filter because a compaction in flight claimed the
//! headroom.

use std::sync::Arc;

use bloomlsm_filter::{FilterKind, math, planning};
use parking_lot::Mutex;

use crate::options::{FilterPolicy, MIN_FILTER_BITS_PER_KEY};
use crate::version::TableHandle;

/// Bits a rebalancing raise leaves free (one 512-bit block of the blocked
/// kind): a raise is planned in bits per key, and the bytes of its filter
/// round up to whole blocks.
const ROUNDING_BITS: f64 = 512.0;

/// The most a write's filter may take beyond what the budget has left
/// when the budget leaves it none (one 512-bit block): the smallest
/// filter of a narrow write, never a large write's.
const FLOOR_MAX_BYTES: u64 = 64;

/// Distinct keys of a table: what its filter is built from, at most
/// [`MAX_PLANNED_KEYS`].
pub(crate) fn table_keys(t: &TableHandle) -> u64 {
    t.table.properties().distinct_keys.min(MAX_PLANNED_KEYS)
}

/// The most keys the budget counts for one table: 2^36, far past any
/// table a write makes (a terabyte of 16-byte keys). A table's count is
/// bounded only by its data bytes, which a crafted index over a sparse
/// file can put near 2^63; capped, a table's keys and its share (at
/// most 100 bits a key) stay under 2^40, so the budget's and the
/// compactions' sums over up to 2^23 tables fit a u64
/// (`engine/tests/engine_suite/stats_crafted_sparse_counts.rs`).
pub(crate) const MAX_PLANNED_KEYS: u64 = 1 << 36;

/// Distinct keys of every table, level by level, in each level's order.
#[cfg(test)]
pub(crate) fn keys_per_level(levels: &[Vec<Arc<TableHandle>>]) -> Vec<Vec<u64>> {
    levels
        .iter()
        .map(|l| l.iter().map(|t| table_keys(t)).collect())
        .collect()
}

/// Bytes of a table's filter in memory (0 without a usable one). A
/// filter whose read failed and awaits a lookup's retry counts as the
/// bytes it will take once loaded (`Table::filter_memory_bytes`): its
/// table's share is spent, not free for a write to take, and a retry
/// that loads it moves no budget (it cannot take the tree past uniform).
pub(crate) fn table_filter_bytes(t: &TableHandle) -> u64 {
    t.table.filter_memory_bytes()
}

/// The kind of a table's filter, loaded or awaiting a retry of its read
/// (`Table::filter_kind`); `kind`, the store's, without one.
pub(crate) fn table_filter_kind(kind: FilterKind, t: &TableHandle) -> FilterKind {
    t.table.filter_kind().unwrap_or(kind)
}

/// Bytes a uniform filter at `bits_per_key` takes for `keys` keys.
fn uniform_bytes(kind: FilterKind, keys: u64, bits_per_key: f64) -> u64 {
    if keys == 0 || bits_per_key < MIN_FILTER_BITS_PER_KEY {
        return 0;
    }
    planning::planned_memory_bytes(kind, keys, bits_per_key)
}

/// Uniform's bytes at `bits_per_key` for a live table: in the kind of its
/// filter, which a store reopened with another `Options::filter_kind`
/// keeps until the table is rewritten (a store under `Uniform` with the
/// same history holds exactly that filter, or awaits a retry of its read);
/// in `kind`, the kind the store writes, for a table without a filter
/// (absent or damaged).
fn table_uniform_bytes(kind: FilterKind, t: &TableHandle, bits_per_key: f64) -> u64 {
    let own = table_filter_kind(kind, t);
    uniform_bytes(own, table_keys(t), bits_per_key)
}

/// Uniform's bytes at `bits_per_key` for `tables` (each in its own
/// filter's kind, [`table_uniform_bytes`]) and the bytes their filters take.
fn shares_and_filters<'a>(
    kind: FilterKind,
    tables: impl Iterator<Item = &'a TableHandle>,
    bits_per_key: f64,
) -> (u64, u64) {
    tables.fold((0, 0), |(shares, filters), t| {
        (
            shares + table_uniform_bytes(kind, t, bits_per_key),
            filters + table_filter_bytes(t),
        )
    })
}

/// Tables about to be written: their level and an upper bound on their
/// distinct keys (a flush's memtables' distinct keys, the replayed
/// memtable's entries, a compaction's input keys), and
/// the live tables the same edit removes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlannedWrite<'a> {
    pub(crate) level: usize,
    pub(crate) keys: u64,
    pub(crate) removed: &'a [Arc<TableHandle>],
}

/// Bits per key for a write, and the bytes by which its install will raise
/// the tree's excess over uniform, claimed until it is installed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) bits_per_key: f64,
    pub(crate) claim_bytes: u64,
    /// How far the tree, with the writes in flight, ends past uniform's
    /// bytes once this write is installed, as far as its own install
    /// takes it there (at most `claim_bytes`; 0 within uniform).
    pub(crate) past_uniform_bytes: u64,
    /// What the write's tables may spend on filters in all (`Optimized`
    /// only; other policies keep no budget).
    pub(crate) allowance: Option<FilterAllowance>,
}

impl Plan {
    /// Bits per key and nothing claimed or bounded.
    pub(crate) fn unbounded(bits_per_key: f64) -> Self {
        Self {
            bits_per_key,
            claim_bytes: 0,
            past_uniform_bytes: 0,
            allowance: None,
        }
    }
}

/// The filter bytes a write's tables may take, table by table as their
/// keys become known: each its uniform share at the policy's average
/// (what uniform filters take for that table, and what the budget counts
/// for it once installed) plus its keys' part of what the plan spends
/// beyond the write's own uniform share (negative when the plan gives
/// fewer bits than uniform). The plan prices a write as one filter over
/// all its keys, and its claim covers that; without the allowance each of
/// many narrow tables would round its own filter up (whole blocks, and a
/// small Ribbon table sized for a large one's rate), past the claim.
/// Invariant kept by the table writer: the filters of a write's first j
/// tables take at most the sum of `bytes_for` over those j tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FilterAllowance {
    kind: FilterKind,
    uniform_bits: f64,
    excess_bytes_per_key: f64,
}

impl FilterAllowance {
    /// Filter bytes a table of `keys` distinct keys of the write adds to
    /// the allowance.
    pub(crate) fn bytes_for(&self, keys: u64) -> f64 {
        uniform_bytes(self.kind, keys, self.uniform_bits) as f64
            + self.excess_bytes_per_key * keys as f64
    }

    /// The filter kind the write builds.
    pub(crate) fn kind(&self) -> FilterKind {
        self.kind
    }
}

/// One run of the tree: the tables it is made of and its keys.
struct Run<'a> {
    tables: Vec<&'a Arc<TableHandle>>,
    keys: u64,
}

/// The runs of `levels` without `removed`, each with its tables.
fn live_runs<'a>(
    levels: &'a [Vec<Arc<TableHandle>>],
    removed: &[Arc<TableHandle>],
) -> Vec<Run<'a>> {
    let kept = |t: &&Arc<TableHandle>| !removed.iter().any(|r| r.meta.number == t.meta.number);
    let mut runs = Vec::new();
    for (level, tables) in levels.iter().enumerate() {
        let tables: Vec<&Arc<TableHandle>> = tables.iter().filter(kept).collect();
        if level == 0 {
            runs.extend(tables.into_iter().map(|t| Run {
                keys: table_keys(t),
                tables: vec![t],
            }));
        } else if !tables.is_empty() {
            runs.push(Run {
                keys: tables.iter().map(|t| table_keys(t)).sum(),
                tables,
            });
        }
    }
    runs
}

/// Bits per key the optimum leaves unspent on average: filters a little
/// over their target are not rebuilt (`Tolerance::over`), and without
/// this headroom their excess on the large levels would leave nothing to
/// raise the small levels with.
pub(crate) const HEADROOM_BITS: f64 = 0.05;

/// How far off its target a filter may be before it is rebuilt, in bits
/// per key: `over` for filters above it (rebuilt to free memory), `under`
/// for filters below it (rebuilt to cut false positives).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tolerance {
    pub(crate) over: f64,
    pub(crate) under: f64,
}

/// One run of the tree as the optimum sees it.
#[derive(Clone, Copy, Debug)]
struct RunSize {
    keys: u64,
    /// An L0 table: probed by every get that reaches the tables.
    l0: bool,
}

impl RunSize {
    fn of(run: &Run<'_>) -> Self {
        let l0 = run.tables.first().is_some_and(|t| t.meta.level == 0);
        Self { keys: run.keys, l0 }
    }
}

/// Monkey's bits per key for `runs` at average `bits_per_key`, less
/// [`HEADROOM_BITS`], with every L0 run at least `bits_per_key`, and
/// none over [`MAX_BITS_PER_KEY`]: Monkey
/// gives a run the fewer bits the larger it is, and L0 runs are the
/// smallest but where a slow flush took several memtables at once or
/// nothing lies below L0 yet. The runs not floored share their own keys'
/// average by Monkey, so the floor is paid from the headroom, never from
/// them (a level of a few keys under a large L0 keeps its filter), and
/// the targets stay within uniform's bits.
fn optimum(kind: FilterKind, runs: &[RunSize], bits_per_key: f64) -> Vec<f64> {
    let slope = planning::fpr_slope(kind, bits_per_key);
    let average = (bits_per_key - HEADROOM_BITS).max(0.0);
    let mut floored = vec![false; runs.len()];
    // Each round floors at least one more run, so this ends.
    loop {
        let keys: Vec<u64> = runs
            .iter()
            .zip(&floored)
            .map(|(r, &f)| if f { 0 } else { r.keys })
            .collect();
        let mut bits = math::optimized_bits_per_key_at_slope(&keys, average, slope);
        let mut more = false;
        for (i, r) in runs.iter().enumerate() {
            if floored[i] {
                bits[i] = bits_per_key;
            } else if r.l0 && bits[i] < bits_per_key {
                floored[i] = true;
                more = true;
            }
        }
        if !more {
            for b in &mut bits {
                *b = b.min(MAX_BITS_PER_KEY);
            }
            return bits;
        }
    }
}

/// No budget goes past what a policy accepts: Monkey prices a run
/// ln(N / n) / s bits above the largest, so at an average near 100 a
/// one-key run over 20,000 keys was priced at 196 bits per key
/// (`target_range_tests.rs`).
const MAX_BITS_PER_KEY: f64 = crate::options::MAX_FILTER_BITS_PER_KEY;

/// Below the smallest filter worth building: none.
fn floor_to_filter(bits: f64) -> f64 {
    if bits >= MIN_FILTER_BITS_PER_KEY {
        bits
    } else {
        0.0
    }
}

/// Bits per key for the tables of `write` into the tree `levels` under
/// `policy`; `claimed` is what other writes in flight have claimed.
pub(crate) fn plan_write(
    policy: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
    write: PlannedWrite<'_>,
    claimed: u64,
) -> Plan {
    let FilterPolicy::Optimized { bits_per_key } = *policy else {
        return Plan::unbounded(policy.bits_per_key(write.level, &[], &[]));
    };
    let runs = live_runs(levels, write.removed);
    // The tree after the edit: the new tables are an L0 run of their own,
    // or join their level's run.
    let mut sizes: Vec<RunSize> = runs.iter().map(RunSize::of).collect();
    let joined = (write.level > 0)
        .then(|| {
            runs.iter().position(|r| {
                r.tables
                    .first()
                    .is_some_and(|t| t.meta.level == write.level)
            })
        })
        .flatten();
    let new_run = match joined {
        Some(i) => {
            sizes[i].keys += write.keys;
            i
        }
        None => {
            sizes.push(RunSize {
                keys: write.keys,
                l0: write.level == 0,
            });
            sizes.len() - 1
        }
    };
    let target = optimum(kind, &sizes, bits_per_key)[new_run];
    let stays = runs
        .iter()
        .flat_map(|r| r.tables.iter().map(|t| t.as_ref()));
    let (mut budget, spent) = shares_and_filters(kind, stays, bits_per_key);
    let own_share = uniform_bytes(kind, write.keys, bits_per_key);
    budget += own_share;
    // No rounding reserve here: `planned` below is the exact bytes of the
    // plan, and the write's tables keep within it (`FilterAllowance`);
    // a reserve only left a narrow write whose own share is the smallest
    // filter without one.
    let free_bits = budget as f64 * 8.0 - (spent + claimed) as f64 * 8.0;
    let cap = free_bits / write.keys.max(1) as f64;
    let bits = target.min(cap).clamp(0.0, MAX_BITS_PER_KEY);
    // The removed tables' uniform share their filters leave unused: writes
    // planned meanwhile see those tables live and count it as free, so this
    // write spends it only through its claim.
    let removed_unused = write
        .removed
        .iter()
        .map(|t| table_uniform_bytes(kind, t, bits_per_key))
        .sum::<u64>()
        .saturating_sub(write.removed.iter().map(|t| table_filter_bytes(t)).sum());
    // Up to uniform's bits, and within its own share less `removed_unused`,
    // a write raises neither the tree's excess over uniform nor the claims:
    // that much is its own whatever others claimed (a flush, which removes
    // nothing, always gets its whole share).
    let own_bits = planning::fit_bits_per_key(
        kind,
        write.keys,
        target.min(bits_per_key),
        own_share.saturating_sub(removed_unused) as f64,
    );
    let bits = floor_to_filter(
        planning::fit_bits_per_key(kind, write.keys, bits, free_bits / 8.0).max(own_bits),
    );
    // A run the optimum gives a filter never goes without one for the
    // budget: a table without a filter costs a block read per get that
    // reaches it. Only where the budget cannot pay even the smallest
    // filter (a narrow write whose removed tables' filters were far under
    // their share, in a tree without headroom) does this raise the tree's
    // excess, by at most one bit per key of the write and one block.
    // Only a narrow write gets it: at most one block over the budget per
    // write. A large write's smallest filter is bytes the tree does not
    // have (1 bit per key of a 4,000-key write is 3% of a tree at 5 bits
    // per key, `filter_allowance_tests.rs`), so it goes without until a
    // rebuild or compaction finds the budget.
    let bits = if bits == 0.0
        && target >= MIN_FILTER_BITS_PER_KEY
        && planning::planned_memory_bytes(kind, write.keys, MIN_FILTER_BITS_PER_KEY)
            <= FLOOR_MAX_BYTES
    {
        MIN_FILTER_BITS_PER_KEY
    } else {
        bits
    };
    let planned = if bits > 0.0 {
        planning::planned_memory_bytes(kind, write.keys, bits)
    } else {
        0
    };
    // What the install adds to the tree's excess over uniform.
    let claim_bytes = (planned + removed_unused).saturating_sub(own_share);
    // The tree after the install, the writes in flight included: where
    // the removed tables' unused share exceeds the write's own (narrow
    // tables merged into one, whose share is whole blocks fewer, or of a
    // cheaper kind) and the tables that stay were over their share on the
    // strength of it, no plan of this write keeps it within uniform.
    let past_uniform_bytes = (spent + claimed + planned)
        .saturating_sub(budget)
        .min(claim_bytes);
    Plan {
        bits_per_key: bits,
        claim_bytes,
        past_uniform_bytes,
        allowance: Some(FilterAllowance {
            kind,
            uniform_bits: bits_per_key,
            // Below its own share, a write need give back only what its
            // removed tables left unused (its claim is then 0): the rest
            // of its tables' uniform shares is theirs, so a plan below
            // uniform never squeezes a narrow table under its share.
            excess_bytes_per_key: (planned as f64 - own_share as f64).max(-(removed_unused as f64))
                / write.keys.max(1) as f64,
        }),
    }
}

/// The bits per key every live table would get from the optimum for the
/// tree as it is (for `Optimized`; the policy's level bits otherwise).
pub(crate) fn table_targets(
    policy: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
) -> Vec<(Arc<TableHandle>, f64)> {
    let FilterPolicy::Optimized { bits_per_key } = *policy else {
        return levels
            .iter()
            .flatten()
            .map(|t| (Arc::clone(t), policy.bits_per_key(t.meta.level, &[], &[])))
            .collect();
    };
    let runs = live_runs(levels, &[]);
    let sizes: Vec<RunSize> = runs.iter().map(RunSize::of).collect();
    let bits = optimum(kind, &sizes, bits_per_key);
    runs.iter()
        .zip(bits)
        .flat_map(|(r, b)| {
            r.tables
                .iter()
                .map(move |t| (Arc::clone(t), floor_to_filter(b)))
        })
        .collect()
}

/// The bits per key of the live tables `select` picks, each rebuilt in
/// `kind` under `policy` (`Db::rebuild_filters`, the repair of damaged
/// filters), and what installing them adds to the tree's excess over
/// uniform's bytes (to claim until the install; `claimed` is what writes
/// in flight hold). Under `Optimized` each table gets its run's target
/// ([`table_targets`]) as far as the budget pays for it: targets price
/// bits, but filters take whole blocks, so at the targets a tree of
/// narrow tables takes more than uniform's bytes (the small runs' tables
/// above b cross a block boundary, the deep run's under b free nothing:
/// a Blocked tree at uniform went to 1.031 x). The tables are fitted
/// lowest target first, each into what is left once the uniform shares
/// of the tables after it are set aside, so each can at least have the
/// lesser of its target and b within its own share less the share its
/// old filter left unused (as a write's plan never gives less,
/// `plan_write`, whose removed tables' unused share is the same): the
/// ones squeezed are the high targets, which rebalancing raises once the
/// budget frees.
///
/// `live` is the policy writes are planned with meanwhile (the old one
/// during `rebuild_filters`' first pass): under another policy than
/// `Optimized` the tables get its bits, nothing fitted, but while `live`
/// is `Optimized` the install's additions are still claimed, or a flush
/// planned meanwhile spends them too (one beside a rebuild to `Uniform`
/// at the store's b that raised a deep filter: 1.045 x,
/// `rebuild_budget_tests.rs`).
pub(crate) fn rebuild_targets(
    policy: &FilterPolicy,
    live: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
    select: impl Fn(&TableHandle) -> bool,
    claimed: u64,
) -> (Vec<(Arc<TableHandle>, f64)>, u64) {
    let (mut picked, stay): (Vec<_>, Vec<_>) = table_targets(policy, kind, levels)
        .into_iter()
        .partition(|(t, _)| select(t));
    let FilterPolicy::Optimized { bits_per_key } = *policy else {
        let adds = match *live {
            FilterPolicy::Optimized { bits_per_key } => picked
                .iter()
                .map(|(t, bits)| rebuild_adds(kind, t, *bits, bits_per_key))
                .sum(),
            _ => 0,
        };
        return (picked, u64::try_from(adds).unwrap_or(0));
    };
    // A rebuilt table's share moves to `kind`, the kind it is rebuilt in.
    let share_after = |t: &TableHandle| uniform_bytes(kind, table_keys(t), bits_per_key);
    let (stay_shares, stay_filters) =
        shares_and_filters(kind, stay.iter().map(|(t, _)| t.as_ref()), bits_per_key);
    picked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut later_shares: u64 = picked.iter().map(|(t, _)| share_after(t)).sum();
    // Uniform's bytes for the tree after the install, less the filters
    // that stay, the claims, and the filters planned so far.
    let mut free = (stay_shares + later_shares) as f64 - (stay_filters + claimed) as f64;
    let mut adds = 0i64;
    for (t, bits) in &mut picked {
        let keys = table_keys(t);
        let own_share = share_after(t);
        later_shares -= own_share;
        let share_now = table_uniform_bytes(kind, t, bits_per_key);
        // As a write's removed tables (`plan_write`): the share the old
        // filter leaves unused is free to writes planned meanwhile, which
        // may have claimed it (a flush beside a filter far under its
        // share, a damaged filter), so the floor is the table's own only
        // less that: up to there the rebuild adds no excess, whatever
        // was claimed. Before, the floor was the whole share, and a
        // flush's claim on it took the tree to 1.04 x uniform
        // (`rebuild_budget_tests.rs`).
        let unused = share_now.saturating_sub(table_filter_bytes(t));
        let own_bits = planning::fit_bits_per_key(
            kind,
            keys,
            bits.min(bits_per_key),
            own_share.saturating_sub(unused) as f64,
        );
        let fitted = planning::fit_bits_per_key(kind, keys, *bits, free - later_shares as f64);
        let target = *bits;
        *bits = floor_to_filter(fitted.max(own_bits));
        // No narrow table loses its filter to the budget (as `plan_write`):
        // at most one block past it.
        if *bits == 0.0
            && target >= MIN_FILTER_BITS_PER_KEY
            && planning::planned_memory_bytes(kind, keys, MIN_FILTER_BITS_PER_KEY)
                <= FLOOR_MAX_BYTES
        {
            *bits = MIN_FILTER_BITS_PER_KEY;
        }
        free -= rebuilt_bytes(kind, keys, *bits) as f64;
        adds += rebuild_adds(kind, t, *bits, bits_per_key);
    }
    (picked, u64::try_from(adds).unwrap_or(0))
}

/// Bytes of a filter of `kind` at `bits` per key over `keys` keys, as a
/// rebuild builds it (none below the smallest filter).
fn rebuilt_bytes(kind: FilterKind, keys: u64, bits: f64) -> u64 {
    if floor_to_filter(bits) > 0.0 {
        planning::planned_memory_bytes(kind, keys, bits)
    } else {
        0
    }
}

/// What rebuilding `t`'s filter in `kind` at `bits` per key adds to the
/// tree's excess over uniform's bytes at `bits_per_key` (negative when it
/// frees bytes): the new filter less the old, and the move of the table's
/// share into `kind`.
fn rebuild_adds(kind: FilterKind, t: &TableHandle, bits: f64, bits_per_key: f64) -> i64 {
    let planned = rebuilt_bytes(kind, table_keys(t), bits);
    let share_now = table_uniform_bytes(kind, t, bits_per_key);
    let share_after = uniform_bytes(kind, table_keys(t), bits_per_key);
    (planned + share_now) as i64 - (table_filter_bytes(t) + share_after) as i64
}

/// A rebalancing rebuild: the live table, the kind its new filter is
/// built in, and the plan (bits per key and claim).
#[derive(Clone, Debug)]
pub(crate) struct Rebuild {
    pub(crate) table: Arc<TableHandle>,
    pub(crate) kind: FilterKind,
    pub(crate) plan: Plan,
}

/// What a rebalancing pick reads of the tree: each live table's target,
/// and the bits uniform's bytes leave free once the filters and the
/// claims of writes in flight are counted.
struct Rebalancing<'a> {
    kind: FilterKind,
    bits_per_key: f64,
    levels: &'a [Vec<Arc<TableHandle>>],
    targets: Vec<(Arc<TableHandle>, f64)>,
    free_bits: f64,
    /// Bytes by which the filters and the claims exceed uniform's bytes
    /// for the live tables (negative within them; no rounding reserve).
    past_uniform_bytes: f64,
    /// The live tables' distinct keys.
    keys: u64,
}

impl<'a> Rebalancing<'a> {
    fn new(
        policy: &FilterPolicy,
        kind: FilterKind,
        levels: &'a [Vec<Arc<TableHandle>>],
        claimed: u64,
    ) -> Option<Self> {
        let FilterPolicy::Optimized { bits_per_key } = *policy else {
            return None;
        };
        let targets = table_targets(policy, kind, levels);
        let (budget, spent) =
            shares_and_filters(kind, targets.iter().map(|(t, _)| t.as_ref()), bits_per_key);
        let past_uniform_bytes = (spent + claimed) as f64 - budget as f64;
        let free_bits = -past_uniform_bytes * 8.0 - ROUNDING_BITS;
        let keys = targets.iter().map(|(t, _)| table_keys(t)).sum();
        Some(Self {
            kind,
            bits_per_key,
            levels,
            targets,
            free_bits,
            past_uniform_bytes,
            keys,
        })
    }

    /// The live tables with keys, other than those of `spare`, each with
    /// its target.
    fn candidates<'s>(
        &'s self,
        spare: &'s [Arc<TableHandle>],
    ) -> impl Iterator<Item = &'s (Arc<TableHandle>, f64)> {
        self.targets.iter().filter(move |(t, _)| {
            table_keys(t) > 0 && !spare.iter().any(|s| s.meta.number == t.meta.number)
        })
    }

    /// The kind of `t`'s filter; the store's for a table without one.
    fn own_kind(&self, t: &TableHandle) -> FilterKind {
        table_filter_kind(self.kind, t)
    }

    /// Bytes a filter of `kind` at `bits` per key takes for `t`'s keys.
    fn bytes_at(&self, kind: FilterKind, t: &TableHandle, bits: f64) -> u64 {
        uniform_bytes(kind, table_keys(t), bits)
    }

    /// The bits per key a filter was built at (its properties record
    /// them), not its bytes over its keys: a narrow table's filter takes
    /// whole blocks, over 100 bits per key for a few dozen keys at 10, and
    /// compared in those terms it would never be below any target.
    fn actual(t: &TableHandle) -> f64 {
        // A filter awaiting a retry of its read is at its bits: the
        // retry, not a rebuild, brings it back.
        if table_keys(t) == 0 || t.table.filter_kind().is_none() {
            return 0.0;
        }
        t.table.properties().bits_per_key
    }

    /// Rebuilds `t`'s filter at `bits` in `to`. Its uniform share moves
    /// from its old filter's kind to `to` (nothing moves when `to` is
    /// that kind): the claim counts the move, either way.
    fn plan(&self, t: &Arc<TableHandle>, bits: f64, to: FilterKind) -> Rebuild {
        let bits = floor_to_filter(bits);
        let planned = if bits > 0.0 {
            planning::planned_memory_bytes(to, table_keys(t), bits)
        } else {
            0
        };
        let share_now = table_uniform_bytes(self.kind, t, self.bits_per_key);
        let share_after = uniform_bytes(to, table_keys(t), self.bits_per_key);
        // What the install adds to the tree's excess over uniform.
        let claim_bytes = (planned + share_now).saturating_sub(table_filter_bytes(t) + share_after);
        Rebuild {
            table: Arc::clone(t),
            kind: to,
            // One table rebuilt for its exact keys: built as planned.
            plan: Plan {
                bits_per_key: bits,
                claim_bytes,
                past_uniform_bytes: 0,
                allowance: None,
            },
        }
    }

    /// The filter furthest over its target by more than `over` bits per
    /// key (most bits freed first), with its lowering, except the
    /// tables of `spare`. "Over" compares bytes, so a filter rebuilt at
    /// its target (rounded up to whole blocks) is never over again.
    /// A filter is lowered in the store's kind (tables move to the kind
    /// the store writes) when it is over in those terms and the move fits
    /// what is free: lowering a filter of another kind may still raise
    /// the excess, as its share shrinks to the store's kind, possibly by
    /// more than its filter does. Otherwise a filter of another kind over
    /// its target in its own kind is lowered in that kind: its share
    /// stays, so the rebuild only frees bytes and claims none (a narrow
    /// Standard filter at 15 bits in a store reopened as Ribbon at 10 is
    /// smaller than a narrow Ribbon filter at any bits; rebuilt as Ribbon
    /// it would never be lowered). `free_bytes`: what a move may claim.
    fn lowering(&self, over: f64, spare: &[Arc<TableHandle>], free_bytes: f64) -> Option<Rebuild> {
        self.candidates(spare)
            .filter_map(|(t, target)| {
                let filter = table_filter_bytes(t);
                let own = self.own_kind(t);
                let moved = (filter > self.bytes_at(self.kind, t, target + over))
                    .then(|| self.plan(t, *target, self.kind))
                    .filter(|r| r.plan.claim_bytes as f64 <= free_bytes);
                let kept = || {
                    (own != self.kind && filter > self.bytes_at(own, t, target + over))
                        .then(|| self.plan(t, *target, own))
                };
                moved.or_else(kept).map(|r| (r, *target))
            })
            .max_by(|(a, ta), (b, tb)| {
                let freed = |t: &TableHandle, target: f64| {
                    (Self::actual(t) - target) * table_keys(t) as f64
                };
                freed(&a.table, *ta).total_cmp(&freed(&b.table, *tb))
            })
            .map(|(r, _)| r)
    }

    /// The filter above its uniform share whose lowering toward that share
    /// frees the most of `need` bytes, lowered in its own kind (its share
    /// stays: the rebuild only frees bytes) to the most bits whose filter
    /// frees `need` or takes its share, or `None` (none above its share,
    /// or `need` not positive). Targets price bits, not bytes: where
    /// filters cannot go below their share at a target under the
    /// average (a narrow Standard filter takes its 512-bit minimum at any
    /// bits up to 24 per key for 21 keys), the filters at a target above
    /// it can take the tree past uniform with no filter over its target
    /// (narrow Ribbon tables at 14 bits in a tree of Standard ones,
    /// reopened as Ribbon at 10: 1.022 x uniform, settled).
    fn lowering_to_share(&self, need: f64, spare: &[Arc<TableHandle>]) -> Option<Rebuild> {
        if need <= 0.0 {
            return None;
        }
        self.candidates(spare)
            .filter_map(|(t, _)| {
                let keys = table_keys(t);
                let filter = table_filter_bytes(t);
                let own = self.own_kind(t);
                let share = table_uniform_bytes(self.kind, t, self.bits_per_key);
                if filter <= share {
                    return None;
                }
                let bits = planning::fit_bits_per_key(
                    own,
                    keys,
                    Self::actual(t),
                    (filter as f64 - need).max(share as f64),
                );
                // The fit is a bisection to 0.01 bits: where b's bytes end
                // on a block boundary it lands just under b, which an L0
                // table never gets (b's bytes are its share, which fits).
                let bits = if t.meta.level == 0 {
                    bits.max(self.bits_per_key.min(Self::actual(t)))
                } else {
                    bits
                };
                let r = self.plan(t, bits, own);
                let lowered = if r.plan.bits_per_key > 0.0 {
                    planning::planned_memory_bytes(own, keys, r.plan.bits_per_key)
                } else {
                    0
                };
                (lowered < filter).then_some((r, filter - lowered))
            })
            .max_by_key(|(_, freed)| *freed)
            .map(|(r, _)| r)
    }

    /// The filter under its target by more than `under` bits per key whose
    /// run's false positives fall the most when it is raised (in the
    /// store's kind) as far as the free budget allows.
    fn raise(&self, under: f64) -> Option<Rebuild> {
        let kind = self.kind;
        let slope = planning::fpr_slope(kind, self.bits_per_key);
        let run_keys = |t: &TableHandle| -> u64 {
            if t.meta.level == 0 {
                table_keys(t)
            } else {
                self.levels[t.meta.level]
                    .iter()
                    .map(|x| table_keys(x))
                    .sum()
            }
        };
        self.targets
            .iter()
            .filter_map(|(t, target)| {
                let keys = table_keys(t);
                if keys == 0 {
                    return None;
                }
                let now = Self::actual(t);
                // The share moves to `kind` (by this much, either way).
                let share_now = table_uniform_bytes(kind, t, self.bits_per_key);
                let share_after = uniform_bytes(kind, keys, self.bits_per_key);
                // Bytes the raise may take: what is free, and what the
                // table's filter and the move of its share give back.
                let room = |free_bits: f64| {
                    free_bits / 8.0 + table_filter_bytes(t) as f64 + share_after as f64
                        - share_now as f64
                };
                let mut raised = planning::fit_bits_per_key(
                    kind,
                    keys,
                    target.min(now + self.free_bits / keys as f64),
                    room(self.free_bits),
                );
                // L0 tables get at least b, and their floored targets can
                // sum to uniform's bytes exactly (an L0-only tree): their
                // way up to b may take the reserve, whose bytes are counted
                // exactly here (one table, built as planned), and is not
                // left to the fit's bisection (0.01 bits short of a block
                // boundary is under b).
                let floor = target.min(self.bits_per_key);
                if t.meta.level == 0
                    && raised < floor
                    && planning::planned_memory_bytes(kind, keys, floor) as f64
                        <= room(self.free_bits + ROUNDING_BITS)
                {
                    raised = floor;
                }
                let worth = raised >= MIN_FILTER_BITS_PER_KEY
                    && raised > now + under
                    && self.bytes_at(kind, t, raised - under) > table_filter_bytes(t);
                worth.then_some((t, raised, now))
            })
            .max_by(|a, b| {
                // The share of its run's false positives the rebuild removes.
                let gain = |(t, raised, now): &(&Arc<TableHandle>, f64, f64)| {
                    let share = table_keys(t) as f64 / run_keys(t).max(1) as f64;
                    share * ((-slope * now).exp() - (-slope * raised).exp())
                };
                gain(a).total_cmp(&gain(b))
            })
            .map(|(t, raised, _)| self.plan(t, raised, kind))
    }
}

/// The live table whose filter is furthest from its target by more than
/// `tolerance`, with the rebuild that brings it there, or `None`.
/// Filters over their target come first (rebuilding them frees memory),
/// the one freeing the most bytes first, in the store's kind or, where
/// only that keeps the tree within uniform, in their own
/// ([`Rebalancing::lowering`]); then filters under it, raised as far as
/// the budget allows (`claimed` as in [`plan_write`]), the one whose
/// run's false positives fall the most first. Only `Optimized` moves
/// budgets.
pub(crate) fn rebalance_pick(
    policy: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
    claimed: u64,
    tolerance: Tolerance,
) -> Option<Rebuild> {
    let r = Rebalancing::new(policy, kind, levels, claimed)?;
    // The tree past uniform by more than the tolerance allows a filter
    // over its target (the writes in flight included): filters above
    // their share give back all of it.
    let need = if r.past_uniform_bytes > tolerance.over * r.keys as f64 / 8.0 {
        r.past_uniform_bytes
    } else {
        0.0
    };
    r.lowering(tolerance.over, &[], (r.free_bits / 8.0).max(0.0))
        .or_else(|| r.lowering_to_share(need, &[]))
        .or_else(|| r.raise(tolerance.under))
}

/// The live table, other than those of `spare`, whose filter is furthest
/// over its target by more than `over` bits per key, with its lowering
/// (as [`rebalance_pick`] lowers, but only a lowering that claims
/// nothing); else the one above its uniform share whose lowering frees
/// the most of `need` bytes; or `None`. For a write making room for its
/// install: what is free here is the room without that write (its claim
/// is not held while it lowers), so a move of a filter of another kind
/// into the store's kind that claims bytes (its share shrinking by more
/// than its filter) would spend the room being made: three narrow Ribbon
/// tables so moved in a store reopened as Standard each raised the tree's
/// excess by 40 bytes (`filter_allowance_tests.rs`).
pub(crate) fn lowering_pick(
    policy: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
    claimed: u64,
    over: f64,
    need: u64,
    spare: &[Arc<TableHandle>],
) -> Option<Rebuild> {
    let r = Rebalancing::new(policy, kind, levels, claimed)?;
    r.lowering(over, spare, 0.0)
        .or_else(|| r.lowering_to_share(need as f64, spare))
}

/// What installing `added` in place of `removed` adds to the tree's
/// excess over uniform's bytes under `policy`, exactly, from the filters
/// written (negative when it frees bytes; 0 for policies without
/// budgets): the added tables' filters beyond their uniform shares, plus
/// the share the removed tables' filters leave unused.
pub(crate) fn install_excess_bytes(
    policy: &FilterPolicy,
    kind: FilterKind,
    added: &[Arc<TableHandle>],
    removed: &[Arc<TableHandle>],
) -> i64 {
    let FilterPolicy::Optimized { bits_per_key } = *policy else {
        return 0;
    };
    let (added_shares, added_filters) =
        shares_and_filters(kind, added.iter().map(|t| t.as_ref()), bits_per_key);
    let (removed_shares, removed_filters) =
        shares_and_filters(kind, removed.iter().map(|t| t.as_ref()), bits_per_key);
    (added_filters + removed_shares) as i64 - (added_shares + removed_filters) as i64
}

/// Bytes by which the live tables' filters and the claims of the writes
/// in flight exceed uniform's bytes for the live tables (0 within them;
/// 0 for policies without budgets).
pub(crate) fn tree_past_uniform_bytes(
    policy: &FilterPolicy,
    kind: FilterKind,
    levels: &[Vec<Arc<TableHandle>>],
    claimed: u64,
) -> u64 {
    Rebalancing::new(policy, kind, levels, claimed)
        .map_or(0, |r| r.past_uniform_bytes.max(0.0).ceil() as u64)
}

/// Filter bytes by which writes whose tables are not installed yet will
/// raise the tree's excess over uniform (flushes, compactions and
/// rebalancing rebuilds plan concurrently; each must see the others'
/// claims). Lock order: after
/// `write`, before `current`: a plan reads the view while holding it, so a
/// write that installs and then releases its claim is seen either in the
/// view or in the claims, never in neither.
#[derive(Debug, Default)]
pub(crate) struct FilterClaims(Mutex<u64>);

impl FilterClaims {
    /// Plans with the claims of the writes in flight and claims the
    /// plan's bytes until the returned guard drops (after the install).
    /// `plan` may clone the current view and takes no other lock.
    pub(crate) fn plan(&self, plan: impl FnOnce(u64) -> Plan) -> (Plan, ClaimGuard<'_>) {
        let mut claimed = self.0.lock();
        let p = plan(*claimed);
        *claimed += p.claim_bytes;
        (
            p,
            ClaimGuard {
                claims: self,
                bytes: p.claim_bytes,
            },
        )
    }
}

impl FilterClaims {
    /// The bytes the writes in flight hold.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        *self.0.lock()
    }

    /// Claims `bytes` until the returned guard drops.
    pub(crate) fn claim(&self, bytes: u64) -> ClaimGuard<'_> {
        self.plan(|_| Plan {
            claim_bytes: bytes,
            ..Plan::unbounded(0.0)
        })
        .1
    }
}

/// Releases a write's claim when dropped.
#[derive(Debug)]
pub(crate) struct ClaimGuard<'a> {
    claims: &'a FilterClaims,
    bytes: u64,
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        let mut claimed = self.claims.0.lock();
        *claimed = claimed.saturating_sub(self.bytes);
    }
}
