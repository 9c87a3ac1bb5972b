//! The score picker on a simulated tree: flushes add L0 tables, every
//! compaction the picker chooses is applied to the shape (inputs out, the
//! merged bytes cut into tables of the output level), and the picker must
//! always reach a tree it leaves alone, within a bound, with the levels
//! below L0 sorted and disjoint, and never leave L0 at its stop trigger.
//! Both budget modes, many levels, narrow tables, a burst of flushes with
//! no compaction in between (what a slow compaction thread sees).

use super::pick::pick;
use crate::manifest::TableMeta;
use crate::options::Options;

/// Fixed-width keys, so byte order is numeric order.
fn key(n: u64) -> Vec<u8> {
    format!("{n:012}").into_bytes()
}

fn unkey(k: &[u8]) -> u64 {
    std::str::from_utf8(k)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a model key: {k:?}"))
}

struct Model {
    levels: Vec<Vec<TableMeta>>,
    pointers: Vec<Vec<u8>>,
    next_number: u64,
    rng: u64,
}

impl Model {
    fn new(levels: usize, seed: u64) -> Self {
        Self {
            levels: vec![Vec::new(); levels],
            pointers: vec![Vec::new(); levels],
            next_number: 1,
            rng: seed | 1,
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn table(&mut self, level: usize, lo: u64, hi: u64, bytes: u64) -> TableMeta {
        let number = self.next_number;
        self.next_number += 1;
        TableMeta {
            level,
            number,
            file_size: bytes.max(1),
            entries: 1,
            smallest_seq: number,
            largest_seq: number,
            smallest_key: key(lo),
            largest_key: key(hi),
        }
    }

    /// A flush: one L0 table over a random key range, newest first.
    fn flush(&mut self, bytes: u64) {
        let lo = self.rand() % 1_000_000;
        let hi = lo + 1 + self.rand() % 200_000;
        let t = self.table(0, lo, hi, bytes);
        self.levels[0].insert(0, t);
    }

    /// Applies what the picker chose; false when it chose nothing.
    fn compact_once(&mut self, options: &Options) -> bool {
        let Some(c) = pick(&self.levels, options, &self.pointers) else {
            return false;
        };
        if let Some(p) = &c.next_pointer {
            self.pointers[c.level] = p.clone();
        }
        let gone: Vec<u64> = c.all_inputs().map(|t| t.number).collect();
        assert!(!gone.is_empty(), "a compaction without inputs: {c:?}");
        for level in &mut self.levels {
            level.retain(|t| !gone.contains(&t.number));
        }
        let out = c.output_level;
        if c.trivial_move {
            for t in &c.inputs {
                let mut moved = t.clone();
                moved.level = out;
                self.levels[out].push(moved);
            }
        } else {
            let lo = c.all_inputs().map(|t| unkey(&t.smallest_key)).min();
            let hi = c.all_inputs().map(|t| unkey(&t.largest_key)).max();
            let (Some(lo), Some(hi)) = (lo, hi) else {
                unreachable!("inputs checked non-empty")
            };
            // Merging drops a tenth (overwrites and tombstones).
            let bytes: u64 = c.all_inputs().map(|t| t.file_size).sum::<u64>() * 9 / 10;
            let tables = bytes
                .div_ceil(options.target_file_bytes)
                .clamp(1, hi - lo + 1);
            let width = (hi - lo + 1) / tables;
            for i in 0..tables {
                let s = lo + i * width;
                let e = if i + 1 == tables { hi } else { s + width - 1 };
                let t = self.table(out, s, e, bytes / tables);
                self.levels[out].push(t);
            }
        }
        self.levels[out].sort_by(|a, b| a.smallest_key.cmp(&b.smallest_key));
        self.check_sorted(&format!("after {c:?}"));
        true
    }

    fn check_sorted(&self, when: &str) {
        for (level, tables) in self.levels.iter().enumerate().skip(1) {
            for w in tables.windows(2) {
                assert!(
                    w[0].largest_key < w[1].smallest_key,
                    "L{level} overlaps {when}"
                );
            }
        }
    }

    /// Compactions until the picker is done; their number.
    fn settle(&mut self, options: &Options, bound: usize) -> usize {
        let mut n = 0;
        while self.compact_once(options) {
            n += 1;
            assert!(
                n <= bound,
                "no end after {bound} compactions; levels {:?}",
                self.shape()
            );
        }
        n
    }

    fn shape(&self) -> Vec<(usize, u64)> {
        self.levels
            .iter()
            .map(|l| (l.len(), l.iter().map(|t| t.file_size).sum()))
            .collect()
    }
}

fn options(dynamic: bool) -> Options {
    Options {
        l0_compaction_trigger: 4,
        l0_slowdown_trigger: 8,
        l0_stop_trigger: 12,
        l1_bytes: 4_000,
        level_size_ratio: 4,
        num_levels: 7,
        target_file_bytes: 500,
        dynamic_level_bytes: dynamic,
        ..Options::default()
    }
}

#[test]
fn the_picker_always_settles_and_never_leaves_l0_stopped() {
    for dynamic in [true, false] {
        for seed in 1..=6u64 {
            let o = options(dynamic);
            let mut m = Model::new(o.num_levels, seed * 0x9e37_79b9);
            for round in 0..400 {
                // Now and then a burst of flushes to the stop trigger with
                // no compaction in between.
                let flushes = if round % 37 == 0 {
                    o.l0_stop_trigger
                } else {
                    1
                };
                for _ in 0..flushes {
                    let bytes = 800 + m.rand() % 800;
                    m.flush(bytes);
                }
                // While L0 is at the stop trigger the picker must choose
                // something (writes wait for it).
                if m.levels[0].len() >= o.l0_stop_trigger {
                    assert!(
                        pick(&m.levels, &o, &m.pointers).is_some(),
                        "L0 stopped and nothing picked: {:?}",
                        m.shape()
                    );
                }
                m.settle(&o, 5_000);
                // A settled tree has L0 under its trigger.
                assert!(
                    m.levels[0].len() < o.l0_compaction_trigger,
                    "settled with {:?} (dynamic {dynamic}, seed {seed})",
                    m.shape()
                );
            }
        }
    }
}
