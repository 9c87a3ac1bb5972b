//! Deep trees of narrow tables whose keys defeat an eight-byte prefix: a
//! sorted level's search compares the first eight bytes of each table's
//! largest key (zero-padded) and only where those are equal the whole
//! keys, so here many tables share those bytes: keys with a common prefix
//! of eight and sixteen bytes, keys shorter than eight bytes that differ
//! only by trailing `0x00` bytes (`a`, `a\0`, `a\0\0` pad to the same
//! eight bytes), and keys with `0x00`, `0x80` and `0xff` anywhere.
//!
//! Puts, deletes, flushes, compactions the store chooses (and trivial
//! moves), filter rebuilds at random policies, snapshots held across many
//! writes, and close-and-reopen, with every key, and keys just beside
//! each one, compared with a `BTreeMap` (and each held snapshot's copy).
//! A get of a key below or above every key ever written must not probe a
//! table at all.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm::{Db, FilterPolicy, Options, Snapshot, TraceSource};
use common::{Model, Rng, scratch_dir};

/// Every string over `alphabet` of a length in `lengths`, each prefixed.
fn strings(
    prefix: &[u8],
    alphabet: &[u8],
    lengths: std::ops::RangeInclusive<usize>,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut level = vec![prefix.to_vec()];
    for len in 0..=*lengths.end() {
        if lengths.contains(&len) {
            out.extend(level.iter().cloned());
        }
        level = level
            .iter()
            .flat_map(|k| {
                alphabet.iter().map(move |&b| {
                    let mut k = k.clone();
                    k.push(b);
                    k
                })
            })
            .collect();
    }
    out
}

/// The keys written. None is `[0x00]` or above `[0xff; 8, 0x00]`, so
/// [`LOWEST`] and [`HIGHEST`] are outside every table.
fn universe() -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    // One eight-byte fence for all of them.
    keys.extend(strings(b"prefix!!", &[0x00, 0x01, b'm', 0xff], 0..=3));
    // A sixteen-byte common prefix.
    keys.extend((0..160u32).map(|i| format!("0123456789abcdef{i:04}").into_bytes()));
    // Short keys: many pad to the same fence (`a`, `a\0`, `a\0\0`).
    keys.extend(strings(b"", &[0x00, 0x01, b'a', 0x80, 0xff], 1..=3));
    // Seven bytes and the same followed by zeros: one fence.
    for zeros in 0..4 {
        let mut k = b"zzzzzzz".to_vec();
        k.resize(7 + zeros, 0);
        keys.push(k);
    }
    keys.push(b"ab\0\0cd\0".to_vec());
    keys.push(b"ab\0\0cd\0\0".to_vec());
    keys.push(b"ab\0\0cd\0\0\x01".to_vec());
    keys.push(b"ab\0\0cd\0\x01".to_vec());
    keys.push(vec![0xff; 8]);
    keys.push([&[0xffu8; 8][..], &[0x00]].concat());
    keys.retain(|k| k.as_slice() != LOWEST);
    keys.sort();
    keys.dedup();
    keys
}

/// Below every written key, with the fence of `[0x00, 0x00]`.
const LOWEST: &[u8] = &[0x00];
/// Above every written key, with the fence of `[0xff; 8]`.
const HIGHEST: &[u8] = &[0xff; 9];

/// `k` and keys beside it that may or may not be written.
fn neighbours(k: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![k.to_vec(), [k, &[0x00]].concat(), [k, &[0xff]].concat()];
    if k.len() > 1 {
        out.push(k[..k.len() - 1].to_vec());
    }
    if let Some(&last) = k.last()
        && last < 0xff
    {
        let mut up = k.to_vec();
        *up.last_mut().unwrap() = last + 1;
        out.push(up);
    }
    if k.len() > 8 {
        out.push(k[..8].to_vec());
    }
    out
}

fn options(rng: &mut Rng) -> Options {
    Options {
        memtable_bytes: 512 + rng.below(1024) as usize,
        target_file_bytes: 256 + rng.below(768),
        l1_bytes: 768 + rng.below(1024),
        level_size_ratio: 3,
        num_levels: 7,
        block_size: [64, 128, 256][rng.below(3) as usize],
        l0_compaction_trigger: 2 + rng.below(3) as usize,
        block_cache_bytes: 16 << 10,
        background_work: false,
        ..Options::default().with_bits_per_key([0.0, 2.0, 10.0][rng.below(3) as usize])
    }
}

fn policy(rng: &mut Rng) -> FilterPolicy {
    match rng.below(3) {
        0 => FilterPolicy::Uniform {
            bits_per_key: [0.0, 1.5, 4.0, 12.0][rng.below(4) as usize],
        },
        1 => FilterPolicy::PerLevel((0..7).map(|_| rng.below(14) as f64).collect()),
        _ => FilterPolicy::Optimized {
            bits_per_key: 1.0 + rng.below(10) as f64,
        },
    }
}

/// Every key and its neighbours, read now and at each held snapshot.
fn check_all(db: &Db, keys: &[Vec<u8>], model: &Model, snapshots: &[(Snapshot, Model)], at: &str) {
    for k in keys {
        for probe in neighbours(k) {
            let want = model.get(&probe).cloned();
            let got = db.get(&probe).unwrap();
            if got != want {
                let (_, trace) = db.get_traced(&probe).unwrap();
                let tables: Vec<u64> = db.stats().levels.iter().map(|l| l.tables).collect();
                panic!(
                    "{at}: get {probe:?} = {got:?}, want {want:?}\n  trace {:?}\n  tables {tables:?}",
                    trace.steps
                );
            }
            for (i, (snapshot, frozen)) in snapshots.iter().enumerate() {
                let want = frozen.get(&probe).cloned();
                let got = snapshot.get(&probe).unwrap();
                assert_eq!(got, want, "{at}: snapshot {i} get {probe:?}");
            }
        }
    }
    for outside in [LOWEST, HIGHEST] {
        let (got, trace) = db.get_traced(outside).unwrap();
        assert_eq!(got, None, "{at}: {outside:?}");
        // L0 tables are each listed, with the filter not asked; a deeper
        // level has no candidate at all.
        let probed: Vec<_> = trace
            .steps
            .iter()
            .filter(|s| match s.source {
                TraceSource::Table { level: 0, .. } => {
                    s.block.is_some() || format!("{:?}", s.filter) != "Some(NotAsked)"
                }
                TraceSource::Table { .. } => true,
                _ => false,
            })
            .collect();
        assert!(
            probed.is_empty(),
            "{at}: {outside:?} is outside every table, yet probed {probed:?}"
        );
    }
}

/// One case: returns the deepest level that held a table.
fn run_case(seed: u64, ops: usize) -> usize {
    let mut rng = Rng(seed);
    let keys = universe();
    let options = options(&mut rng);
    let dir = scratch_dir();
    let mut db = Some(Db::open(dir.path(), options.clone()).unwrap());
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut deepest = 0;
    for op in 0..ops {
        let d = db.as_ref().unwrap();
        // Writes cluster in a window drifting over the key order, so each
        // narrow table spans a few neighbouring keys of one family.
        let window = 48u64;
        let start = (op as u64 * 7 / 40) % keys.len() as u64;
        let k = &keys[((start + rng.below(window)) % keys.len() as u64) as usize];
        let at = format!("seed {seed} op {op}");
        match rng.below(100) {
            0..=54 => {
                let v = format!("v{op}-{}", ".".repeat(rng.below(24) as usize)).into_bytes();
                d.put(k, &v).unwrap();
                model.insert(k.clone(), v);
            }
            55..=84 => {
                d.delete(k).unwrap();
                model.remove(k);
            }
            85..=89 => {
                let got = d.get(k).unwrap();
                assert_eq!(got, model.get(k).cloned(), "{at}: get {k:?}");
            }
            90..=92 => {
                if snapshots.len() == 2 {
                    snapshots.remove(rng.below(2) as usize);
                }
                snapshots.push((d.snapshot(), model.clone()));
            }
            93..=95 => d.flush().unwrap(),
            96..=97 => d.rebuild_filters(policy(&mut rng)).unwrap(),
            _ => {
                snapshots.clear();
                db.take().unwrap().close().unwrap();
                db = Some(Db::open(dir.path(), options.clone()).unwrap());
            }
        }
        let d = db.as_ref().unwrap();
        if let Some(l) = d.stats().levels.iter().rposition(|l| l.tables > 0) {
            deepest = deepest.max(l);
        }
        if op % 400 == 399 {
            check_all(d, &keys, &model, &snapshots, &at);
        }
    }
    let d = db.take().unwrap();
    check_all(&d, &keys, &model, &snapshots, &format!("seed {seed} end"));
    snapshots.clear();
    d.close().unwrap();
    let d = Db::open(dir.path(), options).unwrap();
    check_all(&d, &keys, &model, &[], &format!("seed {seed} reopened"));
    deepest
}

#[test]
fn keys_sharing_eight_byte_prefixes_read_as_the_model_on_deep_trees() {
    let seeds: Vec<u64> = match std::env::var("BLOOMLSM_FENCE_SEED") {
        Ok(s) => vec![s.parse().unwrap()],
        Err(_) => (1..=4).collect(),
    };
    for seed in seeds {
        let deepest = run_case(seed, 6000);
        assert!(
            deepest >= 3,
            "seed {seed}: the tree reached only L{deepest}"
        );
    }
}
