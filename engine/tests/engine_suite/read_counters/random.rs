//! Random stores against ground truth: random key shapes (shared 8-byte
//! prefixes that defeat the level fences, bytes 0x00 and 0xff, long keys),
//! tiny blocks (a key's versions spread over many), random options (filter
//! kind and policy, cache size, levels, dynamic level sizes) and random
//! writes, deletes, snapshots, flushes, filter rebuilds and reopens (with
//! another filter kind: tables of mixed kinds); every
//! get of a random key, at the latest sequence and at each snapshot, must
//! match the tree's files, the reads logged and the counters' deltas.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::{common, read_truth};

use std::sync::Arc;

use bloomlsm::{Db, FilterKind, FilterPolicy, Options};

use common::scratch_dir;
use read_truth::{At, CountingFs, Tree, check_get};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_key(rng: &mut Rng) -> Vec<u8> {
    let i = rng.below(300);
    match i % 4 {
        // Equal first eight bytes: the fences tie, whole keys decide.
        0 => format!("prefix--{i:04}").into_bytes(),
        1 => {
            let mut k = vec![0xff; 1 + (i as usize % 9)];
            k.push((i % 256) as u8);
            k
        }
        2 => vec![b'm', 0, (i % 256) as u8, 0],
        _ => format!("{}{i}", "x".repeat((i as usize * 7) % 120)).into_bytes(),
    }
}

fn options(rng: &mut Rng) -> Options {
    let kind = [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ][rng.below(3) as usize];
    let policy = match rng.below(4) {
        0 => FilterPolicy::Uniform { bits_per_key: 0.0 },
        1 => FilterPolicy::Uniform {
            bits_per_key: 2.0 + rng.below(8) as f64,
        },
        2 => FilterPolicy::Optimized {
            bits_per_key: 3.0 + rng.below(6) as f64,
        },
        _ => FilterPolicy::PerLevel(vec![4.0, 0.0, 3.0, 1.5]),
    };
    Options {
        filter_kind: kind,
        filter_policy: policy,
        block_cache_bytes: [0, 500, 4 << 10, 1 << 20][rng.below(4) as usize],
        block_size: [64, 128, 512][rng.below(3) as usize],
        memtable_bytes: 8 << 10,
        target_file_bytes: 1 << 10,
        l1_bytes: 4 << 10,
        level_size_ratio: 2,
        dynamic_level_bytes: rng.below(2) == 0,
        num_levels: 3 + rng.below(5) as usize,
        background_work: false,
        max_open_files: [None, None, Some(1), Some(3)][rng.below(4) as usize],
        ..Options::default()
    }
}

fn case(seed: u64) {
    let mut rng = Rng(seed);
    let dir = scratch_dir();
    let fs = Arc::new(CountingFs::default());
    let options = options(&mut rng);
    let mut db = Db::open_with_fs(dir.path(), options.clone(), fs.clone()).unwrap();
    let mut snaps = Vec::new();
    for round in 0..8 {
        for _ in 0..rng.below(400) {
            let k = random_key(&mut rng);
            if rng.below(5) == 0 {
                db.delete(&k).unwrap();
            } else {
                db.put(
                    &k,
                    format!("{round}").repeat(rng.below(20) as usize).as_bytes(),
                )
                .unwrap();
            }
            if rng.below(150) == 0 {
                snaps.push(db.snapshot());
            }
        }
        db.flush().unwrap();
        match rng.below(6) {
            0 if snaps.is_empty() => {
                // Reopened with another filter kind: tables of both kinds.
                db.close().unwrap();
                let kinds = [
                    FilterKind::Blocked,
                    FilterKind::Standard,
                    FilterKind::Ribbon,
                ];
                let reopened = Options {
                    filter_kind: kinds[rng.below(3) as usize],
                    ..options.clone()
                };
                db = Db::open_with_fs(dir.path(), reopened, fs.clone()).unwrap();
            }
            1 => db
                .rebuild_filters(FilterPolicy::Uniform {
                    bits_per_key: rng.below(7) as f64,
                })
                .unwrap(),
            2 => snaps.clear(),
            _ => {}
        }
        let tree = Tree::read(dir.path());
        for _ in 0..150 {
            let mut k = random_key(&mut rng);
            if rng.below(3) == 0 {
                k.push(rng.below(256) as u8);
            }
            check_get(&db, &fs, &tree, &k, &At::Latest);
            for s in &snaps {
                check_get(&db, &fs, &tree, &k, &At::Snapshot(s));
            }
        }
    }
    drop(snaps);
    db.close().unwrap();
}

#[test]
fn random_stores() {
    let seeds = std::env::var("READ_TRUTH_SEEDS").map_or(40, |s| s.parse().unwrap());
    for seed in 0..seeds {
        println!("seed {seed}");
        case(seed);
    }
}
