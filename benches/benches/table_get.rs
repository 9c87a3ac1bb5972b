//! Point gets on one table of 1 million entries: absent keys (the filter
//! answers, no read), present keys from the block cache, and present keys
//! cold (no cache: one positioned read each).

use std::hint::black_box;
use std::sync::Arc;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{BlockCache, EntryKind, Table, TableBuilder, TableOptions};
use criterion::{Criterion, criterion_group, criterion_main};

const N: u64 = 1_000_000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:012}").into_bytes()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.sst");
    let file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    let mut b = TableBuilder::new(
        file,
        &path,
        TableOptions {
            filter_kind: FilterKind::Blocked,
            ..TableOptions::default()
        },
    );
    for i in 0..N {
        b.add(&key(i), i + 1, EntryKind::Put, &[7u8; 100])
            .expect("add");
    }
    b.finish().expect("finish");
    let cached =
        Table::open_path(&path, 1, Some(Arc::new(BlockCache::new(256 << 20)))).expect("open");
    let cold = Table::open_path(&path, 2, None).expect("open");
    let absent: Vec<(Vec<u8>, KeyHash)> = (0..4096u64)
        .map(|i| {
            let k = format!("key{:012}x", i * 241).into_bytes();
            let h = KeyHash::of(&k);
            (k, h)
        })
        .collect();
    let present: Vec<(Vec<u8>, KeyHash)> = (0..4096u64)
        .map(|i| {
            let k = key(i * 241);
            let h = KeyHash::of(&k);
            (k, h)
        })
        .collect();
    for (k, h) in &present {
        cached.get(k, *h, u64::MAX >> 8).expect("warm");
    }
    let mut g = c.benchmark_group("table_get_1m");
    let mut i = 0usize;
    g.bench_function("absent (filter says no)", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            let (k, h) = &absent[i];
            black_box(cached.get(k, *h, u64::MAX >> 8).expect("get"))
        })
    });
    g.bench_function("present (block cache hit)", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            let (k, h) = &present[i];
            black_box(cached.get(k, *h, u64::MAX >> 8).expect("get"))
        })
    });
    g.bench_function("present (cold, positioned read)", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            let (k, h) = &present[i];
            black_box(cold.get(k, *h, u64::MAX >> 8).expect("get"))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
