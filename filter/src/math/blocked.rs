//! The false positive rate of a cache-blocked Bloom filter, and the number
//! of probes k it should use at each bits per key.
//!
//! Keys fall into blocks like balls into bins, so the number c of keys in a
//! key's block is Poisson with mean block_bits / bits_per_key (in one
//! filter of n keys and B blocks it is Binomial(n, 1/B), which a filter's
//! `theoretical_fpr` uses: see [`blocked_false_positive_rate_in_blocks`];
//! the Poisson limit serves bits-per-key arithmetic). Blocks with
//! more keys than average are fuller, which is why a blocked filter is a
//! little worse than a standard one, and why its best k is smaller than the
//! standard (m/n) ln 2: the rate is dominated by the crowded blocks, where
//! each extra probe sets more bits than it is worth. At 10 bits per key and
//! 512-bit blocks k = 6 is best (0.9665%), not 7 (0.9686%); at 20 bits per
//! key 11, not 14.

use super::{MAX_HASHES, MIN_HASHES, false_positive_rate};

/// Expected false positive rate of a cache-blocked filter, approximated:
/// the Poisson mixture over c of the standard formula for c keys in one
/// block. Cheap (used for `theoretical_fpr`), but it treats the bits of a
/// block as independent and so runs low: 0.4% under
/// [`blocked_false_positive_rate_exact`] at 4 bits per key, 1.3% at 10, 3.9%
/// at 20 (at the k of [`blocked_num_hashes`]), and it does not rank
/// neighbouring k correctly (it prefers 7 to 6 at 10 bits per key). Choose
/// k with the exact rate. (This is the estimate behind RocksDB's
/// "theoretical best 0.9535%" for 10 bits per key and k = 6.)
pub fn blocked_false_positive_rate(bits_per_key: f64, k: u32, block_bits: u32) -> f64 {
    if bits_per_key.is_nan() || bits_per_key <= 0.0 || block_bits == 0 {
        return 1.0;
    }
    let mean = block_bits as f64 / bits_per_key;
    if mean == 0.0 {
        // No keys (infinite bits per key): ln P(c = 0) below would be
        // 0 x ln 0.
        return 0.0;
    }
    if mean > 64.0 * f64::from(block_bits) {
        // Every block in the window below holds more than 60 keys per bit:
        // full to f64 precision, as the standard formula at the mean says.
        // (The window would take about 24 sqrt(mean) steps, 2^37 for a
        // header claiming 2^64 keys.)
        return false_positive_rate(mean as u64, u64::from(block_bits), k);
    }
    // The Poisson mass within 12 standard deviations (and 20 keys) of the
    // mean, its weights in logarithms: e^-mean underflows past 745.
    let spread = 12.0 * mean.sqrt() + 20.0;
    let lower = (mean - spread).max(0.0) as u64;
    let upper = (mean + spread) as u64;
    let mut ln_poisson = -mean + lower as f64 * mean.ln() - ln_factorial(lower); // ln P(c = lower)
    let mut total = 0.0;
    for c in lower..=upper {
        if c > lower {
            ln_poisson += (mean / c as f64).ln();
        }
        total += ln_poisson.exp() * false_positive_rate(c, u64::from(block_bits), k);
    }
    // The weights sum to 1 only within rounding (1 + 3e-13 seen).
    total.min(1.0)
}

/// Expected false positive rate of one blocked filter: `items` keys in
/// `blocks` blocks of `block_bits` bits, k probes each. An absent key's
/// block holds c of the keys, c Binomial(items, 1 / blocks) (exactly
/// `items` in a filter of one block), and the rate is the mixture over c
/// of the standard formula for c keys in one block. Its limit for many
/// blocks is [`blocked_false_positive_rate`]'s Poisson mixture, which for
/// few blocks weighs crowded blocks that cannot exist: 13% high at 51 keys
/// in one block, 15% at 60 in two, 2% at 256 in five (10 bits per key,
/// k = 6). Treats a block's bits as independent, as that one does (about
/// 1.3% low at 10 bits per key). 0 without keys; 1 without bits.
pub fn blocked_false_positive_rate_in_blocks(
    items: u64,
    blocks: u64,
    k: u32,
    block_bits: u32,
) -> f64 {
    if items == 0 {
        return 0.0;
    }
    if blocks == 0 || block_bits == 0 {
        return 1.0;
    }
    let bits = u64::from(block_bits);
    if blocks == 1 {
        return false_positive_rate(items, bits, k);
    }
    let n = items as f64;
    let p = 1.0 / blocks as f64;
    let mean = n * p;
    if mean > 64.0 * f64::from(block_bits) {
        // Full to f64 precision over the whole window (as there).
        return false_positive_rate(mean as u64, bits, k);
    }
    // The binomial mass within 12 standard deviations (and 20 keys) of
    // the mean, each weight relative to the one at the mean's floor (their
    // ratios are exact; no factorial of `items` is formed), normalised by
    // their sum.
    let spread = 12.0 * (mean * (1.0 - p)).sqrt() + 20.0;
    let lower = (mean - spread).max(0.0) as u64;
    let upper = ((mean + spread) as u64).min(items);
    let middle = (mean as u64).clamp(lower, upper);
    let odds = p / (1.0 - p);
    let (mut total, mut weights) = (0.0, 0.0);
    let mut w = 1.0;
    for c in middle..=upper {
        if c > middle {
            // P(c) / P(c - 1) = (n - c + 1) / c x p / (1 - p).
            w *= (n - (c - 1) as f64) / c as f64 * odds;
        }
        total += w * false_positive_rate(c, bits, k);
        weights += w;
    }
    let mut w = 1.0;
    for c in (lower..middle).rev() {
        // P(c) / P(c + 1) = (c + 1) / (n - c) x (1 - p) / p.
        w *= (c + 1) as f64 / (n - c as f64) / odds;
        total += w * false_positive_rate(c, bits, k);
        weights += w;
    }
    (total / weights).min(1.0)
}

/// ln n!, exactly summed to 32 and by Stirling's series past it (relative
/// error below 1e-12 there).
fn ln_factorial(n: u64) -> f64 {
    if n < 32 {
        return (2..=n).map(|i| (i as f64).ln()).sum();
    }
    let x = n as f64;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x)
        - 1.0 / (360.0 * x * x * x)
}

/// Expected false positive rate of a cache-blocked filter whose keys each
/// set k bits drawn uniformly, with replacement, from their block (as ours
/// and RocksDB's FastLocalBloom do), at `bits_per_key` and `block_bits`
/// bits per block. Exact for that model:
///
/// - c keys in a block throw c k darts at its bits; the distribution of the
///   number X of bits set is computed dart by dart;
/// - an absent key's k probes all hit set bits with probability (X/B)^k;
/// - the rate is the Poisson mixture over c of E[(X/B)^k].
///
/// Costs about k x (c_max) x block_bits steps (half a million at 10 bits
/// per key): for tables and tests, not for every filter built.
pub fn blocked_false_positive_rate_exact(bits_per_key: f64, k: u32, block_bits: u32) -> f64 {
    if bits_per_key.is_nan() || bits_per_key <= 0.0 || block_bits == 0 {
        return 1.0;
    }
    let bins = block_bits as usize;
    let mean = block_bits as f64 / bits_per_key;
    let upper = (mean + 12.0 * mean.sqrt() + 20.0) as u64;
    let hit: Vec<f64> = (0..=bins)
        .map(|x| (x as f64 / bins as f64).powi(k as i32))
        .collect();
    // dist[x] = P(x bits set) after the darts thrown so far.
    let mut dist = vec![0.0f64; bins + 1];
    dist[0] = 1.0;
    let mut ln_poisson = -mean; // ln P(c = 0)
    let mut total = 0.0;
    for c in 0..=upper {
        if c > 0 {
            ln_poisson += (mean / c as f64).ln();
            for _ in 0..k {
                // One dart: a set bit stays set, a clear one is set with
                // probability (B - x) / B.
                for x in (1..=bins).rev() {
                    dist[x] = dist[x] * (x as f64 / bins as f64)
                        + dist[x - 1] * ((bins - x + 1) as f64 / bins as f64);
                }
                dist[0] = 0.0;
            }
        }
        let rate: f64 = dist.iter().zip(&hit).map(|(p, h)| p * h).sum();
        total += ln_poisson.exp() * rate;
    }
    total
}

/// The k in [`MIN_HASHES`]..=[`MAX_HASHES`] that minimises
/// [`blocked_false_positive_rate_exact`] (slow: see there; filters use
/// [`blocked_num_hashes`], the same choice from a table).
pub fn blocked_optimal_num_hashes(bits_per_key: f64, block_bits: u32) -> u32 {
    let mut best = (MIN_HASHES, f64::INFINITY);
    for k in MIN_HASHES..=MAX_HASHES {
        let rate = blocked_false_positive_rate_exact(bits_per_key, k, block_bits);
        if rate < best.1 {
            best = (k, rate);
        }
        if rate > best.1 * 1.5 {
            break; // past the minimum, the rate only grows
        }
    }
    best.0
}

/// Bits per key a 512-bit-block filter needs to expect false positive rate
/// `fpr`, at the k of [`blocked_num_hashes`] (bisection on the exact rate,
/// which falls as bits per key grow, to 0.001 bits per key; about 30 exact
/// evaluations). `fpr` is clamped to 1e-9..=0.5.
pub fn blocked_bits_per_key_for_fpr(fpr: f64) -> f64 {
    let fpr = if fpr.is_nan() {
        0.01
    } else {
        fpr.clamp(1e-9, 0.5)
    };
    let rate = |bpk: f64| blocked_false_positive_rate_exact(bpk, blocked_num_hashes(bpk), 512);
    let (mut low, mut high) = (0.5, 2.0);
    while rate(high) > fpr {
        low = high;
        high *= 2.0;
    }
    while high - low > 0.001 {
        let mid = (low + high) / 2.0;
        if rate(mid) > fpr {
            low = mid;
        } else {
            high = mid;
        }
    }
    high
}

/// Where the best k of a 512-bit-block filter steps up: entry i is the
/// largest bits per key (in thousandths) at which k = i + 1 is still at
/// least as good as k = i + 2, by [`blocked_false_positive_rate_exact`].
/// Produced by `cargo run --release -p bloomlsm-filter --example
/// blocked_k_table`; `tests/blocked_k.rs` checks every crossover.
pub const BLOCKED_K_THRESHOLDS_MILLIBITS: [u32; 29] = [
    2081, 3583, 5103, 6673, 8316, 10057, 11920, 13932, 16123, 18527, 21184, 24139, 27444, 31160,
    35360, 40126, 45558, 51774, 58914, 67147, 76672, 87731, 100615, 115674, 133337, 154121, 178660,
    207728, 242276,
];

/// The probes a 512-bit-block filter uses at `bits_per_key`: the k of
/// least expected false positive rate ([`BLOCKED_K_THRESHOLDS_MILLIBITS`]).
/// Non-finite or non-positive budgets get 1.
pub fn blocked_num_hashes(bits_per_key: f64) -> u32 {
    if bits_per_key.is_nan() || bits_per_key <= 0.0 {
        return MIN_HASHES;
    }
    let millibits = (bits_per_key * 1000.0).round().min(u32::MAX as f64) as u32;
    let below = BLOCKED_K_THRESHOLDS_MILLIBITS
        .iter()
        .take_while(|&&t| t < millibits)
        .count() as u32;
    (MIN_HASHES + below).min(MAX_HASHES)
}

#[cfg(test)]
mod tests {
    use super::super::{optimal_false_positive_rate, optimal_num_hashes};
    use super::*;

    /// Far more keys than bits (a crafted or over-full filter): every
    /// block is about full, the rate about 1, and the answer comes at once. Before,
    /// the Poisson weight of c = 0 underflowed to 0 past a mean of about
    /// 745 keys per block (a rate of 0), and the sum ran from c = 0 to
    /// past the mean (about 2^64 steps for a header claiming 2^64 keys).
    #[test]
    fn over_full_blocks_have_a_rate_of_one_and_answer_at_once() {
        for bits_per_key in [0.5, 0.1, 0.01, 1e-6, 512.0 / u64::MAX as f64] {
            let rate = blocked_false_positive_rate(bits_per_key, 6, 512);
            assert!((rate - 1.0).abs() < 1e-4, "{bits_per_key}: {rate}");
        }
    }

    /// Near the threshold between the summed window and the full-block
    /// shortcut the rate is continuous and rises as bits per key fall.
    #[test]
    fn the_rate_rises_smoothly_as_bits_per_key_fall() {
        let mut last = 0.0;
        for bits_per_key in [20.0, 10.0, 4.0, 2.0, 1.0, 0.7, 0.6, 0.1, 0.02, 0.015, 0.01] {
            let rate = blocked_false_positive_rate(bits_per_key, 6, 512);
            // (The logarithmic weights sum to 1 within 1e-9.)
            assert!(
                rate >= last - 1e-9 && rate <= 1.0 + 1e-9,
                "{bits_per_key}: {rate} after {last}"
            );
            last = rate;
        }
    }

    /// Whatever the arguments, a rate in 0..=1 (never NaN): infinite bits
    /// per key (no keys) is 0, as it was before the windowed sum, whose
    /// ln P(c = 0) was then 0 x ln 0; blocks of no bits are always hit
    /// (as the exact rate says); and over-full blocks at many probes, where
    /// the weights' rounding summed past 1, are 1.
    #[test]
    fn the_rate_is_a_probability_for_any_arguments() {
        assert_eq!(blocked_false_positive_rate(f64::INFINITY, 6, 512), 0.0);
        assert_eq!(blocked_false_positive_rate(f64::NAN, 6, 512), 1.0);
        assert_eq!(blocked_false_positive_rate(10.0, 6, 0), 1.0);
        for bits_per_key in [f64::INFINITY, f64::NAN, f64::MAX, 1e-300, 0.7, 10.0] {
            for k in [0, 1, 6, 30] {
                for block_bits in [0, 1, 64, 512, 1 << 20] {
                    let rate = blocked_false_positive_rate(bits_per_key, k, block_bits);
                    assert!(
                        (0.0..=1.0).contains(&rate),
                        "{bits_per_key} bits/key, k {k}, {block_bits}-bit blocks: {rate}"
                    );
                }
            }
        }
        // Over-full 512-bit blocks at k = 30 (a header can say so): the
        // sum came to 1 + 3e-13.
        for millibits in 600..=900 {
            let rate = blocked_false_positive_rate(f64::from(millibits) / 1000.0, 30, 512);
            assert!(rate <= 1.0, "{millibits} millibits/key: {rate}");
        }
    }

    /// The binomial mixture of one filter's blocks: the direct sum of
    /// C(n, c) p^c (1 - p)^(n - c) for small n, the Poisson mixture's
    /// value for many blocks, exactly the one-block formula for one block.
    #[test]
    fn a_filter_s_rate_is_the_binomial_mixture_over_its_blocks() {
        for (n, blocks) in [(1u64, 2u64), (40, 3), (100, 2), (150, 7), (60, 60)] {
            let p = 1.0 / blocks as f64;
            let mut direct = 0.0;
            let mut choose = 1.0f64; // C(n, c)
            for c in 0..=n {
                if c > 0 {
                    choose *= (n - c + 1) as f64 / c as f64;
                }
                direct += choose
                    * p.powi(c as i32)
                    * (1.0 - p).powi((n - c) as i32)
                    * false_positive_rate(c, 512, 6);
            }
            let got = blocked_false_positive_rate_in_blocks(n, blocks, 6, 512);
            assert!(
                (got / direct - 1.0).abs() < 1e-9,
                "{n} in {blocks}: {got} vs {direct}"
            );
        }
        assert_eq!(
            blocked_false_positive_rate_in_blocks(51, 1, 6, 512),
            false_positive_rate(51, 512, 6)
        );
        for bits_per_key in [4.0, 10.0, 20.0] {
            let blocks = 100_000u64;
            let n = (blocks as f64 * 512.0 / bits_per_key) as u64;
            let many = blocked_false_positive_rate_in_blocks(n, blocks, 6, 512);
            let poisson = blocked_false_positive_rate(512.0 * blocks as f64 / n as f64, 6, 512);
            assert!(
                (many / poisson - 1.0).abs() < 1e-4,
                "{bits_per_key}: {many} vs {poisson}"
            );
        }
    }

    #[test]
    fn a_filter_s_rate_is_a_probability_for_any_arguments() {
        assert_eq!(blocked_false_positive_rate_in_blocks(0, 0, 6, 512), 0.0);
        assert_eq!(blocked_false_positive_rate_in_blocks(5, 0, 6, 512), 1.0);
        // k past i32::MAX and blocks of u32::MAX bits too: the one-block
        // and full-block answers returned 1.58 and inf there (the standard
        // formula's powi(k as i32) raised to a negative power).
        for items in [0, 1, 7, 1000, 1 << 40, u64::MAX] {
            for blocks in [0, 1, 2, 3, 1000, 1 << 50, u64::MAX] {
                for k in [0, 1, 6, 30, 1 << 31, u32::MAX] {
                    for block_bits in [0, 1, 512, u32::MAX] {
                        let rate =
                            blocked_false_positive_rate_in_blocks(items, blocks, k, block_bits);
                        assert!(
                            (0.0..=1.0).contains(&rate),
                            "{items} in {blocks}, k {k}, {block_bits}: {rate}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn blocked_is_a_little_worse_than_standard() {
        let exact = blocked_false_positive_rate_exact(10.0, 6, 512);
        assert!(exact > optimal_false_positive_rate(10.0));
        assert!((exact - 0.009_665).abs() < 0.000_01, "{exact}");
        let approx = blocked_false_positive_rate(10.0, 6, 512);
        assert!(
            (approx / exact - 0.9867).abs() < 0.001,
            "{approx} vs {exact}"
        );
        assert_eq!(blocked_optimal_num_hashes(10.0, 512), 6);
        assert!(blocked_optimal_num_hashes(20.0, 512) < optimal_num_hashes(20.0));
    }

    #[test]
    fn bits_for_a_rate() {
        let bpk = blocked_bits_per_key_for_fpr(0.01);
        // A standard filter needs 9.59; the blocked one a little more.
        assert!(bpk > 9.59 && bpk < 10.0, "{bpk}");
        let k = blocked_num_hashes(bpk);
        assert!(blocked_false_positive_rate_exact(bpk, k, 512) <= 0.01);
        assert!(blocked_false_positive_rate_exact(bpk - 0.002, k, 512) > 0.01);
    }

    #[test]
    fn table_lookup() {
        assert_eq!(blocked_num_hashes(10.0), 6);
        assert_eq!(blocked_num_hashes(0.0), 1);
        assert_eq!(blocked_num_hashes(f64::NAN), 1);
        assert_eq!(blocked_num_hashes(1e9), MAX_HASHES);
        let mut last = 0;
        for tenth in 1..1000 {
            let k = blocked_num_hashes(tenth as f64 / 10.0);
            assert!(k >= last);
            last = k;
        }
    }
}
