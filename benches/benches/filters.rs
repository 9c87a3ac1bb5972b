//! Filter micro-benchmarks: insert and contains (present, absent) for our
//! standard and blocked filters beside `fastbloom` at the same bits per key,
//! at 1 thousand, 1 million and 100 million keys (the last far out of cache;
//! set BLOOMLSM_BENCH_HUGE=1 to include it, it needs ~250 MB and minutes).

use std::hint::black_box;

use bloomlsm_filter::{BlockedBloomFilter, BloomFilter, Filter, InsertFilter, KeyHash};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_le_bytes());
    k[8..].copy_from_slice(&(!i).to_le_bytes());
    k
}

fn sizes() -> Vec<u64> {
    let mut v = vec![1_000, 1_000_000];
    if std::env::var_os("BLOOMLSM_BENCH_HUGE").is_some() {
        v.push(100_000_000);
    }
    v
}

fn bench(c: &mut Criterion) {
    let bits = 10.0;
    for n in sizes() {
        let mut standard = BloomFilter::with_bits_per_key(n, bits);
        let mut blocked = BlockedBloomFilter::with_bits_per_key(n, bits);
        let mut fast = fastbloom::BloomFilter::with_num_bits((n as f64 * bits) as usize)
            .expected_items(n as usize);
        for i in 0..n {
            standard.insert(&key(i));
            blocked.insert(&key(i));
            fast.insert(&key(i));
        }
        let mut g = c.benchmark_group(format!("filter_{n}_keys"));
        g.throughput(Throughput::Elements(1));
        let mut i = 0u64;
        g.bench_function(BenchmarkId::new("contains_absent", "standard"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(standard.contains(&key(n + i)))
            })
        });
        g.bench_function(BenchmarkId::new("contains_absent", "blocked"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(blocked.contains(&key(n + i)))
            })
        });
        g.bench_function(BenchmarkId::new("contains_absent", "fastbloom"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(fast.contains(&key(n + i)))
            })
        });
        g.bench_function(BenchmarkId::new("contains_present", "blocked"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(blocked.contains(&key(i % n)))
            })
        });
        g.bench_function(BenchmarkId::new("contains_present", "fastbloom"), |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(fast.contains(&key(i % n)))
            })
        });
        g.bench_function(BenchmarkId::new("contains_hash_absent", "blocked"), |b| {
            let hashes: Vec<KeyHash> = (0..1024).map(|j| KeyHash::of(&key(n + j))).collect();
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(blocked.contains_hash(hashes[(i & 1023) as usize]))
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

criterion_group!(benches, bench);
criterion_main!(benches);
