//! The lecture's arithmetic of Bloom filters.
//!
//! Notation: m bits, k hash functions, n items. Every function here is the
//! closed form derived in the lecture (see `docs/lecture.md`),
//! so measured filters can be compared against it.

use std::f64::consts::LN_2;

mod blocked;

pub use blocked::{
    BLOCKED_K_THRESHOLDS_MILLIBITS, blocked_bits_per_key_for_fpr, blocked_false_positive_rate,
    blocked_false_positive_rate_exact, blocked_false_positive_rate_in_blocks, blocked_num_hashes,
    blocked_optimal_num_hashes,
};

/// Smallest number of hash functions a filter uses.
pub const MIN_HASHES: u32 = 1;
/// Largest number of hash functions a filter uses: past 30 the extra probes
/// only cost time (30 is optimal only above 43 bits per key).
pub const MAX_HASHES: u32 = 30;

/// Probability that a given bit is still zero after `n` items with `k`
/// hashes each were inserted into `m` bits.
///
/// One hash misses the bit with probability 1 - 1/m; n*k independent hashes
/// all miss it with probability (1 - 1/m)^(kn), which for large m is very
/// close to e^(-kn/m), the form used here.
pub fn probability_bit_zero(n: u64, m: u64, k: u32) -> f64 {
    if m == 0 {
        return 0.0;
    }
    (-(k as f64) * n as f64 / m as f64).exp()
}

/// Expected fraction of bits set: P1 = 1 - e^(-kn/m).
///
/// For the lecture's 16-bit row with k = 3 this is about 0.43 after 3 items
/// and 0.89 after 12.
pub fn expected_fill(n: u64, m: u64, k: u32) -> f64 {
    1.0 - probability_bit_zero(n, m, k)
}

/// The false positive rate eps = (1 - e^(-kn/m))^k.
///
/// An absent item names k bits; each is set with probability P1 (see
/// [`expected_fill`]) and, treating them as independent, all k are set with
/// probability P1^k. At 10 bits per key: k=1 9.52%, k=2 3.29%, k=3 1.74%,
/// k=5 0.94%, k=7 0.82%, k=10 1.02%, k=14 1.90%.
pub fn false_positive_rate(n: u64, m: u64, k: u32) -> f64 {
    if n == 0 {
        return 0.0;
    }
    // `k as i32` wrapped past i32::MAX to a negative power (a rate of
    // 1.58 or inf); a fill in 0..=1 to a positive power stays in 0..=1.
    expected_fill(n, m, k).powi(i32::try_from(k).unwrap_or(i32::MAX))
}

/// The false positive rate as a function of bits per key and k:
/// (1 - e^(-k / bits_per_key))^k.
pub fn false_positive_rate_per_key(bits_per_key: f64, k: u32) -> f64 {
    if bits_per_key <= 0.0 {
        return 1.0;
    }
    (1.0 - (-(k as f64) / bits_per_key).exp()).powi(k as i32)
}

/// The k that minimises the false positive rate: (m/n) ln 2.
///
/// Setting the derivative of ln eps with respect to k to zero gives
/// e^(-kn/m) = 1/2: the optimum leaves exactly half the bits set. For 10
/// bits per key that is 6.93, so a filter uses 7.
pub fn optimal_k(bits_per_key: f64) -> f64 {
    bits_per_key * LN_2
}

/// [`optimal_k`] rounded to a whole number of hashes and clamped to
/// [`MIN_HASHES`]..=[`MAX_HASHES`].
pub fn optimal_num_hashes(bits_per_key: f64) -> u32 {
    let k = optimal_k(bits_per_key).round();
    if k.is_nan() || k < MIN_HASHES as f64 {
        MIN_HASHES
    } else if k > MAX_HASHES as f64 {
        MAX_HASHES
    } else {
        k as u32
    }
}

/// The false positive rate at the optimal k: substituting k = (m/n) ln 2
/// gives eps = (1/2)^((m/n) ln 2) = e^(-(m/n) (ln 2)^2) ~ 0.6185^(m/n).
/// 8 bits per key: 2.1%; 10: 0.82%; 14: 0.12%; 20: 0.0067%.
pub fn optimal_false_positive_rate(bits_per_key: f64) -> f64 {
    (-bits_per_key * LN_2 * LN_2).exp()
}

/// Bits per key needed for a target false positive rate at the optimal k:
/// the inverse of [`optimal_false_positive_rate`], -ln(eps) / (ln 2)^2.
pub fn bits_per_key_for_fpr(fpr: f64) -> f64 {
    -fpr.ln() / (LN_2 * LN_2)
}

/// Number of items estimated from the fraction of bits set, by inverting
/// [`expected_fill`]: n = -(m/k) ln(1 - fill). Infinite for a full filter.
pub fn estimated_items(m: u64, k: u32, fill: f64) -> f64 {
    if k == 0 {
        return 0.0;
    }
    -(m as f64 / k as f64) * (1.0 - fill).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, relative: f64) -> bool {
        (actual - expected).abs() <= expected * relative
    }

    #[test]
    fn lecture_k_sweep_formula() {
        let table = [
            (1, 0.0952),
            (2, 0.0329),
            (3, 0.0174),
            (5, 0.0094),
            (7, 0.0082),
            (10, 0.0102),
            (14, 0.0190),
        ];
        for (k, expected) in table {
            let eps = false_positive_rate(1000, 10_000, k);
            assert!(close(eps, expected, 0.02), "k={k}: {eps} vs {expected}");
        }
    }

    #[test]
    fn lecture_bits_per_key_formula() {
        for (bpk, expected) in [
            (8.0, 0.021),
            (10.0, 0.0082),
            (14.0, 0.0012),
            (20.0, 0.000067),
        ] {
            let eps = optimal_false_positive_rate(bpk);
            assert!(close(eps, expected, 0.03), "{bpk}: {eps}");
            assert!(close(0.6185f64.powf(bpk), eps, 0.01));
        }
    }

    #[test]
    fn optimal_k_and_half_full() {
        assert!((optimal_k(10.0) - 6.93).abs() < 0.01);
        assert_eq!(optimal_num_hashes(10.0), 7);
        assert_eq!(optimal_num_hashes(9.9), 7);
        assert_eq!(optimal_num_hashes(0.1), 1);
        assert_eq!(optimal_num_hashes(1000.0), 30);
        assert_eq!(optimal_num_hashes(f64::NAN), 1);
        let fill = expected_fill(1000, 10_000, 7);
        assert!((fill - 0.5).abs() < 0.01);
    }

    #[test]
    fn sixteen_bit_row() {
        assert!((expected_fill(3, 16, 3) - 0.43).abs() < 0.01);
        assert!((expected_fill(12, 16, 3) - 0.89).abs() < 0.01);
    }

    #[test]
    fn inverse_functions() {
        let bpk = bits_per_key_for_fpr(0.01);
        assert!((optimal_false_positive_rate(bpk) - 0.01).abs() < 1e-12);
        let fill = expected_fill(5000, 100_000, 7);
        assert!((estimated_items(100_000, 7, fill) - 5000.0).abs() < 1e-6);
    }
}

/// Bits per key per level that minimise the sum of the levels' false
/// positive rates (the expected block reads of an absent lookup that probes
/// one table per level) for the same total filter memory as
/// `bits_per_key` everywhere: the Monkey result (Dayan et al., SIGMOD 2017).
///
/// Minimising sum e^(-b_i (ln 2)^2) subject to sum n_i b_i = B with a
/// Lagrange multiplier gives e^(-b_i (ln 2)^2) proportional to n_i: each
/// level's FPR is proportional to its key count, so larger levels get fewer
/// bits per key. A level whose share would be negative gets 0 bits (no
/// filter) and the budget is re-spread over the others. Empty levels get
/// `bits_per_key`.
pub fn optimized_bits_per_key(level_keys: &[u64], bits_per_key: f64) -> Vec<f64> {
    optimized_bits_per_key_at_slope(level_keys, bits_per_key, LN_2 * LN_2)
}

/// [`optimized_bits_per_key`] for a filter whose rate falls as
/// e^(-slope x bits per key): (ln 2)^2 for a standard Bloom filter, about
/// ln 2 / 1.05 for Ribbon (see [`crate::planning::fpr_slope`]). With
/// p_i = a e^(-slope b_i) the optimum still makes each run's rate
/// proportional to its keys; only the bits between runs scale with
/// 1 / slope. A non-finite or non-positive slope gives `bits_per_key`
/// everywhere.
pub fn optimized_bits_per_key_at_slope(
    level_keys: &[u64],
    bits_per_key: f64,
    slope: f64,
) -> Vec<f64> {
    if !(slope.is_finite() && slope > 0.0) {
        return vec![bits_per_key; level_keys.len()];
    }
    let budget: f64 = level_keys.iter().map(|&n| n as f64 * bits_per_key).sum();
    let mut active: Vec<usize> = (0..level_keys.len())
        .filter(|&i| level_keys[i] > 0)
        .collect();
    let mut out: Vec<f64> = level_keys
        .iter()
        .map(|&n| if n == 0 { bits_per_key } else { 0.0 })
        .collect();
    while !active.is_empty() {
        let total: f64 = active.iter().map(|&i| level_keys[i] as f64).sum();
        let sum_n_ln_n: f64 = active
            .iter()
            .map(|&i| level_keys[i] as f64 * (level_keys[i] as f64).ln())
            .sum();
        let ln_k = (budget * slope + sum_n_ln_n) / total;
        let bits: Vec<f64> = active
            .iter()
            .map(|&i| (ln_k - (level_keys[i] as f64).ln()) / slope)
            .collect();
        if let Some(pos) = bits.iter().position(|&b| b < 0.0) {
            // The largest level cannot afford a filter: drop the largest.
            let largest = (0..active.len())
                .max_by_key(|&j| level_keys[active[j]])
                .unwrap_or(pos);
            out[active[largest]] = 0.0;
            active.remove(largest);
            continue;
        }
        for (j, &i) in active.iter().enumerate() {
            out[i] = bits[j];
        }
        break;
    }
    out
}

/// The predicted reduction of the summed false positive rates of `runs`
/// (keys per run an absent lookup probes) when the same total bits are
/// spread by Monkey instead of uniformly, for rates of the form
/// a e^(-slope b) and no run priced out of its filter:
/// 1 - e^H / L, where H = -sum (n_i/N) ln(n_i/N) is the entropy of the
/// runs' key shares and L the number of runs. Uniform spends b on every
/// run: L a e^(-slope b). The optimum makes p_i = q n_i / N with
/// sum n_i b_i = N b, so ln q = ln a - slope b + H and the sum is q. The
/// ratio e^H / L does not depend on b, a or the slope. (For levels 10x
/// apart: 3 levels 52%, 4 levels 64%, 5 levels 71%.) Empty runs are
/// ignored; no runs give 0.
pub fn monkey_predicted_reduction(runs: &[u64]) -> f64 {
    let runs: Vec<f64> = runs.iter().filter(|&&n| n > 0).map(|&n| n as f64).collect();
    if runs.is_empty() {
        return 0.0;
    }
    let total: f64 = runs.iter().sum();
    let entropy: f64 = runs
        .iter()
        .map(|&n| {
            let share = n / total;
            -share * share.ln()
        })
        .sum();
    1.0 - entropy.exp() / runs.len() as f64
}

#[cfg(test)]
mod monkey_tests {
    use super::*;

    #[test]
    fn same_memory_fewer_false_positives() {
        let keys = [10_000u64, 100_000, 1_000_000, 10_000_000];
        let bits = optimized_bits_per_key(&keys, 10.0);
        let memory: f64 = keys.iter().zip(&bits).map(|(&n, &b)| n as f64 * b).sum();
        let uniform_memory: f64 = keys.iter().map(|&n| n as f64 * 10.0).sum();
        assert!((memory - uniform_memory).abs() / uniform_memory < 1e-9);
        assert!(
            bits.windows(2).all(|w| w[0] > w[1]),
            "smaller levels get more bits: {bits:?}"
        );
        let sum = |b: &[f64]| {
            b.iter()
                .map(|&x| optimal_false_positive_rate(x))
                .sum::<f64>()
        };
        assert!(
            sum(&bits) < sum(&[10.0; 4]) * 0.8,
            "{} vs {}",
            sum(&bits),
            sum(&[10.0; 4])
        );
    }

    #[test]
    fn tiny_budget_drops_the_largest_level() {
        let bits = optimized_bits_per_key(&[100_000, 1_000_000], 0.01);
        assert_eq!(bits[1], 0.0);
        assert!(bits[0] > 0.0);
        assert_eq!(optimized_bits_per_key(&[0, 5], 10.0)[0], 10.0);
    }

    #[test]
    fn predicted_reduction_matches_the_issue_figures_and_the_allocation() {
        let levels = |l: u32| -> Vec<u64> { (0..l).map(|i| 10u64.pow(i) * 1000).collect() };
        for (l, want) in [(3, 0.52), (4, 0.64), (5, 0.71)] {
            let got = monkey_predicted_reduction(&levels(l));
            assert!((got - want).abs() < 0.01, "{l} levels: {got}");
        }
        // The closed form is what the allocation achieves, at any slope.
        for slope in [LN_2 * LN_2, LN_2 / 1.05] {
            let runs = [3_000u64, 40_000, 250_000, 2_600_000];
            let bits = optimized_bits_per_key_at_slope(&runs, 10.0, slope);
            let sum: f64 = bits.iter().map(|b| (-slope * b).exp()).sum();
            let uniform = 4.0 * (-slope * 10.0).exp();
            let measured = 1.0 - sum / uniform;
            let predicted = monkey_predicted_reduction(&runs);
            assert!(
                (measured - predicted).abs() < 1e-9,
                "{measured} vs {predicted}"
            );
        }
        assert_eq!(monkey_predicted_reduction(&[]), 0.0);
        assert!(monkey_predicted_reduction(&[7, 7, 7]).abs() < 1e-12);
    }
}
