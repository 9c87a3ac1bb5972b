//! `get` on stores of 1 million keys over several levels: absent keys,
//! present keys, and with filters off; bloomlsm beside RocksDB with the
//! same settings. Data-block reads per get are printed beside the times.

use std::hint::black_box;

use bloomlsm::FilterKind;
use bloomlsm_bench::engines::{Bloom, Engine, Mirror, Rocks};
use bloomlsm_bench::keys::{absent_key, present_key, value};
use criterion::{Criterion, criterion_group, criterion_main};

const N: u64 = 1_000_000;

fn load(engine: &dyn Engine) {
    for i in 0..N {
        engine
            .put(&present_key(i, 16), &value(i, 100))
            .expect("put");
    }
    engine.settle().expect("settle");
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mirror = Mirror::bench_defaults();
    let off = Mirror {
        bits_per_key: 0.0,
        ..mirror.clone()
    };
    let engines: Vec<Box<dyn Engine>> = vec![
        Box::new(
            Bloom::open(
                "bloomlsm",
                &dir.path().join("a"),
                &mirror,
                FilterKind::Blocked,
                false,
            )
            .expect("open"),
        ),
        Box::new(
            Bloom::open(
                "bloomlsm-nofilter",
                &dir.path().join("b"),
                &off,
                FilterKind::Blocked,
                false,
            )
            .expect("open"),
        ),
        Box::new(Rocks::open("rocksdb", &dir.path().join("c"), &mirror, false).expect("open")),
    ];
    let mut g = c.benchmark_group("engine_get_1m");
    for engine in &engines {
        load(engine.as_ref());
        for (label, present) in [("absent", false), ("present", true)] {
            let before = engine.counters();
            let mut gets = 0u64;
            g.bench_function(format!("{} {label}", engine.name()), |b| {
                b.iter(|| {
                    gets += 1;
                    let i = bloomlsm_bench::keys::mix(gets) % N;
                    let k = if present {
                        present_key(i, 16)
                    } else {
                        absent_key(gets, 16)
                    };
                    black_box(engine.get(&k).expect("get"))
                })
            });
            let reads = engine.counters().data_block_reads - before.data_block_reads;
            println!(
                "{} {label}: {:.4} data-block reads per get",
                engine.name(),
                reads as f64 / gets.max(1) as f64
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
