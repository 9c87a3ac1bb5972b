//! Filter micro-benchmarks.
//!
//! - `filter_{n}_keys`: insert and contains (present, absent) for our
//!   standard, blocked and Ribbon filters beside `fastbloom` at the same 10
//!   bits per key (Ribbon also at 7 bits per key, about the blocked filter's
//!   rate), at 1 thousand, 1 million and 100 million keys (the last far out
//!   of cache; set BLOOMLSM_BENCH_HUGE=1 to include it, it needs about 5 GB
//!   and minutes). `contains_absent_chained` makes each lookup's key depend
//!   on the previous answer, so lookups cannot overlap: the latency of one,
//!   where the others measure throughput.
//! - `filter_build_{n}_keys`: building a table filter of n keys at 10 bits
//!   per key, blocked Bloom against Ribbon, from the keys' hashes (what
//!   `FilterBuilder::finish` does) and from the keys (hashing each too).
//! - Before the timings: Ribbon's bits per key against log2(1/eps) for eps
//!   from 5% to 0.01%, measured on built filters of 1 million keys (10
//!   million with BLOOMLSM_BENCH_HUGE=1). Not a timing: printed, and asserted
//!   in `filter/tests/filter_suite/ribbon_space.rs`.

use std::hint::black_box;

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, Filter, FilterBuilder, FilterKind, InsertFilter,
    KeyHash, RibbonFilter,
};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&(!i).to_le_bytes());
    k
}

fn huge() -> bool {
    std::env::var_os("BLOOMLSM_BENCH_HUGE").is_some()
}

fn sizes() -> Vec<u64> {
    let mut v = vec![1_000, 1_000_000];
    if huge() {
        v.push(100_000_000);
    }
    v
}

fn hashes(n: u64) -> Vec<KeyHash> {
    (0..n).map(|i| KeyHash::of(&key(i))).collect()
}

/// Ribbon's space against the bound, printed before the timings.
fn ribbon_space() {
    let n = if huge() { 10_000_000 } else { 1_000_000 };
    let present = hashes(n);
    println!("ribbon space, {n} keys: bits per key (all bytes) against log2(1/eps), eps measured");
    for (eps, probes) in [
        (0.05, 1_000_000u64),
        (0.01, 2_000_000),
        (0.001, 10_000_000),
        (0.0001, 40_000_000),
    ] {
        let f = RibbonFilter::from_hashes_with_fpr(&present, eps);
        let bits = (f.to_bytes().len() * 8) as f64 / n as f64;
        let hits = (0..probes)
            .filter(|&i| f.contains_hash(KeyHash::of(&key(n + i))))
            .count() as f64;
        let measured = hits / probes as f64;
        println!(
            "  eps {eps:>7}: {bits:.3} bits/key, measured {:.5}%, log2(1/measured) {:.3}, ratio {:.4}",
            measured * 100.0,
            -measured.log2(),
            bits / -measured.log2()
        );
    }
}

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

fn absent<F: Filter>(g: &mut Group<'_>, name: &str, f: &F, n: u64, i: &mut u64) {
    g.bench_function(BenchmarkId::new("contains_absent", name), |b| {
        b.iter(|| {
            *i = i.wrapping_add(1);
            black_box(f.contains(&key(n + *i)))
        })
    });
}

fn chained_present_and_hash<F: Filter>(g: &mut Group<'_>, name: &str, f: &F, n: u64, i: &mut u64) {
    g.bench_function(BenchmarkId::new("contains_absent_chained", name), |b| {
        b.iter(|| {
            // The next key depends on this answer: no two lookups overlap.
            let maybe = f.contains(&key(n + *i));
            *i = i.wrapping_add(1 + u64::from(maybe));
        })
    });
    g.bench_function(BenchmarkId::new("contains_present", name), |b| {
        b.iter(|| {
            *i = i.wrapping_add(1);
            black_box(f.contains(&key(*i % n)))
        })
    });
    let hashes: Vec<KeyHash> = (0..1024).map(|j| KeyHash::of(&key(n + j))).collect();
    g.bench_function(BenchmarkId::new("contains_hash_absent", name), |b| {
        b.iter(|| {
            *i = i.wrapping_add(1);
            black_box(f.contains_hash(hashes[(*i & 1023) as usize]))
        })
    });
}

fn lookups(c: &mut Criterion) {
    ribbon_space();
    let bits = 10.0;
    for n in sizes() {
        let present = hashes(n);
        let mut standard = BloomFilter::with_bits_per_key(n, bits);
        let mut blocked = BlockedBloomFilter::with_bits_per_key(n, bits);
        let mut fast = fastbloom::BloomFilter::with_num_bits((n as f64 * bits) as usize)
            .expected_items(n as usize);
        for (i, &h) in present.iter().enumerate() {
            standard.insert_hash(h);
            blocked.insert_hash(h);
            fast.insert(&key(i as u64));
        }
        let ribbon = RibbonFilter::from_hashes(&present, bits);
        let ribbon7 = RibbonFilter::from_hashes(&present, 7.0);
        drop(present);
        let mut g = c.benchmark_group(format!("filter_{n}_keys"));
        g.throughput(Throughput::Elements(1));
        let mut i = 0u64;
        absent(&mut g, "standard", &standard, n, &mut i);
        absent(&mut g, "blocked", &blocked, n, &mut i);
        absent(&mut g, "ribbon", &ribbon, n, &mut i);
        absent(&mut g, "ribbon_7bpk", &ribbon7, n, &mut i);
        g.bench_function(BenchmarkId::new("contains_absent", "fastbloom"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(fast.contains(&key(n + i)))
            })
        });
        chained_present_and_hash(&mut g, "blocked", &blocked, n, &mut i);
        chained_present_and_hash(&mut g, "ribbon", &ribbon, n, &mut i);
        g.bench_function(BenchmarkId::new("contains_present", "fastbloom"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(fast.contains(&key(i % n)))
            })
        });
        g.bench_function(BenchmarkId::new("insert", "blocked"), |b| {
            let mut f = BlockedBloomFilter::with_bits_per_key(n, bits);
            b.iter(|| {
                i = i.wrapping_add(1);
                f.insert(&key(i));
            })
        });
        g.bench_function(BenchmarkId::new("insert", "fastbloom"), |b| {
            let mut f = fastbloom::BloomFilter::with_num_bits((n as f64 * bits) as usize)
                .expected_items(n as usize);
            b.iter(|| {
                i = i.wrapping_add(1);
                f.insert(&key(i));
            })
        });
        g.finish();
    }
}

fn builds(c: &mut Criterion) {
    let mut sizes = vec![10_000u64, 100_000, 1_000_000];
    if huge() {
        sizes.push(10_000_000);
    }
    for n in sizes {
        let present = hashes(n);
        let mut g = c.benchmark_group(format!("filter_build_{n}_keys"));
        g.throughput(Throughput::Elements(n));
        g.sample_size(10);
        for kind in [FilterKind::Blocked, FilterKind::Ribbon] {
            g.bench_function(BenchmarkId::new("from_hashes", kind.name()), |b| {
                b.iter(|| black_box(AnyFilter::build(kind, &present, 10.0)))
            });
            g.bench_function(BenchmarkId::new("from_keys", kind.name()), |b| {
                b.iter_batched(
                    || FilterBuilder::new(kind, 10.0),
                    |mut builder| {
                        for i in 0..n {
                            builder.add_hash(KeyHash::of(&key(i)));
                        }
                        black_box(builder.finish())
                    },
                    BatchSize::LargeInput,
                )
            });
        }
        g.finish();
    }
}

criterion_group!(benches, lookups, builds);
criterion_main!(benches);
