//! `size`: a filter's size and false positive rate for N items, beside an
//! exact set of the same keys, and a Ribbon filter sized for the same
//! target.

use anyhow::{Result, bail};
use bloomlsm_filter::{RibbonTarget, math, ribbon_sizing};

use super::Outcome;
use crate::output::{Fields, Value};

/// Most items sized: the most `ribbon_sizing` takes (2^56), past any
/// filter that could be built.
const MAX_ITEMS: u64 = bloomlsm_filter::MAX_RIBBON_ITEMS;
/// Most filter bits sized: 2^63 (a filter of an exbibyte), so `m` fits in
/// a u64 instead of saturating.
const MAX_FILTER_BITS: f64 = 9_223_372_036_854_775_808.0;

/// What was asked (items and one of target FPR, bits per key, memory),
/// then the Bloom filter that answers it, then the exact set for
/// comparison, then (`ribbon`) a Ribbon filter for the same target FPR,
/// bits per key or memory, as `bloomlsm_filter::ribbon_sizing` sizes it.
pub fn run(
    items: u64,
    fpr: Option<f64>,
    bits_per_key: Option<f64>,
    memory: Option<u64>,
    key_bytes: u64,
) -> Result<Outcome> {
    if items == 0 {
        bail!("--items must be at least 1");
    }
    if items > MAX_ITEMS {
        bail!("--items {items} is more than {MAX_ITEMS} (2^56), past any filter this sizes");
    }
    let mut fields = Fields::new().with("items", items);
    let (bpk, target) = match (fpr, bits_per_key, memory) {
        (Some(p), _, _) if p > 0.0 && p < 1.0 => {
            fields.push("target_fpr", p);
            (math::bits_per_key_for_fpr(p), RibbonTarget::Fpr(p))
        }
        (Some(p), _, _) => bail!("--fpr {p} must be more than 0 and less than 1"),
        (_, Some(b), _) if b > 0.0 => (b, RibbonTarget::BitsPerKey(b)),
        (_, Some(b), _) => bail!("--bits-per-key {b} must be positive"),
        (_, _, Some(m)) if m > 0 && m as f64 * 8.0 <= MAX_FILTER_BITS => {
            fields.push("memory_budget_bytes", m);
            (m as f64 * 8.0 / items as f64, RibbonTarget::MemoryBytes(m))
        }
        (_, _, Some(m)) => bail!("--memory {m} must be between 1 and 2^60 bytes"),
        _ => bail!("give one of --fpr, --bits-per-key or --memory"),
    };
    if items as f64 * bpk > MAX_FILTER_BITS {
        bail!(
            "{items} items at {} bits each is more than 2^63 bits, past any filter this sizes",
            short(bpk)
        );
    }
    let m = (items as f64 * bpk).ceil() as u64;
    let k = math::optimal_num_hashes(bpk);
    let rate = math::false_positive_rate(items, m, k);
    let filter_bytes = m.div_ceil(8);
    let exact = items.saturating_mul(key_bytes);
    let fields = fields
        .with("bits_per_key", bpk)
        .with("k", k)
        .with("m_bits", m)
        .with("filter_bytes", filter_bytes)
        .with("false_positive_rate", rate)
        .with("expected_false_positives", rate * items as f64)
        .with("key_bytes", key_bytes)
        .with("exact_set_bytes", exact)
        .with("exact_set_over_filter", exact as f64 / filter_bytes as f64);
    let r = ribbon_sizing(items, target);
    // Bits per key of the whole filter, as the Bloom line's and `lecture`'s;
    // the solution's alone is what `--bits-per-key` asks a Ribbon filter for.
    let ribbon = Fields::new()
        .with(
            "bits_per_key",
            r.serialized_bytes as f64 * 8.0 / items as f64,
        )
        .with("solution_bits_per_key", r.bits_per_key)
        .with("mean_result_bits", r.mean_columns)
        .with("slots", r.slots)
        .with("filter_bytes", r.serialized_bytes)
        .with("false_positive_rate", r.expected_fpr)
        .with("expected_false_positives", r.expected_fpr * items as f64)
        .with(
            "exact_set_over_filter",
            exact as f64 / r.serialized_bytes as f64,
        );
    Ok(Value::from(fields.with("ribbon", ribbon)).into())
}

/// `x` as a reader takes it in: `1e300`, not its 301 digits.
fn short(x: f64) -> String {
    if x.abs() >= 1e6 {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(fields: &Fields, name: &str) -> f64 {
        match fields.get(name) {
            Some(Value::Float(v)) => *v,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn ribbon_answers_the_same_target_in_less_space() {
        let out = run(1_000_000, Some(0.01), None, None, 64).unwrap();
        let Value::Fields(fields) = out.value else {
            panic!("not fields")
        };
        let Some(Value::Fields(ribbon)) = fields.get("ribbon") else {
            panic!("no ribbon")
        };
        assert!((float(ribbon, "false_positive_rate") - 0.01).abs() < 1e-4);
        let (bloom, ribbon_bits) = (
            float(&fields, "bits_per_key"),
            float(ribbon, "bits_per_key"),
        );
        assert!(ribbon_bits < bloom * 0.75, "{ribbon_bits} vs {bloom}");
        // A memory budget is honoured, header included.
        let out = run(1_000_000, None, None, Some(500_000), 64).unwrap();
        let Value::Fields(fields) = out.value else {
            panic!("not fields")
        };
        let Some(Value::Fields(ribbon)) = fields.get("ribbon") else {
            panic!("no ribbon")
        };
        assert!(matches!(ribbon.get("filter_bytes"), Some(Value::Int(b)) if *b <= 500_000));
    }
}
