//! `lecture`: the lecture's numbers beside the formulas and real filters,
//! then two tables past the lecture: the blocked filter's k at 4 to 20 bits
//! per key beside RocksDB's, and bits per key against the bound log2(1/eps)
//! for the standard, blocked and Ribbon filters.

use bloomlsm_filter::lecture::{beyond_bloom, blocked_k_curve, lecture_report};

use super::Outcome;
use crate::output::{Fields, Value};

/// Three tables: `numbers` (one row per number of the lecture: where it
/// comes from, what it is, the lecture's figure, the formula's, the
/// measured one, and the unit), `blocked_k` and `beyond_bloom`.
pub fn run(items: u64, probes: u64) -> Outcome {
    let numbers: Vec<Value> = lecture_report(items, probes)
        .into_iter()
        .map(|r| {
            Fields::new()
                .with("topic", r.topic)
                .with("quantity", r.quantity)
                .with("lecture", r.lecture)
                .with("formula", r.formula)
                .with("measured", r.measured)
                .with("unit", r.unit)
                .into()
        })
        .collect();
    let blocked_k: Vec<Value> = blocked_k_curve(items, probes)
        .into_iter()
        .map(|r| {
            Fields::new()
                .with("bits_per_key", r.bits_per_key)
                .with("k", r.k)
                .with("standard_k", r.standard_k)
                .with("expected_fpr", r.expected_fpr)
                .with("measured_fpr", r.measured_fpr)
                .with("rocksdb_k", r.rocksdb_k)
                .with("rocksdb_expected_fpr", r.rocksdb_expected_fpr)
                .with(
                    "rocksdb_quoted_fpr",
                    r.rocksdb_published_fpr.map_or(Value::Null, Value::Float),
                )
                .into()
        })
        .collect();
    let beyond: Vec<Value> = beyond_bloom(items, probes)
        .into_iter()
        .map(|r| {
            Fields::new()
                .with("target_fpr", r.target_fpr)
                .with("kind", r.kind.name())
                .with("bits_per_key", r.bits_per_key)
                .with("expected_fpr", r.expected_fpr)
                .with("measured_fpr", r.measured_fpr)
                .with("bound_bits_per_key", r.bound_bits_per_key)
                .with("over_bound", r.over_bound)
                .into()
        })
        .collect();
    Value::from(
        Fields::new()
            .with("numbers", Value::List(numbers))
            .with("blocked_k", Value::List(blocked_k))
            .with("beyond_bloom", Value::List(beyond)),
    )
    .into()
}
