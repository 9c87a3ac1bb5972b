//! `size`: a filter's size and false positive rate for N items, beside an
//! exact set of the same keys.

use anyhow::{Result, bail};
use bloomlsm_filter::math;

use super::Outcome;
use crate::output::{Fields, Value};

/// What was asked (items and one of target FPR, bits per key, memory),
/// then the filter that answers it, then the exact set for comparison.
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
    let mut fields = Fields::new().with("items", items);
    let bpk = match (fpr, bits_per_key, memory) {
        (Some(p), _, _) if p > 0.0 && p < 1.0 => {
            fields.push("target_fpr", p);
            math::bits_per_key_for_fpr(p)
        }
        (Some(p), _, _) => bail!("--fpr {p} must be between 0 and 1"),
        (_, Some(b), _) if b > 0.0 => b,
        (_, Some(b), _) => bail!("--bits-per-key {b} must be positive"),
        (_, _, Some(m)) if m > 0 => {
            fields.push("memory_budget_bytes", m);
            m as f64 * 8.0 / items as f64
        }
        _ => bail!("give one of --fpr, --bits-per-key or --memory"),
    };
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
    Ok(Value::from(fields).into())
}
