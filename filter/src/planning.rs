//! What a table filter of a kind will cost and answer before it is built:
//! the figures a store needs to plan filter memory (how many bytes a
//! filter of n keys at b bits per key takes, exactly as the builders size
//! it) and to spread a budget over levels (how fast the rate falls with
//! each extra bit).

use crate::blocked::BLOCK_BITS;
use crate::kind::FilterKind;
use crate::math;
use crate::ribbon::{RibbonTarget, ribbon_sizing};
use crate::standard::bits_for;

/// The bytes [`crate::Filter::memory_bytes`] will report for a filter of
/// `kind` built over `items` keys at `bits_per_key` (the bit array or
/// solution only, as the builders size it). The counting kind is not a
/// table filter: 0.
pub fn planned_memory_bytes(kind: FilterKind, items: u64, bits_per_key: f64) -> u64 {
    match kind {
        FilterKind::Standard => bits_for(items, bits_per_key).max(1).div_ceil(64) * 8,
        FilterKind::Blocked => {
            bits_for(items, bits_per_key)
                .div_ceil(u64::from(BLOCK_BITS))
                .max(1)
                * u64::from(BLOCK_BITS / 8)
        }
        FilterKind::Ribbon => {
            ribbon_sizing(items, RibbonTarget::BitsPerKey(bits_per_key)).solution_bytes
        }
        FilterKind::Counting => 0,
    }
}

/// The expected false positive rate of a filter of `kind` over `items`
/// keys at `bits_per_key` (large filters: no rounding of the size). The
/// blocked kind uses the cheap Poisson approximation (about 1.3% under the
/// exact rate at 10 bits per key), which is enough for slopes.
pub fn expected_fpr(kind: FilterKind, items: u64, bits_per_key: f64) -> f64 {
    if !(bits_per_key.is_finite() && bits_per_key > 0.0) {
        return 1.0;
    }
    match kind {
        FilterKind::Standard | FilterKind::Counting => {
            math::optimal_false_positive_rate(bits_per_key)
        }
        FilterKind::Blocked => math::blocked_false_positive_rate(
            bits_per_key,
            math::blocked_num_hashes(bits_per_key),
            BLOCK_BITS,
        ),
        FilterKind::Ribbon => {
            ribbon_sizing(items.max(1), RibbonTarget::BitsPerKey(bits_per_key)).expected_fpr
        }
    }
}

/// How fast the rate of `kind` falls per extra bit per key around
/// `bits_per_key`: -d ln(fpr) / d(bits), measured over +-2 bits (so the
/// rate is modelled as a e^(-slope b) there). A standard Bloom filter gives
/// (ln 2)^2 = 0.48 everywhere; Ribbon about ln 2 / 1.05 = 0.66; the
/// blocked filter less than standard, and less the more bits it gets.
pub fn fpr_slope(kind: FilterKind, bits_per_key: f64) -> f64 {
    const ITEMS: u64 = 1 << 20;
    let (lo, hi) = ((bits_per_key - 2.0).max(1.0), (bits_per_key + 2.0).max(3.0));
    let (p_lo, p_hi) = (expected_fpr(kind, ITEMS, lo), expected_fpr(kind, ITEMS, hi));
    if p_lo > 0.0 && p_hi > 0.0 && p_lo > p_hi {
        (p_lo.ln() - p_hi.ln()) / (hi - lo)
    } else {
        std::f64::consts::LN_2 * std::f64::consts::LN_2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnyFilter, Filter, KeyHash};

    #[test]
    fn planned_bytes_are_what_the_builders_allocate() {
        for kind in [
            FilterKind::Standard,
            FilterKind::Blocked,
            FilterKind::Ribbon,
        ] {
            for items in [1u64, 7, 100, 777, 5000] {
                for bits in [1.0, 3.3, 9.9, 10.0, 17.25] {
                    let hashes: Vec<KeyHash> =
                        (0..items).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
                    let f = AnyFilter::build(kind, &hashes, bits).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(
                        planned_memory_bytes(kind, items, bits),
                        f.memory_bytes() as u64,
                        "{kind} {items} keys {bits} bits/key"
                    );
                }
            }
        }
    }

    #[test]
    fn slopes_by_kind() {
        let ln2sq = std::f64::consts::LN_2 * std::f64::consts::LN_2;
        assert!((fpr_slope(FilterKind::Standard, 10.0) - ln2sq).abs() < 1e-9);
        let ribbon = fpr_slope(FilterKind::Ribbon, 10.0);
        assert!((0.6..0.7).contains(&ribbon), "{ribbon}");
        let blocked = fpr_slope(FilterKind::Blocked, 10.0);
        println!(
            "slopes at 10 bits/key: standard {ln2sq:.4}, blocked {blocked:.4}, ribbon {ribbon:.4}"
        );
        assert!(blocked < ln2sq && blocked > 0.3, "{blocked}");
    }
}
