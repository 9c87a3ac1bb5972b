//! A Ribbon filter (Dillinger and Walzer, "Ribbon filter: practically
//! smaller than Bloom and Xor", 2021), in the shape of RocksDB's
//! Standard128Ribbon: 128-bit coefficient bands, on-the-fly Gaussian
//! elimination, interleaved solution storage with a mix of column counts.
//!
//! A static filter: it is solved once from the hashes of all its keys and
//! cannot take more. In exchange it spends about 1.04 to 1.09 x log2(1/eps)
//! bits per key for a false positive rate eps (measured from 200,000 to 10
//! million keys), where a Bloom filter spends 1.44 x log2(1/eps)
//! (cache-blocked ones a little more). Tables are immutable, so every table
//! filter can be one.
//!
//! How it works: each key's hash gives one linear equation over GF(2) in
//! the filter's solution bits (`hasher`): 128 coefficient bits starting at
//! a slot near the key's hash position, equal to 32 result bits. The
//! equations are eliminated into a band (`banding`), solved from the last
//! slot back (`solution`) and stored as 128-bit segments (`layout`). A
//! query recomputes its key's equation and checks it against the stored
//! solution: always true for a key the filter was built with, true with
//! probability 2^-columns for any other key.

#[cfg(target_arch = "x86_64")]
mod backsub_avx2;
#[cfg(target_arch = "x86_64")]
mod backsub_avx512;
mod banding;
mod hasher;
mod layout;
mod order;
#[cfg(test)]
mod path_props;
#[cfg(test)]
mod path_tests;
#[cfg(target_arch = "x86_64")]
mod query_avx2;
mod sizing;
mod solution;
mod storage;

use banding::Banding;
use hasher::{COEFF_BITS, NUM_SEEDS, RibbonHasher, coefficients, result_bits};
use layout::Layout;
pub use layout::MAX_COLUMNS;
use order::{MAX_REGION_BITS, sort_by_block, split_by_region};
pub use sizing::{MAX_RIBBON_ITEMS, RIBBON_FIXED_BYTES, RibbonSizing, RibbonTarget, ribbon_sizing};
use sizing::{blocks_for, layout_for};
use storage::Solution;
pub(crate) use storage::heap_bytes_of_segments;

use crate::codec::{self, RibbonParams};
use crate::error::{FilterError, Result};
use crate::filter_trait::Filter;
use crate::hash::KeyHash;
use crate::kind::FilterKind;

/// Seeds tried at one size before the filter grows. Each seed fails
/// independently, about 1 time in 20 at the sizes of `sizing`.
const SEEDS_PER_SIZE: u32 = 64;
/// Times the slots grow by an eighth when every seed fails (never expected;
/// tested by forcing it).
const GROWTH_ROUNDS: u32 = 8;
/// Most blocks a filter may have (the count is stored as a u32): about
/// 5 x 10^11 keys, far past what its construction memory allows.
const MAX_BLOCKS: u64 = u32::MAX as u64;

/// A static, near-optimal filter built from all its keys' hashes at once.
///
/// ```
/// use bloomlsm_filter::{Filter, KeyHash, RibbonFilter};
/// let hashes: Vec<KeyHash> = (0..1000u32).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
/// let filter = RibbonFilter::from_hashes(&hashes, 7.0);
/// assert!(hashes.iter().all(|&h| filter.contains_hash(h)));
/// assert!(filter.theoretical_fpr() < 0.01); // a Bloom filter needs 9.6 bits per key for 1%
/// let back = RibbonFilter::from_bytes(&filter.to_bytes()).unwrap();
/// assert_eq!(back, filter);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RibbonFilter {
    solution: Solution,
    layout: Layout,
    seed: u32,
    hasher: RibbonHasher,
    items: u64,
}

impl RibbonFilter {
    /// Builds a filter of `hashes` spending `bits_per_key` bits per key
    /// (any fraction; below about 1.05 some keys are always "maybe", at 0
    /// every key is). Never fails: see [`RibbonFilter::build`].
    /// Duplicate hashes are allowed and cost nothing.
    pub fn from_hashes(hashes: &[KeyHash], bits_per_key: f64) -> Self {
        Self::build(hashes, RibbonTarget::BitsPerKey(bits_per_key))
    }

    /// Builds a filter of `hashes` for a target false positive rate.
    pub fn from_hashes_with_fpr(hashes: &[KeyHash], fpr: f64) -> Self {
        Self::build(hashes, RibbonTarget::Fpr(fpr))
    }

    /// Hashes each key once and builds a filter of them.
    pub fn from_keys<I, K>(keys: I, bits_per_key: f64) -> Self
    where
        I: IntoIterator<Item = K>,
        K: AsRef<[u8]>,
    {
        let hashes: Vec<KeyHash> = keys.into_iter().map(|k| KeyHash::of(k.as_ref())).collect();
        Self::from_hashes(&hashes, bits_per_key)
    }

    /// Builds a filter of `hashes` sized for `target` ([`ribbon_sizing`]
    /// says what that costs). Construction cannot fail for the caller: when
    /// a seed's equations contradict each other the next seed is tried (64
    /// per size), then the filter grows by an eighth (8 times); past that,
    /// which is not expected to ever happen, the result is a filter with no
    /// solution bits, which answers "maybe" for every key.
    pub fn build(hashes: &[KeyHash], target: RibbonTarget) -> Self {
        Self::build_limited(hashes, target, SEEDS_PER_SIZE, GROWTH_ROUNDS)
    }

    /// [`RibbonFilter::build`] with explicit retry limits (tests force the
    /// last resort with `seeds_per_size = 0`).
    pub(crate) fn build_limited(
        hashes: &[KeyHash],
        target: RibbonTarget,
        seeds_per_size: u32,
        growth_rounds: u32,
    ) -> Self {
        let items = hashes.len() as u64;
        let mut num_blocks = blocks_for(items);
        if num_blocks == 0 {
            return Self::assemble(Layout::new(0, 0), 0, Solution::default(), 0);
        }
        if num_blocks > MAX_BLOCKS {
            return Self::assemble(Layout::new(2, 0), 0, Solution::default(), items);
        }
        // The first seed follows from the keys, so equal key sets give
        // equal filters and different ones rarely share a seed.
        let first_seed = hashes.first().map_or(0, |h| (h.raw() >> 56) as u32);
        let mut order = Vec::new();
        for _ in 0..=growth_rounds {
            let layout = layout_for(target, items, num_blocks);
            if layout.num_segments() == 0 {
                // Nothing to store: every key is "maybe".
                return Self::assemble(layout, 0, Solution::default(), items);
            }
            let mut band: Option<Banding> = None;
            for attempt in 0..seeds_per_size {
                let seed = (first_seed + attempt) % NUM_SEEDS;
                let band = band.get_or_insert_with(|| Banding::new(layout.num_slots()));
                if attempt > 0 {
                    band.clear();
                }
                if solve(band, hashes, &layout, seed, &mut order) {
                    let solution = solution::back_substitute(band, &layout);
                    return Self::assemble(layout, seed, solution, items);
                }
            }
            let grown = num_blocks + num_blocks.div_ceil(8);
            if grown > MAX_BLOCKS {
                break;
            }
            num_blocks = grown;
        }
        Self::assemble(Layout::new(num_blocks, 0), 0, Solution::default(), items)
    }

    /// The filter of `solution` laid out by `layout`. Panics unless the
    /// solution has the layout's segments: the query reads them unchecked.
    fn assemble(layout: Layout, seed: u32, solution: Solution, items: u64) -> Self {
        assert_eq!(solution.len() as u64, layout.num_segments());
        let num_starts = if layout.num_blocks() == 0 {
            0
        } else {
            layout.num_starts()
        };
        Self {
            solution,
            layout,
            seed,
            hasher: RibbonHasher::new(seed, num_starts),
            items,
        }
    }

    /// The seed the filter was solved with (0..=255).
    pub fn seed(&self) -> u32 {
        self.seed
    }

    /// Unknowns of the linear system (a multiple of 128; 0 for no keys).
    pub fn num_slots(&self) -> u64 {
        self.layout.num_slots()
    }

    /// Mean result bits a key checks: the rate is about 2^-this.
    pub fn mean_columns(&self) -> f64 {
        self.layout.mean_columns()
    }

    /// Serializes the filter (see the `codec` module for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let params = RibbonParams {
            // At most MAX_BLOCKS by construction and by decoding.
            num_blocks: self.layout.num_blocks() as u32,
            seed: self.seed,
        };
        let mut payload = Vec::with_capacity(codec::RIBBON_PARAMS_LEN + self.solution.len() * 16);
        payload.extend_from_slice(&codec::encode_ribbon_params(params));
        self.solution.write_v2(&mut payload);
        codec::encode(
            FilterKind::Ribbon,
            self.layout.upper_columns(),
            self.num_bits(),
            self.items,
            &payload,
        )
    }

    /// Decodes a filter written by [`Self::to_bytes`]. Never panics; any
    /// inconsistency is an error, so a decoded filter never misses a key.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (header, kind, payload) = codec::decode(bytes)?;
        if kind != FilterKind::Ribbon {
            return Err(FilterError::WrongKind {
                expected: FilterKind::Ribbon.name(),
                found: kind.name(),
            });
        }
        let (params, solution) = codec::decode_ribbon_payload(payload)?;
        if params.seed >= NUM_SEEDS {
            return Err(FilterError::InvalidParameters(
                "ribbon seed outside 0..=255",
            ));
        }
        let num_blocks = u64::from(params.num_blocks);
        let num_segments = header.num_bits / COEFF_BITS;
        if num_blocks == 1 {
            return Err(FilterError::InvalidParameters("ribbon filter of one block"));
        }
        if num_blocks == 0 && (num_segments != 0 || header.items != 0) {
            return Err(FilterError::InvalidParameters(
                "ribbon filter of no blocks holds keys",
            ));
        }
        if num_segments > u64::from(MAX_COLUMNS) * num_blocks {
            return Err(FilterError::InvalidParameters(
                "ribbon filter with more than 32 columns",
            ));
        }
        let layout = Layout::new(num_blocks, num_segments);
        if layout.upper_columns() != header.num_hashes {
            return Err(FilterError::InvalidParameters(
                "ribbon k disagrees with its layout",
            ));
        }
        // The codec checked solution.len() == num_segments * 16.
        let v1 = header.version < codec::RIBBON_FORMAT_VERSION;
        let solution = Solution::read(solution, &layout, v1)?;
        Ok(Self::assemble(layout, params.seed, solution, header.items))
    }
}

impl RibbonFilter {
    /// The query, with `tail` checking the tail columns of keys that pass
    /// the head. Out of cache, the fewer instructions a lookup takes, the
    /// more independent lookups the processor overlaps (its reorder window
    /// holds more of them), so [`Filter::contains_hash`] calls a copy
    /// compiled for what the CPU has: AVX2 (`query_avx2`), else popcnt
    /// (not in the x86-64 baseline), else the portable one. The tail gets
    /// only the filter and the hash and works out the rest again (only
    /// keys that pass the head reach it), so the head check keeps nothing
    /// for it but the hash.
    #[inline(always)]
    fn contains_with(&self, hash: KeyHash, tail: impl Fn(&Self, KeyHash) -> bool) -> bool {
        if self.layout.num_blocks() == 0 {
            // Built from no keys.
            return false;
        }
        if !solution::head_matches(&self.solution, &self.layout, &self.span(hash)) {
            return false;
        }
        tail(self, hash)
    }

    /// Where the key of `hash` falls in the solution. REQUIRES: the filter
    /// has blocks.
    #[inline(always)]
    fn span(&self, hash: KeyHash) -> solution::Span {
        let x = self.hasher.seeded(hash);
        solution::Span::new(self.hasher.start(x), coefficients(x), result_bits(x))
    }

    /// Whether the tail columns agree, for a key whose head columns do.
    #[inline(always)]
    fn tail_with(&self, hash: KeyHash) -> bool {
        solution::tail_matches(&self.solution, &self.layout, &self.span(hash))
    }

    /// The portable copy. Out of line on x86-64, so that
    /// [`Filter::contains_hash`] only dispatches (a jump, with no registers
    /// saved for a copy it does not run).
    #[cfg_attr(target_arch = "x86_64", inline(never))]
    fn contains_portable(&self, hash: KeyHash) -> bool {
        self.contains_with(hash, tail_portable)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn contains_popcnt(&self, hash: KeyHash) -> bool {
        // Closures inherit the target features: the call is safe in them.
        self.contains_with(hash, |f, h| tail_popcnt(f, h))
    }
}

/// A query copy: [`Filter::contains_hash`] compiled for some CPU features.
/// Calling one is safe on a CPU that has them.
#[cfg(target_arch = "x86_64")]
type Query = unsafe fn(&RibbonFilter, KeyHash) -> bool;

/// The query copy this CPU runs, chosen once and then one load and a call
/// per query. Invariant: the stored pointer is null or a [`Query`] that
/// `choose_query` picked for this CPU.
#[cfg(target_arch = "x86_64")]
static QUERY: std::sync::atomic::AtomicPtr<()> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn query() -> Query {
    let chosen = QUERY.load(std::sync::atomic::Ordering::Relaxed);
    if chosen.is_null() {
        return choose_query();
    }
    // SAFETY: a non-null pointer in `QUERY` is a `Query` (its invariant),
    // stored as a data pointer of the same size.
    unsafe { std::mem::transmute::<*mut (), Query>(chosen) }
}

#[cfg(target_arch = "x86_64")]
#[cold]
fn choose_query() -> Query {
    let popcnt = std::arch::is_x86_feature_detected!("popcnt");
    let chosen: Query = if popcnt && std::arch::is_x86_feature_detected!("avx2") {
        query_avx2::contains
    } else if popcnt {
        RibbonFilter::contains_popcnt
    } else {
        RibbonFilter::contains_portable
    };
    QUERY.store(chosen as *mut (), std::sync::atomic::Ordering::Relaxed);
    chosen
}

/// [`RibbonFilter::tail_with`] out of line, with popcnt.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
#[target_feature(enable = "popcnt")]
fn tail_popcnt(filter: &RibbonFilter, hash: KeyHash) -> bool {
    filter.tail_with(hash)
}

/// [`RibbonFilter::tail_with`] out of line.
#[inline(never)]
fn tail_portable(filter: &RibbonFilter, hash: KeyHash) -> bool {
    filter.tail_with(hash)
}

/// Bands every key's equation under `seed`. `false` when the equations
/// contradict each other. The order of the keys is only about speed: any
/// order gives the same solution. A band of at most
/// [`UNSORTED_BAND_BYTES`] is banded in the keys' own order (it stays in
/// the core's L2 cache, and sorting costs more than the misses in L1 it
/// saves); one of at most [`REGION_BAND_BYTES`] region by region, each
/// region a few blocks' keys in nearly their own order ([`split_by_region`]: one
/// pass, where the sort by block takes two); a larger one sorted by start
/// block, so the band is walked front to back.
fn solve(
    band: &mut Banding,
    hashes: &[KeyHash],
    layout: &Layout,
    seed: u32,
    order: &mut Vec<u64>,
) -> bool {
    let bytes = layout.num_slots().saturating_mul(Banding::BYTES_PER_SLOT);
    let way = if bytes <= UNSORTED_BAND_BYTES {
        Order::Unsorted
    } else if bytes <= REGION_BAND_BYTES {
        Order::Regions
    } else {
        Order::Blocks
    };
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("bmi1") && std::arch::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has BMI1 and BMI2, checked just above, the only
        // requirement of `solve_bmi2`.
        return unsafe { solve_bmi2(band, hashes, layout, seed, order, way) };
    }
    solve_in_order::<false>(band, hashes, layout, seed, order, way)
}

/// [`solve_in_order`] compiled with BMI1 and BMI2 (`tzcnt`, and shifts by
/// a register other than `cl` that take one micro-op), with each
/// elimination step's double-word shift in the form that suits them
/// ([`banding`]'s `shift_right`). REQUIRES: the CPU has BMI1 and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2")]
fn solve_bmi2(
    band: &mut Banding,
    hashes: &[KeyHash],
    layout: &Layout,
    seed: u32,
    order: &mut Vec<u64>,
    way: Order,
) -> bool {
    solve_in_order::<true>(band, hashes, layout, seed, order, way)
}

/// The orders [`solve`] bands the keys in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// The keys' own.
    Unsorted,
    /// By regions of [`REGION_BLOCKS`] blocks or fewer (half as many at
    /// least: a power of two regions), each in nearly the keys' own order
    /// (four runs of it, [`split_by_region`]; by block if a region
    /// overflows).
    Regions,
    /// Sorted by start block.
    Blocks,
}

/// [`solve`], with the keys in order `way`; `SPLIT_SHIFT` chooses the
/// form of each elimination step's shift (the same band either way).
/// Inlined, so that [`solve_bmi2`] compiles it and what it inlines (the
/// banding loop, `add_all` and `step` are `#[inline(always)]`) with BMI2;
/// anything left out of line still runs correctly, only without it.
#[inline(always)]
fn solve_in_order<const SPLIT_SHIFT: bool>(
    band: &mut Banding,
    hashes: &[KeyHash],
    layout: &Layout,
    seed: u32,
    order: &mut Vec<u64>,
    way: Order,
) -> bool {
    let hasher = RibbonHasher::new(seed, layout.num_starts());
    // Result bits a key never checks need not be solved for: keys starting
    // in the lower blocks check one column fewer.
    let upper = layout.upper_columns();
    let lower_mask = column_mask(upper.saturating_sub(1));
    let upper_mask = column_mask(upper);
    let upper_start = layout.upper_start_block() * COEFF_BITS;
    let equation = |x: u64| {
        let mut eq = hasher.equation(x);
        eq.result &= if eq.start < upper_start {
            lower_mask
        } else {
            upper_mask
        };
        eq
    };
    match way {
        Order::Unsorted => {
            return band.add_all::<false, SPLIT_SHIFT>(hashes.len(), |k| {
                equation(hasher.seeded(hashes[k]))
            });
        }
        Order::Regions => {
            // REGION_BLOCKS blocks a region or fewer (a power of two
            // regions, 2 or more; at most 128 below REGION_BAND_BYTES).
            let regions = layout.num_blocks().div_ceil(REGION_BLOCKS).max(2);
            let bits = regions
                .next_power_of_two()
                .trailing_zeros()
                .min(MAX_REGION_BITS);
            if let Some(regions) = split_by_region(hashes, &hasher, bits, order) {
                return regions.iter().all(|keys| {
                    band.add_all::<false, SPLIT_SHIFT>(keys.len(), |k| equation(keys[k]))
                });
            }
        }
        Order::Blocks => {}
    }
    sort_by_block(hashes, &hasher, layout.num_blocks(), order);
    band.add_all::<true, SPLIT_SHIFT>(order.len(), |k| equation(order[k]))
}

/// The largest band [`solve`] bands without sorting the keys: 512 KiB,
/// about 26,000 keys. Measured (user CPU time of repeated builds, the two
/// orders in alternation, AMD EPYC with a 1 MiB L2 per core): unsorted 7%
/// faster at 10,000 keys (band 200 KiB), 12% at 20,000 and 15% at
/// 25,000, 17% at 30,000 (620 KiB), 3% at 35,000, the same at 40,000
/// (830 KiB), 5% slower at 50,000 and 6% at 60,000 (1.2 MiB). Kept below
/// the crossing, as processors with a 512 KiB L2 cross sooner.
const UNSORTED_BAND_BYTES: u64 = 512 << 10;

/// The largest band [`solve`] bands region by region: 2.5 MiB, about
/// 120,000 keys. Measured as for [`UNSORTED_BAND_BYTES`], against the
/// sort by block: 4% less CPU time at 60,000 keys and 3% at 100,000
/// (5% and 6% fewer instructions), the same at 200,000, 15% to 25% more at
/// a million (the band out of L2, where the sort's prefetches pay).
const REGION_BAND_BYTES: u64 = 5 << 19;

/// Blocks a region has at most, in [`Order::Regions`] (8: 64 regions at
/// 60,000 keys, 128 at 100,000; 32 and 256 regions were no faster).
const REGION_BLOCKS: u64 = 8;

/// The lowest `columns` bits set.
const fn column_mask(columns: u32) -> u32 {
    if columns >= 32 {
        u32::MAX
    } else {
        (1u32 << columns) - 1
    }
}

impl Filter for RibbonFilter {
    #[inline]
    fn contains_hash(&self, hash: KeyHash) -> bool {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `query` returns the copy chosen for this CPU's features.
        return unsafe { query()(self, hash) };
        #[cfg(not(target_arch = "x86_64"))]
        self.contains_portable(hash)
    }

    fn num_bits(&self) -> u64 {
        self.layout.num_segments() * COEFF_BITS
    }

    fn num_hashes(&self) -> u32 {
        self.layout.upper_columns()
    }

    fn len(&self) -> u64 {
        self.items
    }

    fn fill_ratio(&self) -> f64 {
        if self.solution.len() == 0 {
            return 0.0;
        }
        self.solution.count_ones() as f64 / self.num_bits() as f64
    }

    fn theoretical_fpr(&self) -> f64 {
        if self.items == 0 {
            return 0.0;
        }
        self.layout.expected_fpr()
    }

    fn memory_bytes(&self) -> usize {
        self.solution.memory_bytes()
    }

    /// A Ribbon filter's rate does not follow from its fill (each result
    /// bit is a parity an absent key matches with probability 1/2, however
    /// many solution bits are set): this is [`Filter::theoretical_fpr`].
    fn estimated_fpr(&self) -> f64 {
        self.theoretical_fpr()
    }

    /// The stored key count (a solution's fill says nothing about it).
    fn estimated_items(&self) -> f64 {
        self.items as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(n: u32, tag: u8) -> Vec<KeyHash> {
        (0..n)
            .map(|i| {
                let mut k = [tag; 5];
                k[1..].copy_from_slice(&i.to_le_bytes());
                KeyHash::of(&k)
            })
            .collect()
    }

    #[test]
    fn holds_its_keys_at_any_size_and_budget() {
        for n in [1u32, 2, 100, 255, 256, 1000, 20_000] {
            for bpk in [0.5, 1.0, 3.3, 7.0, 9.9, 16.0, 40.0] {
                let keys = hashes(n, b'k');
                let f = RibbonFilter::from_hashes(&keys, bpk);
                assert!(keys.iter().all(|&h| f.contains_hash(h)), "n={n} bpk={bpk}");
                assert_eq!(f.len(), u64::from(n));
            }
        }
    }

    /// Banded sorted by block, in the keys' order or region by region,
    /// the same outcome and, when solved, the same solution (so the same
    /// filter bytes), at sizes on either side of where `solve` switches,
    /// with duplicate keys, and on a band too small to solve.
    #[test]
    fn sorted_and_unsorted_banding_agree() {
        let mut order = Vec::new();
        let (mut solved, mut failed) = (0, 0);
        for (n, tag) in [
            (300u32, b'a'),
            (9_000, b'b'),
            (26_000, b'c'),
            (40_000, b'd'),
        ] {
            let mut keys = hashes(n, tag);
            keys.extend_from_within(..(n / 7) as usize);
            for blocks in [blocks_for(u64::from(n)), u64::from(n) / 128 - 1] {
                let layout = layout_for(RibbonTarget::BitsPerKey(9.5), u64::from(n), blocks);
                for seed in 0..3 {
                    let ways = [Order::Blocks, Order::Unsorted, Order::Regions];
                    let bands = [false, true].map(|split_shift| {
                        ways.map(|way| {
                            let mut band = Banding::new(layout.num_slots());
                            let (keys, order) = (&keys, &mut order);
                            let ok = if split_shift {
                                solve_in_order::<true>(&mut band, keys, &layout, seed, order, way)
                            } else {
                                solve_in_order::<false>(&mut band, keys, &layout, seed, order, way)
                            };
                            (ok, band)
                        })
                    });
                    let bands = bands.as_flattened();
                    let what = format!("{n} keys, {blocks} blocks, seed {seed}");
                    assert!(bands.iter().all(|b| b.0 == bands[0].0), "{what}");
                    if !bands[0].0 {
                        failed += 1;
                        continue;
                    }
                    solved += 1;
                    let want = solution::back_substitute(&bands[0].1, &layout);
                    for (_, band) in &bands[1..] {
                        assert_eq!(solution::back_substitute(band, &layout), want, "{what}");
                    }
                }
            }
        }
        assert!(
            solved >= 10 && failed >= 10,
            "{solved} solved, {failed} failed"
        );
        // One key many times: a region overflows, and the keys are sorted
        // by block instead; every copy after the first is redundant.
        let same = vec![KeyHash::of(b"x"); 20_000];
        let layout = layout_for(RibbonTarget::BitsPerKey(9.5), 20_000, blocks_for(20_000));
        for way in [Order::Blocks, Order::Unsorted, Order::Regions] {
            let mut band = Banding::new(layout.num_slots());
            assert!(solve_in_order::<false>(
                &mut band, &same, &layout, 0, &mut order, way
            ));
            assert_eq!(band.occupied(), 1, "{way:?}");
            let mut split = Banding::new(layout.num_slots());
            assert!(solve_in_order::<true>(
                &mut split, &same, &layout, 0, &mut order, way
            ));
            assert_eq!(split.occupied(), 1, "{way:?}, split shift");
        }
    }

    /// The filter bytes `main` builds: `build_limited`'s seeds at the
    /// first size, every key sorted by block (the only order before the
    /// unsorted and region orders). `None` if no seed of the first size
    /// solves.
    fn bytes_sorted_by_block(hashes: &[KeyHash], target: RibbonTarget) -> Option<Vec<u8>> {
        let items = hashes.len() as u64;
        let layout = layout_for(target, items, blocks_for(items));
        let first_seed = hashes.first().map_or(0, |h| (h.raw() >> 56) as u32);
        let mut order = Vec::new();
        (0..SEEDS_PER_SIZE).find_map(|attempt| {
            let seed = (first_seed + attempt) % NUM_SEEDS;
            let mut band = Banding::new(layout.num_slots());
            solve_in_order::<false>(&mut band, hashes, &layout, seed, &mut order, Order::Blocks)
                .then(|| {
                    let solution = solution::back_substitute(&band, &layout);
                    RibbonFilter::assemble(layout, seed, solution, items).to_bytes()
                })
        })
    }

    /// At the block counts on either side of both of `solve`'s thresholds
    /// (the band exactly 512 KiB or one block more, exactly 2.5 MiB or one
    /// block more), with fractional budgets of 1 to 30 bits, with
    /// duplicates, with one key many times: `build` writes the bytes the
    /// sort by block gives, and holds every key.
    #[test]
    fn build_bytes_equal_sorted_build_at_the_thresholds() {
        let slot_bytes = Banding::BYTES_PER_SLOT * COEFF_BITS;
        let at_unsorted = UNSORTED_BAND_BYTES / slot_bytes;
        let at_regions = REGION_BAND_BYTES / slot_bytes;
        assert_eq!(at_unsorted * slot_bytes, UNSORTED_BAND_BYTES - 2048);
        assert_eq!(at_regions * slot_bytes, REGION_BAND_BYTES);
        for (blocks, bpk, tag) in [
            (at_unsorted, 1.0, b'p'),
            (at_unsorted + 1, 29.7, b'q'),
            (at_regions, 9.5, b'r'),
            (at_regions + 1, 3.3, b's'),
        ] {
            // The fewest keys sized to `blocks` blocks.
            let (mut lo, mut hi) = (1u64, 1 << 20);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if blocks_for(mid) >= blocks {
                    hi = mid
                } else {
                    lo = mid + 1
                }
            }
            assert_eq!(blocks_for(lo), blocks);
            let n = u32::try_from(lo).unwrap();
            let distinct = hashes(n, tag);
            let mut dups = hashes(n - n / 7, tag);
            dups.extend_from_within(..(n / 7) as usize);
            let same = vec![KeyHash::of(&[tag]); n as usize];
            for keys in [distinct, dups, same] {
                let target = RibbonTarget::BitsPerKey(bpk);
                let f = RibbonFilter::build(&keys, target);
                assert_eq!(f.num_slots(), blocks * COEFF_BITS, "{blocks} blocks");
                assert!(keys.iter().all(|&h| f.contains_hash(h)), "{blocks} blocks");
                let want = bytes_sorted_by_block(&keys, target).expect("a seed solves");
                assert!(f.to_bytes() == want, "{blocks} blocks, {bpk} bits a key");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(24))]
        /// Any key count from none to past the region order's band, any
        /// budget of 1 to 30 bits a key, some keys repeated: the bytes the
        /// sort by block gives.
        #[test]
        fn build_bytes_equal_sorted_build(
            n in 0u32..140_000,
            bpk in 1.0f64..30.0,
            repeated in 0u32..8,
            tag in 0u8..255,
        ) {
            let mut keys = hashes(n - n * repeated / 8, tag);
            let copies = (n * repeated / 8) as usize;
            for i in 0..copies {
                keys.push(keys[i % keys.len().max(1)]);
            }
            let target = RibbonTarget::BitsPerKey(bpk);
            let f = RibbonFilter::build(&keys, target);
            proptest::prop_assert!(keys.iter().all(|&h| f.contains_hash(h)));
            if n > 0 {
                let want = bytes_sorted_by_block(&keys, target);
                proptest::prop_assert!(want.is_some_and(|w| w == f.to_bytes()));
            }
        }
    }

    #[test]
    fn no_keys_answers_absent_and_no_bits_answers_maybe() {
        let empty = RibbonFilter::from_hashes(&[], 10.0);
        assert!(!empty.contains(b"x"));
        assert_eq!((empty.num_bits(), empty.theoretical_fpr()), (0, 0.0));
        let none = RibbonFilter::from_hashes(&hashes(50, b'k'), 0.0);
        assert!(none.contains(b"x"));
        assert_eq!(none.theoretical_fpr(), 1.0);
    }

    #[test]
    fn last_resort_is_a_filter_that_says_maybe() {
        let keys = hashes(500, b'k');
        let f = RibbonFilter::build_limited(&keys, RibbonTarget::BitsPerKey(10.0), 0, 2);
        assert_eq!(f.num_bits(), 0);
        assert!(keys.iter().all(|&h| f.contains_hash(h)));
        assert!(f.contains(b"never added"));
        assert_eq!(RibbonFilter::from_bytes(&f.to_bytes()).unwrap(), f);
    }

    #[test]
    fn duplicates_cost_nothing() {
        let mut keys = hashes(3000, b'k');
        keys.extend_from_within(..1000);
        let f = RibbonFilter::from_hashes(&keys, 8.0);
        assert!(keys.iter().all(|&h| f.contains_hash(h)));
    }

    /// `f`'s bytes as format version 1 wrote them: each block's columns
    /// together.
    fn v1_bytes(f: &RibbonFilter) -> Vec<u8> {
        let v2 = f.to_bytes();
        let at = codec::HEADER_LEN + codec::RIBBON_PARAMS_LEN;
        let mut v1 = v2[..at].to_vec();
        v1[4..6].copy_from_slice(&1u16.to_le_bytes());
        for block in 0..f.layout.num_blocks() {
            assert_eq!(
                (v1.len() - at) as u64,
                16 * f.layout.v1_first_segment(block)
            );
            for column in 0..f.layout.columns_of_block(block) {
                let s = at + 16 * f.layout.segment(block, column) as usize;
                v1.extend_from_slice(&v2[s..s + 16]);
            }
        }
        let crc = crc32fast::hash(&v1);
        v1.extend_from_slice(&crc.to_le_bytes());
        v1
    }

    #[test]
    fn version_1_order_reads_as_the_same_filter() {
        for bpk in [1.5, 2.0, 5.5, 7.0, 9.9, 13.3, 40.0] {
            let keys = hashes(3000, b'k');
            let f = RibbonFilter::from_hashes(&keys, bpk);
            let old = v1_bytes(&f);
            assert_ne!(old, f.to_bytes());
            let back = RibbonFilter::from_bytes(&old).unwrap();
            assert_eq!(back, f, "{bpk}");
            assert!(keys.iter().all(|&h| back.contains_hash(h)));
        }
    }

    /// Every query path this CPU runs gives the portable path's answer, on
    /// filters of heads of 0 to 4 columns with and without tails (of 1 to
    /// 28 columns, every remainder by 4), both column counts, and for
    /// present and absent keys.
    #[test]
    fn query_paths_agree_with_the_portable_one() {
        #[cfg(target_arch = "x86_64")]
        let popcnt = std::arch::is_x86_feature_detected!("popcnt");
        #[cfg(target_arch = "x86_64")]
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        #[cfg(target_arch = "x86_64")]
        if !avx2 {
            println!("no AVX2 on this CPU: its query not compared");
        }
        let probes = hashes(20_000, b'q');
        for bpk in [
            0.7, 1.5, 2.5, 3.3, 4.2, 5.5, 7.0, 8.5, 9.9, 11.5, 13.3, 15.2, 17.5, 20.5, 27.0, 40.0,
        ] {
            let keys = hashes(3000, b'k');
            let f = RibbonFilter::from_hashes(&keys, bpk);
            for &h in keys.iter().chain(&probes) {
                let portable = f.contains_portable(h);
                assert_eq!(f.contains_hash(h), portable, "{bpk}");
                #[cfg(target_arch = "x86_64")]
                if popcnt {
                    // SAFETY: the CPU has popcnt, checked above.
                    assert_eq!(unsafe { f.contains_popcnt(h) }, portable, "{bpk}");
                }
                #[cfg(target_arch = "x86_64")]
                if popcnt && avx2 {
                    // SAFETY: the CPU has AVX2 and popcnt, checked above.
                    assert_eq!(unsafe { query_avx2::contains(&f, h) }, portable, "{bpk}");
                }
            }
        }
    }

    #[test]
    fn rate_matches_layout() {
        let keys = hashes(50_000, b'k');
        let f = RibbonFilter::from_hashes(&keys, 7.5);
        let probes = hashes(200_000, b'a');
        let fp = probes.iter().filter(|&&h| f.contains_hash(h)).count() as f64;
        let expected = f.theoretical_fpr() * probes.len() as f64;
        let sigma = expected.sqrt();
        assert!(
            (fp - expected).abs() < 5.0 * sigma + 0.02 * expected,
            "{fp} vs {expected}"
        );
    }
}
