//! Beyond Bloom: bits per key against the measured false positive rate for
//! the standard, blocked and Ribbon filters, beside the information-
//! theoretic bound log2(1/eps) bits per key that any filter answering
//! "absent" correctly for all but a share eps of absent keys must spend.

use super::{absent_rate, present_hashes};
use crate::blocked::BlockedBloomFilter;
use crate::filter_trait::{Filter, InsertFilter};
use crate::kind::FilterKind;
use crate::math;
use crate::ribbon::RibbonFilter;
use crate::standard::BloomFilter;

/// The false positive rates each kind is sized for.
pub const TARGET_FPRS: [f64; 4] = [0.05, 0.01, 0.001, 0.0001];

/// One filter sized for one target rate.
#[derive(Clone, Debug, PartialEq)]
pub struct BeyondBloomRow {
    /// The filter kind (standard, blocked or ribbon).
    pub kind: FilterKind,
    /// The rate it was sized for.
    pub target_fpr: f64,
    /// Bits of filter (bit array or solution) per key, as built.
    pub bits_per_key: f64,
    /// The rate its layout predicts.
    pub expected_fpr: f64,
    /// The rate measured on absent keys.
    pub measured_fpr: f64,
    /// log2(1 / measured rate) (the expected one when no probe was a false
    /// positive): the fewest bits per key any filter with that rate needs.
    pub bound_bits_per_key: f64,
    /// `bits_per_key / bound_bits_per_key`: 1.44 for an ideal standard Bloom
    /// filter, about 1.05 for Ribbon.
    pub over_bound: f64,
}

fn row(
    kind: FilterKind,
    target: f64,
    filter: &dyn Filter,
    items: u64,
    probes: u64,
) -> BeyondBloomRow {
    let bits_per_key = (filter.memory_bytes() * 8) as f64 / items.max(1) as f64;
    let expected_fpr = filter.theoretical_fpr();
    let measured_fpr = absent_rate(filter, probes);
    let bound = -(if measured_fpr > 0.0 {
        measured_fpr
    } else {
        expected_fpr
    })
    .log2();
    BeyondBloomRow {
        kind,
        target_fpr: target,
        bits_per_key,
        expected_fpr,
        measured_fpr,
        bound_bits_per_key: bound,
        over_bound: bits_per_key / bound,
    }
}

/// For each target rate (5%, 1%, 0.1%, 0.01%), a standard, a blocked and
/// a Ribbon filter of `items` keys sized for it, each probed with `probes`
/// absent keys (0.01% wants 10 million to be measured to 3%).
pub fn beyond_bloom(items: u64, probes: u64) -> Vec<BeyondBloomRow> {
    let hashes = present_hashes(items);
    let mut rows = Vec::new();
    for target in TARGET_FPRS {
        let mut standard = BloomFilter::with_fpr(items, target);
        let blocked_bpk = math::blocked_bits_per_key_for_fpr(target);
        let mut blocked = BlockedBloomFilter::with_bits_per_key(items, blocked_bpk);
        for &h in &hashes {
            standard.insert_hash(h);
            blocked.insert_hash(h);
        }
        let ribbon = RibbonFilter::from_hashes_with_fpr(&hashes, target);
        rows.push(row(FilterKind::Standard, target, &standard, items, probes));
        let mut b = row(FilterKind::Blocked, target, &blocked, items, probes);
        // theoretical_fpr is the cheap approximation; this table shows the exact one.
        b.expected_fpr = math::blocked_false_positive_rate_exact(
            blocked.bits_per_key(),
            blocked.num_hashes(),
            crate::BLOCK_BITS,
        );
        rows.push(b);
        rows.push(row(FilterKind::Ribbon, target, &ribbon, items, probes));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ribbon_is_nearest_the_bound() {
        let rows = beyond_bloom(20_000, 100_000);
        assert_eq!(rows.len(), 12);
        for chunk in rows.chunks(3) {
            let (s, b, r) = (&chunk[0], &chunk[1], &chunk[2]);
            assert_eq!(
                (s.kind, b.kind, r.kind),
                (
                    FilterKind::Standard,
                    FilterKind::Blocked,
                    FilterKind::Ribbon
                )
            );
            assert!(r.bits_per_key < s.bits_per_key && s.bits_per_key < b.bits_per_key);
            // At these sizes 100,000 probes measure 5% and 1% closely.
            if s.target_fpr >= 0.01 {
                assert!(r.over_bound < 1.12 && s.over_bound > 1.35, "{r:?} {s:?}");
            }
        }
    }
}
