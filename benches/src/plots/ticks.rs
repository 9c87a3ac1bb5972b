//! Tick values for log axes. Plotters labels a log axis at powers of ten
//! only, so a panel whose range spans less than a decade shows one label or
//! none; these ticks always give between 3 and 10 labelled values.

/// Mantissas per decade, coarsest first.
const STEPS: [&[f64]; 4] = [
    &[1.0],
    &[1.0, 2.0, 5.0],
    &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0],
    &[
        1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0,
    ],
];

/// Ticks inside `lo..=hi` (both positive): the coarsest mantissa steps that
/// give at least 3, thinned to at most 10; evenly spaced in the log where
/// even the finest steps give fewer than 3.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return vec![];
    }
    for steps in STEPS {
        let ticks = ticks_with(lo, hi, steps);
        if ticks.len() >= 3 {
            let every = ticks.len().div_ceil(10);
            return ticks.into_iter().step_by(every).collect();
        }
    }
    let (a, b) = (lo.ln(), hi.ln());
    (1..=3)
        .map(|i| (a + (b - a) * i as f64 / 4.0).exp())
        .collect()
}

fn ticks_with(lo: f64, hi: f64, steps: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    for e in first..=last {
        for m in steps {
            let v = m * 10f64.powi(e);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push(v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_range_gets_three_to_ten_ticks_inside_it() {
        let ranges = [
            (0.9, 1.3),
            (1.0, 100.0),
            (8.0, 220.0),
            (3e6, 9e6),
            (0.004, 0.04),
            (0.5, 2.0),
            (1e-5, 2.0),
            (20e6, 80e6),
            (1.01, 1.02),
        ];
        for (lo, hi) in ranges {
            let t = log_ticks(lo, hi);
            assert!((3..=10).contains(&t.len()), "{lo}..{hi}: {t:?}");
            assert!(
                t.iter().all(|v| *v >= lo * 0.999 && *v <= hi * 1.001),
                "{t:?}"
            );
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
        }
    }

    #[test]
    fn wide_ranges_use_powers_of_ten() {
        assert_eq!(log_ticks(0.5, 2000.0), vec![1.0, 10.0, 100.0, 1000.0]);
    }
}
