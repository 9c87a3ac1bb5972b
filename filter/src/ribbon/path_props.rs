//! Property tests of the query paths (review28): on filters built from
//! random keys at random, fractional bits per key or rates, every key
//! answers true on every path, before and after its bytes are decoded;
//! and on filters decoded from bytes of random header fields and random
//! solution bits (whatever the decoder accepts: any block count, segment
//! count, seed and format version), every path gives the portable one's
//! answer on random keys and on keys aimed at the first and last starts
//! and the last blocks' edges (the AVX2 path's masked tail loads end
//! there).

use proptest::prelude::*;

use super::path_tests::{Rng, assert_paths_agree, claimed_bytes, hash_for, x_at_start};
use super::*;

/// Random keys and keys aimed at the first start, the last starts and
/// the first starts of the last three blocks.
fn probes(f: &RibbonFilter, rng: &mut Rng) -> Vec<KeyHash> {
    let mut out: Vec<KeyHash> = (0..64).map(|_| KeyHash::from_raw(rng.next())).collect();
    if f.layout.num_blocks() == 0 {
        return out;
    }
    let num_starts = f.layout.num_starts();
    let last_block = f.layout.num_blocks() - 1;
    let mut starts = vec![0, num_starts - 1, num_starts.saturating_sub(2)];
    for b in last_block.saturating_sub(2)..=last_block {
        for s in [b * COEFF_BITS, (b * COEFF_BITS).wrapping_sub(1)] {
            if s < num_starts {
                starts.push(s);
            }
        }
    }
    for s in starts {
        for _ in 0..4 {
            out.push(hash_for(&f.hasher, x_at_start(s, num_starts, rng)));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// No false negative on any path, at any size up to a few thousand
    /// keys (none included) and any bits per key, fractional or not, or
    /// any rate; nor after the filter's bytes are decoded.
    #[test]
    fn every_key_answers_true_on_every_path(
        n in 0usize..2500,
        bits_per_key in 0.0f64..40.0,
        fpr in 1e-7f64..1.0,
        by_rate in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng(seed);
        let keys: Vec<KeyHash> = (0..n).map(|_| KeyHash::from_raw(rng.next())).collect();
        let f = if by_rate {
            RibbonFilter::from_hashes_with_fpr(&keys, fpr)
        } else {
            RibbonFilter::from_hashes(&keys, bits_per_key)
        };
        let what = format!("{n} keys, {bits_per_key} bits per key or rate {fpr} {:?}", f.layout);
        let back = RibbonFilter::from_bytes(&f.to_bytes()).expect("its own bytes");
        for &h in &keys {
            prop_assert!(assert_paths_agree(&f, h, &what), "false negative: {what}");
            prop_assert!(assert_paths_agree(&back, h, &what), "decoded: {what}");
        }
        for h in probes(&f, &mut rng) {
            assert_paths_agree(&f, h, &what);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the decoder accepts answers alike on every path: random
    /// header fields (mostly consistent, some not), random solution bits.
    #[test]
    fn decoded_random_filters_answer_alike_on_every_path(
        num_blocks in prop_oneof![0u32..=1, 2u32..40, 40u32..400, Just(u32::MAX)],
        fill in 0.0f64..=1.0,
        spare in 0u64..3,
        honest_k in prop::bool::weighted(0.9),
        seed in 0u32..260,
        items in any::<u64>(),
        v1 in any::<bool>(),
        rng_seed in any::<u64>(),
    ) {
        let mut rng = Rng(rng_seed);
        // Segments up to 32 per block (and a few past it), far fewer for
        // the largest block count (it holds its payload in memory).
        let most = if num_blocks == u32::MAX { 3 } else { u64::from(MAX_COLUMNS) * u64::from(num_blocks) };
        let num_segments = ((most as f64 * fill) as u64 + spare).min(most + 2);
        let k = if honest_k && num_segments <= most {
            Layout::new(u64::from(num_blocks), num_segments).upper_columns()
        } else {
            (rng.next() % 40) as u32
        };
        let items = if num_blocks == 0 { items % 2 * items } else { items };
        let bytes = claimed_bytes(num_blocks, num_segments, k, seed, items, v1, &mut rng);
        let Ok(f) = RibbonFilter::from_bytes(&bytes) else {
            return Ok(());
        };
        let what = format!("{:?} v1={v1}", f.layout);
        for h in probes(&f, &mut rng) {
            assert_paths_agree(&f, h, &what);
        }
    }
}
