//! `lecture`: the lecture's numbers beside the formulas and real filters.

use bloomlsm_filter::lecture::lecture_report;

use super::Outcome;
use crate::output::{Fields, Value};

/// One row per number: where it comes from, what it is, the lecture's
/// figure, the formula's, the measured one, and the unit.
pub fn run(items: u64, probes: u64) -> Outcome {
    let rows: Vec<Value> = lecture_report(items, probes)
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
    Value::List(rows).into()
}
