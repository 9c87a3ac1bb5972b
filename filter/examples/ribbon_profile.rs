//! Times Ribbon construction and lookups against the blocked Bloom filter
//! in one process (a quick loop for profiling; the criterion benches in
//! `benches/` are the measurements of record).
//!
//! `cargo run --release -p bloomlsm-filter --example ribbon_profile -- [keys] [what]`
//! where `what` is `build`, `lookup`, `all` or `once` (one Ribbon build) (default `all`, 1,000,000 keys).

use std::hint::black_box;
use std::time::Instant;

use bloomlsm_filter::{BlockedBloomFilter, Filter, InsertFilter, KeyHash, RibbonFilter};

fn hashes(n: u64, offset: u64) -> Vec<KeyHash> {
    (offset..offset + n)
        .map(|i| KeyHash::of(&i.to_le_bytes()))
        .collect()
}

/// Nanoseconds per element of the fastest of `reps` runs of `f`.
fn best_ns(reps: u32, elements: u64, mut f: impl FnMut()) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    best * 1e9 / elements as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let what = args.get(2).map_or("all", String::as_str);
    let present = hashes(n, 0);
    let reps = if n >= 10_000_000 { 3 } else { 7 };
    if what == "once" {
        // One Ribbon build, for `valgrind --tool=callgrind`.
        black_box(RibbonFilter::from_hashes(&present, 10.0));
        return;
    }
    if what == "build" || what == "all" {
        let blocked = best_ns(reps, n, || {
            let mut f = BlockedBloomFilter::with_bits_per_key(n, 10.0);
            present.iter().for_each(|&h| f.insert_hash(h));
            black_box(f);
        });
        let ribbon = best_ns(reps, n, || {
            black_box(RibbonFilter::from_hashes(&present, 10.0));
        });
        println!(
            "build {n} keys: blocked {blocked:.2} ns/key, ribbon {ribbon:.2} ns/key, ratio {:.2}",
            ribbon / blocked
        );
    }
    if what == "lookup" || what == "all" {
        let mut blocked = BlockedBloomFilter::with_bits_per_key(n, 10.0);
        present.iter().for_each(|&h| blocked.insert_hash(h));
        let ribbon = RibbonFilter::from_hashes(&present, 10.0);
        let probes = hashes(4_000_000, n);
        let count = probes.len() as u64;
        let time = |f: &dyn Filter| {
            best_ns(reps, count, || {
                let hits = probes.iter().filter(|&&h| f.contains_hash(h)).count();
                black_box(hits);
            })
        };
        let (b, r) = (time(&blocked), time(&ribbon));
        println!(
            "absent lookup, hash given, {n} keys: blocked {b:.2} ns, ribbon {r:.2} ns, ratio {:.2}",
            r / b
        );
        let present_probes: Vec<KeyHash> = present.iter().step_by(7).copied().collect();
        let count = present_probes.len() as u64;
        let time = |f: &dyn Filter| {
            best_ns(reps, count, || {
                let hits = present_probes
                    .iter()
                    .filter(|&&h| f.contains_hash(h))
                    .count();
                black_box(hits);
            })
        };
        let (b, r) = (time(&blocked), time(&ribbon));
        println!(
            "present lookup, hash given, {n} keys: blocked {b:.2} ns, ribbon {r:.2} ns, ratio {:.2}",
            r / b
        );
    }
}
