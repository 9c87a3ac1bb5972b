//! Ribbon against the blocked Bloom filter, in one process: the speed
//! targets (construction at most 4x the blocked filter's time per key,
//! an absent-key query at most 2x out of cache) measured as ratios within
//! one run.
//!
//! `cargo bench -p bloomlsm-filter --bench ribbon`
//!
//! - `ribbon_build_{n}_keys`: a table filter of n keys at 10 bits per key
//!   from the keys' hashes (what `FilterBuilder::finish` does), blocked
//!   (`with_bits_per_key` and one insert per hash) against Ribbon.
//! - `ribbon_query_{size}`: `contains_hash` of absent keys, the hash given
//!   (a splitmix64 of a counter, so probes are random and cost a few
//!   instructions), on filters of 2 GiB each at 10 bits per key
//!   (`BLOOMLSM_BENCH_FILTER_MIB` to change it): far larger than any last
//!   level cache, so nearly every probe misses it. `independent` lookups may
//!   overlap in the processor; `chained` makes each probe's hash depend on
//!   the previous answer (the latency of one, as far as the processor
//!   cannot guess the answer). Filters that large take minutes to build
//!   (and the Ribbon one about 25 bytes of construction memory per key), so
//!   both are decoded from bytes with random contents laid out exactly as
//!   built ones (`support`): an absent key meets the same work and memory
//!   accesses either way (each Ribbon column is a parity it matches with
//!   probability 1/2; blocked bits are set with probability 7/16, a built
//!   filter's 0.45). Both are made the same way one after the other, as
//!   memory allocated at different times and ways was seen to differ by
//!   up to 2x in this virtual machine. `in_cache` repeats both on
//!   built filters of 100,000 keys.

use std::hint::black_box;

mod support;

use bloomlsm_filter::{BlockedBloomFilter, Filter, InsertFilter, KeyHash, RibbonFilter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const BITS_PER_KEY: f64 = 10.0;

use support::{random_blocked, random_ribbon, splitmix};

fn hashes(n: u64, tag: u64) -> Vec<KeyHash> {
    (0..n)
        .map(|i| KeyHash::from_raw(splitmix(i ^ (tag << 48))))
        .collect()
}

fn builds(c: &mut Criterion) {
    for n in [10_000u64, 100_000, 1_000_000] {
        let present = hashes(n, 1);
        let mut g = c.benchmark_group(format!("ribbon_build_{n}_keys"));
        g.throughput(Throughput::Elements(n));
        g.sample_size(10);
        g.bench_function("blocked", |b| {
            b.iter(|| {
                let mut f = BlockedBloomFilter::with_bits_per_key(n, BITS_PER_KEY);
                present.iter().for_each(|&h| f.insert_hash(h));
                black_box(f)
            })
        });
        g.bench_function("ribbon", |b| {
            b.iter(|| black_box(RibbonFilter::from_hashes(&present, BITS_PER_KEY)))
        });
        g.finish();
    }
}

fn query_pair(c: &mut Criterion, name: &str, blocked: &BlockedBloomFilter, ribbon: &RibbonFilter) {
    let mut g = c.benchmark_group(format!("ribbon_query_{name}"));
    g.throughput(Throughput::Elements(1));
    let filters: [(&str, &dyn Filter); 2] = [("blocked", blocked), ("ribbon", ribbon)];
    let mut i = 1u64 << 62;
    for (kind, f) in filters {
        g.bench_function(BenchmarkId::new("independent", kind), |b| {
            b.iter(|| {
                i += 1;
                black_box(f.contains_hash(KeyHash::from_raw(splitmix(i))))
            })
        });
    }
    for (kind, f) in filters {
        g.bench_function(BenchmarkId::new("chained", kind), |b| {
            b.iter(|| {
                // The next probe depends on this answer: no two overlap.
                let maybe = f.contains_hash(KeyHash::from_raw(splitmix(i)));
                i += 1 + u64::from(maybe);
            })
        });
    }
    g.finish();
}

fn queries(c: &mut Criterion) {
    let n = 100_000;
    let present = hashes(n, 2);
    let mut blocked = BlockedBloomFilter::with_bits_per_key(n, BITS_PER_KEY);
    present.iter().for_each(|&h| blocked.insert_hash(h));
    let ribbon = RibbonFilter::from_hashes(&present, BITS_PER_KEY);
    query_pair(c, "in_cache", &blocked, &ribbon);
    drop((blocked, ribbon));

    let mib: u64 = std::env::var("BLOOMLSM_BENCH_FILTER_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2048);
    let items = (mib << 23) as f64 / BITS_PER_KEY;
    let items = items as u64;
    let blocked = random_blocked(items, BITS_PER_KEY);
    let ribbon = random_ribbon(items, BITS_PER_KEY);
    println!(
        "out of cache: {items} keys, blocked {} MiB, ribbon {} MiB",
        blocked.memory_bytes() >> 20,
        ribbon.memory_bytes() >> 20
    );
    query_pair(c, &format!("{mib}mib"), &blocked, &ribbon);
}

criterion_group!(benches, queries, builds);
criterion_main!(benches);
