//! Prints `BLOCKED_K_THRESHOLDS_MILLIBITS` (filter/src/math/blocked.rs): for
//! each k, the bits per key at which k + 1 probes become better than k in a
//! 512-bit-block filter, by the exact expected rate. Bisection to 0.001
//! bits per key: `cargo run --release -p bloomlsm-filter --example blocked_k_table`.

use bloomlsm_filter::BLOCK_BITS;
use bloomlsm_filter::math::{MAX_HASHES, blocked_false_positive_rate_exact};

/// Whether k + 1 probes beat k at `bits_per_key`.
fn more_is_better(k: u32, bits_per_key: f64) -> bool {
    blocked_false_positive_rate_exact(bits_per_key, k + 1, BLOCK_BITS)
        < blocked_false_positive_rate_exact(bits_per_key, k, BLOCK_BITS)
}

fn main() {
    let mut thresholds = Vec::new();
    let mut low = 0.5;
    for k in 1..MAX_HASHES {
        // The crossover of k and k + 1 lies above the previous one.
        let mut high = low + 1.0;
        while !more_is_better(k, high) {
            high += 1.0;
        }
        while high - low > 0.000_5 {
            let mid = (low + high) / 2.0;
            if more_is_better(k, mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        // The largest millibits at which k is still at least as good.
        let millibits = (low * 1000.0).floor() as u32;
        eprintln!("k={k} -> {}: at {:.3} bits per key", k + 1, low);
        thresholds.push(millibits);
    }
    let body: Vec<String> = thresholds.iter().map(|t| t.to_string()).collect();
    println!(
        "pub const BLOCKED_K_THRESHOLDS_MILLIBITS: [u32; {}] = [{}];",
        thresholds.len(),
        body.join(", ")
    );
}
