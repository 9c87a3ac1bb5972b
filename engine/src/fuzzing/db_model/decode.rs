//! A [`Case`] from arbitrary bytes, for the fuzz target and the property
//! test: every byte string decodes (missing bytes read as zero, and
//! decoding stops when the bytes run out), so the fuzzer's mutations and
//! proptest's shrinking both move through cases.

use std::ops::Bound;

use crate::FilterKind;

use super::ops::{Case, FilterConfig, HOT_KEYS, KeyId, KeyRange, Op, PolicySpec, Shape};

/// Most operations decoded from one input.
pub const MAX_OPS: usize = 2_000;

/// Reads bytes in order; zero past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A hot key for bytes below 112 (44%), else any key.
    fn key(&mut self) -> KeyId {
        let b = self.byte();
        if b < 112 {
            HOT_KEYS[usize::from(b) % HOT_KEYS.len()]
        } else {
            b
        }
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// 0 to 159 bytes one by one (127, 128 and 129 among them, around the
    /// 128-byte blocks), then 164 to 544 in steps of 4.
    fn value_len(&mut self) -> u16 {
        let b = u16::from(self.byte());
        if b < 160 { b } else { 160 + (b - 159) * 4 }
    }

    fn bound(&mut self) -> Bound<KeyId> {
        let tag = self.byte();
        match tag % 3 {
            0 => Bound::Included(self.key()),
            1 => Bound::Excluded(self.key()),
            _ => Bound::Unbounded,
        }
    }

    fn range(&mut self) -> KeyRange {
        KeyRange {
            start: self.bound(),
            end: self.bound(),
        }
    }

    fn policy(&mut self) -> PolicySpec {
        match self.byte() % 3 {
            0 => PolicySpec::Uniform(self.byte()),
            1 => PolicySpec::Optimized(self.byte()),
            _ => {
                let levels = 1 + usize::from(self.byte() % 4);
                PolicySpec::PerLevel((0..levels).map(|_| self.byte()).collect())
            }
        }
    }

    fn filters(&mut self) -> FilterConfig {
        let kind = match self.byte() % 3 {
            0 => FilterKind::Blocked,
            1 => FilterKind::Standard,
            _ => FilterKind::Ribbon,
        };
        FilterConfig {
            kind,
            policy: self.policy(),
        }
    }

    fn batch(&mut self) -> Op {
        let len = 2 + usize::from(self.byte() % 5);
        let mut ops: Vec<(KeyId, Option<u16>)> = Vec::with_capacity(len);
        for _ in 0..len {
            let tag = self.byte();
            // Half the time a key the batch already wrote.
            let k = match ops.last() {
                Some(&(prev, _)) if tag & 2 == 2 => prev,
                _ => self.key(),
            };
            let v = (tag & 1 == 0).then(|| self.value_len());
            ops.push((k, v));
        }
        Op::Batch(ops)
    }

    fn op(&mut self) -> Op {
        // Weights out of 64: writes dominate, so flushes and the store's
        // own compactions build the tree.
        match self.byte() % 64 {
            0..=19 => Op::Put(self.key(), self.value_len()),
            20..=29 => Op::Delete(self.key()),
            30..=35 => self.batch(),
            36..=41 => Op::Get(self.key()),
            42..=44 => Op::Scan(self.range()),
            45..=46 => Op::TakeSnapshot(self.byte()),
            47..=48 => Op::SnapshotGet(self.byte(), self.key()),
            49..=50 => Op::SnapshotScan(self.byte(), self.range()),
            51 => Op::ReleaseSnapshot(self.byte()),
            52..=55 => Op::Flush,
            56..=57 => Op::RebuildFilters(self.policy()),
            58 => Op::IterAcrossRebuild {
                range: self.range(),
                policy: self.policy(),
                overwrite: self.key(),
                compact: self.byte().is_multiple_of(4),
            },
            59..=60 => Op::Reopen(self.bool().then(|| self.filters())),
            // A full compaction flattens the tree the input built: a
            // quarter of these bytes (1 in 256 operations) make one, so a
            // long input keeps its deep levels (at 1 in 64, a 1,200-op
            // input compacted all of it about 19 times).
            61 => {
                if self.byte() < 64 {
                    Op::Compact
                } else {
                    Op::Get(self.key())
                }
            }
            // A run of puts of consecutive keys: tables and index blocks
            // full of neighbouring keys of several lengths.
            _ => {
                let first = self.key();
                let len = self.value_len();
                Op::Batch((0..8).map(|i| (first.wrapping_add(i), Some(len))).collect())
            }
        }
    }
}

impl Case {
    /// Decodes a case: the shape from the first bytes, then operations
    /// until the bytes run out (at most [`MAX_OPS`]).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut r = Reader { bytes, at: 0 };
        let flags = r.byte();
        let shape = Shape {
            layout: flags & 0x0f,
            deletion_compaction: flags & 0x10 != 0,
            filters: r.filters(),
        };
        let mut ops = Vec::new();
        while !r.done() && ops.len() < MAX_OPS {
            ops.push(r.op());
        }
        Self { shape, ops }
    }
}
