//! The order keys are banded in: grouped by start block, so that banding
//! walks the band front to back and finds the rows it reads in cache. Any
//! order gives the same solution (the solution with every free slot 0 is
//! unique), so this is only about speed.

use super::hasher::{COEFF_BITS, RibbonHasher};
use crate::hash::KeyHash;

/// Fills `order` with the seeded hashes of `hashes` grouped by start block
/// in increasing order (a counting sort: the start grows with the seeded
/// hash, so this is also sorted order up to the slots within a block).
pub(super) fn sort_by_block(
    hashes: &[KeyHash],
    hasher: &RibbonHasher,
    num_blocks: u64,
    order: &mut Vec<u64>,
) {
    let block_of = |x: u64| (hasher.start(x) / COEFF_BITS) as usize;
    let mut next = vec![0usize; num_blocks as usize + 1];
    for &h in hashes {
        next[block_of(hasher.seeded(h)) + 1] += 1;
    }
    for b in 1..next.len() {
        next[b] += next[b - 1];
    }
    if order.len() != hashes.len() {
        // Zeroed pages from the allocator rather than a fill: every
        // element is written below.
        *order = vec![0; hashes.len()];
    }
    for &h in hashes {
        let x = hasher.seeded(h);
        let slot = &mut next[block_of(x)];
        order[*slot] = x;
        *slot += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_every_key_by_block() {
        for (n, num_blocks) in [(0u64, 2u64), (1, 2), (1000, 9), (20_000, 165), (3000, 31)] {
            let hasher = RibbonHasher::new(3, num_blocks * COEFF_BITS - COEFF_BITS + 1);
            let hashes: Vec<KeyHash> = (0..n).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
            // Reused, as when another seed is tried.
            let mut order = vec![7; 5];
            for _ in 0..2 {
                sort_by_block(&hashes, &hasher, num_blocks, &mut order);
                let blocks: Vec<u64> = order
                    .iter()
                    .map(|&x| hasher.start(x) / COEFF_BITS)
                    .collect();
                assert!(blocks.windows(2).all(|w| w[0] <= w[1]), "{n} {num_blocks}");
                let mut got = order.clone();
                let mut want: Vec<u64> = hashes.iter().map(|&h| hasher.seeded(h)).collect();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want);
            }
        }
    }
}
