//! The order keys are banded in: grouped by start block, so that banding
//! walks the band front to back and finds the rows it reads in cache. Any
//! order gives the same solution (the solution with every free slot 0 is
//! unique), so this is only about speed.

use super::hasher::{COEFF_BITS, RibbonHasher};
use crate::hash::KeyHash;

/// Fills `order` with the seeded hashes of `hashes` grouped by start block
/// in increasing order (a counting sort: the start grows with the seeded
/// hash, so this is also sorted order up to the slots within a block).
/// Within a block the keys keep their order in `hashes` (stable).
pub(super) fn sort_by_block(
    hashes: &[KeyHash],
    hasher: &RibbonHasher,
    num_blocks: u64,
    order: &mut Vec<u64>,
) {
    // Positions as `u32` when they fit: half the counters' cache lines
    // (one counter per block is read and written for every key, at random).
    if u32::try_from(hashes.len()).is_ok() {
        scatter::<u32>(hashes, hasher, num_blocks, order);
    } else {
        scatter::<usize>(hashes, hasher, num_blocks, order);
    }
}

/// The most region bits [`split_by_region`] takes: 65,536 regions, far
/// more than a band of the size banded by regions has blocks.
pub(super) const MAX_REGION_BITS: u32 = 16;

/// The seeded hashes of `hashes` split into `1 << region_bits` regions by
/// their top `region_bits` bits (so by start: the start grows with the
/// seeded hash). One pass over the keys, into [`LANES`] rooms a region, a
/// key's room chosen by its position in `hashes` (the position mod
/// `LANES`; the last `len % LANES` keys go to the first room), each room
/// of a fixed capacity (the mean plus eight standard deviations and 64);
/// then each region's rooms are moved together. A region holds its keys
/// room by room, each room in the keys' order (any order gives the same
/// solution). `None` if a room overflows (not expected for random keys;
/// many duplicates, or keys chosen to land in one region, can), and the
/// caller sorts another way.
/// REQUIRES: `1 <= region_bits <= MAX_REGION_BITS`.
pub(super) fn split_by_region<'a>(
    hashes: &[KeyHash],
    hasher: &RibbonHasher,
    region_bits: u32,
    order: &'a mut Vec<u64>,
) -> Option<Regions<'a>> {
    assert!((1..=MAX_REGION_BITS).contains(&region_bits));
    let rooms = LANES << region_bits;
    let mean = hashes.len() / rooms + 1;
    let capacity = mean + 8 * (mean as f64).sqrt() as usize + 64;
    // Written below, a prefix of each room: not zeroed first.
    order.clear();
    order.reserve_exact(rooms * capacity);
    let slots = &mut order.spare_capacity_mut()[..rooms * capacity];
    // Room `i` (of region `i / LANES`) is `i * capacity..ends[i]`.
    let mut ends: Vec<usize> = (0..rooms).map(|i| i * capacity).collect();
    let shift = 64 - region_bits;
    // A room's end is not checked key by key: one that overflows runs on
    // into the next room (or past the last, which ends the split), and
    // is found after the loop.
    let mut place = |h: KeyHash, lane: usize| {
        let x = hasher.seeded(h);
        // `< rooms`: the top `region_bits` bits of `x`, times `LANES`,
        // plus `lane < LANES`.
        let i = (x >> shift) as usize * LANES + lane;
        let at = ends[i];
        slots.get_mut(at)?.write(x);
        ends[i] = at + 1;
        Some(())
    };
    let (groups, rest) = hashes.as_chunks::<LANES>();
    for group in groups {
        for (lane, &h) in group.iter().enumerate() {
            place(h, lane)?;
        }
    }
    for &h in rest {
        place(h, 0)?;
    }
    // If no room overflowed, every key went to its own room, in order
    // (the rooms are disjoint); if one did, its keys ran on into the next
    // room.
    if ends
        .iter()
        .enumerate()
        .any(|(i, &end)| end > (i + 1) * capacity)
    {
        return None;
    }
    // Each region's rooms moved down to follow its first (in cache: the
    // rooms were just written).
    let region_ends = ends
        .chunks_exact(LANES)
        .enumerate()
        .map(|(region, room_ends)| {
            let mut to = room_ends[0];
            for (lane, &end) in room_ends.iter().enumerate().skip(1) {
                let from = (region * LANES + lane) * capacity;
                slots.copy_within(from..end, to);
                to += end - from;
            }
            to
        })
        .collect();
    Some(Regions {
        slots,
        capacity: LANES * capacity,
        ends: region_ends,
    })
}

/// Rooms a region's keys are split into by [`split_by_region`], by their
/// positions. Each key reads its room's end and writes it back. With one
/// room a region the split took about 9 cycles a key (3 ns at 60,000
/// keys, thread CPU time) for about 17 instructions, most of its samples
/// on the store; with four, a room's end comes back four keys later at
/// the soonest, and the split takes 0% to 9% less time at 60,000 keys (64
/// regions) and 23% to 27% less at 100,000 (128), the two alternating in
/// one process, five runs each.
pub(super) const LANES: usize = 4;

/// The order [`split_by_region`] gives a region's keys, of `keys` all in
/// it: room by room (by position mod [`LANES`], the last `len % LANES`
/// keys in the first), each room in the keys' order.
#[cfg(test)]
pub(super) fn room_order<T: Copy>(keys: &[T]) -> Vec<T> {
    let whole = keys.len() - keys.len() % LANES;
    (0..LANES)
        .flat_map(|lane| {
            let rest = if lane == 0 { &keys[whole..] } else { &[] };
            (lane..whole)
                .step_by(LANES)
                .map(|i| keys[i])
                .chain(rest.iter().copied())
        })
        .collect()
}

/// Regions of seeded hashes ([`split_by_region`]). Invariant: region `r`
/// is `slots[r * capacity..ends[r]]`, every position of it written, and
/// `r * capacity <= ends[r] <= (r + 1) * capacity <= slots.len()`.
pub(super) struct Regions<'a> {
    slots: &'a [std::mem::MaybeUninit<u64>],
    capacity: usize,
    ends: Vec<usize>,
}

impl Regions<'_> {
    /// The regions in order, each its seeded hashes.
    pub(super) fn iter(&self) -> impl Iterator<Item = &[u64]> {
        self.ends.iter().enumerate().map(|(r, &end)| {
            let region = &self.slots[r * self.capacity..end];
            // SAFETY: every position of a region was written (the
            // `Regions` invariant), and `MaybeUninit<u64>` has the layout
            // of `u64`: the slice is of initialized `u64`s.
            unsafe { std::slice::from_raw_parts(region.as_ptr().cast::<u64>(), region.len()) }
        })
    }
}

/// A position in `order`. REQUIRES of an implementation: it holds every
/// position up to the number of keys sorted.
trait Position: Copy + Default + Eq + std::ops::Add<Output = Self> {
    const ONE: Self;
    fn index(self) -> usize;
}

impl Position for u32 {
    const ONE: Self = 1;
    #[inline(always)]
    fn index(self) -> usize {
        self as usize
    }
}

impl Position for usize {
    const ONE: Self = 1;
    #[inline(always)]
    fn index(self) -> usize {
        self
    }
}

/// [`sort_by_block`] with positions of type `P`. REQUIRES: `P` holds
/// `hashes.len()`.
#[inline(always)]
fn scatter<P: Position>(
    hashes: &[KeyHash],
    hasher: &RibbonHasher,
    num_blocks: u64,
    order: &mut Vec<u64>,
) {
    let block_of = |h: KeyHash| {
        let x = hasher.seeded(h);
        (x, (hasher.start(x) / COEFF_BITS) as usize)
    };
    // `next[b + 1]` counts block b's keys, then (prefix sums) `next[b]` is
    // where block b's keys begin, the blocks in order.
    let mut next = vec![P::default(); num_blocks as usize + 1];
    for &h in hashes {
        let slot = &mut next[block_of(h).1 + 1];
        *slot = *slot + P::ONE;
    }
    for b in 1..next.len() {
        next[b] = next[b] + next[b - 1];
    }
    let n = hashes.len();
    // Where each block's positions end (`n` for the last).
    let ends = next[1..].to_vec();
    // Written below, each position once: not zeroed first.
    order.clear();
    order.reserve_exact(n);
    let spare = &mut order.spare_capacity_mut()[..n];
    for &h in hashes {
        let (x, block) = block_of(h);
        let slot = &mut next[block];
        let at = slot.index();
        spare[at].write(x);
        // The line this block writes two lines on: fetched (for writing)
        // while the other blocks' keys come by.
        prefetch(spare, (at + 16).min(n - 1));
        *slot = *slot + P::ONE;
    }
    // Each block's writes ended where its positions end: so block b wrote
    // exactly its positions `next[b]..ends[b]` as the prefix sums gave
    // them, one each, in order; these ranges cover `0..n`.
    assert!(
        next[..ends.len()] == ends[..],
        "the blocks were counted differently"
    );
    // SAFETY: every position in `0..n` was written (`spare[at].write`,
    // `n <= capacity` after `reserve_exact`): by the assert just above.
    unsafe { order.set_len(n) };
}

/// Asks the processor to fetch `spare[at]`'s line. A hint only.
/// REQUIRES: `at < spare.len()` (checked).
#[inline(always)]
fn prefetch(spare: &[std::mem::MaybeUninit<u64>], at: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p: *const std::mem::MaybeUninit<u64> = &spare[at];
        // SAFETY: `p` is a reference's address (checked in bounds just
        // above); a prefetch reads nothing the program sees.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (spare, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeded hashes stably sorted by block: what `sort_by_block`
    /// must give.
    fn stable_by_block(hashes: &[KeyHash], hasher: &RibbonHasher) -> Vec<u64> {
        let mut want: Vec<u64> = hashes.iter().map(|&h| hasher.seeded(h)).collect();
        want.sort_by_key(|&x| hasher.start(x) / COEFF_BITS);
        want
    }

    #[test]
    fn regions_hold_each_key_once_by_its_top_bits_in_order() {
        for (n, bits) in [
            (0u64, 1u32),
            (1, 3),
            (1000, 2),
            (20_000, 6),
            (5000, 9),
            (4003, 2),
        ] {
            let hasher = RibbonHasher::new(5, 1 << 20);
            let hashes: Vec<KeyHash> = (0..n).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
            let mut order = vec![3; 7];
            for _ in 0..2 {
                let regions =
                    split_by_region(&hashes, &hasher, bits, &mut order).expect("distinct keys fit");
                let got: Vec<Vec<u64>> = regions.iter().map(<[u64]>::to_vec).collect();
                assert_eq!(got.len(), 1 << bits);
                for (r, region) in got.iter().enumerate() {
                    let seeded: Vec<(usize, u64)> = hashes
                        .iter()
                        .map(|&h| hasher.seeded(h))
                        .enumerate()
                        .collect();
                    let want: Vec<u64> = room_order(&seeded)
                        .into_iter()
                        .map(|(_, x)| x)
                        .filter(|&x| (x >> (64 - bits)) as usize == r)
                        .collect();
                    assert_eq!(region, &want, "{n} keys, {bits} bits, region {r}");
                }
            }
        }
        // One key many times overflows its region.
        let hasher = RibbonHasher::new(5, 1 << 20);
        let same = vec![KeyHash::of(b"k"); 2000];
        assert!(split_by_region(&same, &hasher, 4, &mut Vec::new()).is_none());
    }

    #[test]
    fn equals_a_stable_sort_by_block() {
        for (n, num_blocks) in [
            (0u64, 2u64),
            (1, 2),
            (1000, 9),
            (20_000, 165),
            (3000, 31),
            // Many keys per block, and blocks with none.
            (5000, 3),
            (10, 40),
        ] {
            let hasher = RibbonHasher::new(3, num_blocks * COEFF_BITS - COEFF_BITS + 1);
            let mut hashes: Vec<KeyHash> = (0..n).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
            // Duplicates keep their places too.
            hashes.extend_from_within(..(n / 3) as usize);
            let want = stable_by_block(&hashes, &hasher);
            // Reused, longer and shorter than needed, as when another seed
            // is tried; and both position types.
            let mut order = vec![7; 5];
            let mut wide = vec![9; 100_000];
            for _ in 0..2 {
                sort_by_block(&hashes, &hasher, num_blocks, &mut order);
                assert_eq!(order, want, "{n} {num_blocks}");
                scatter::<usize>(&hashes, &hasher, num_blocks, &mut wide);
                assert_eq!(wide, want, "{n} {num_blocks}, usize positions");
            }
        }
    }
}
