//! Differential test of the restart rule's cached offset (`next_restart_at`,
//! 01e2cde): each step of a `BlockIter` (from the start or after a seek,
//! by `advance` or `try_advance`) must give the result and the state the
//! rule gave when it read the restart array at every entry. The oracle
//! (`old_step`, `old_seek`) is that rule as it was, kept small: it touches
//! only the state both versions share. Invariant checked after each step:
//! `next_restart_at` is the offset of restart `next_restart` (`usize::MAX`
//! past the last).
#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;

use proptest::prelude::*;

use super::{Block, BlockError, BlockIter, RESTART_INTERVAL};
use crate::entry::{compare_keys, split_internal_key};

/// The state the rule reads and writes, as both versions keep it.
#[derive(Debug, Clone, PartialEq)]
struct Shadow {
    offset: usize,
    next_restart: usize,
    since_restart: usize,
    current: usize,
    key: Vec<u8>,
    value: (usize, usize),
    valid: bool,
}

fn shadow_of(it: &BlockIter<&Block>) -> Shadow {
    Shadow {
        offset: it.offset,
        next_restart: it.next_restart,
        since_restart: it.since_restart,
        current: it.current,
        key: it.key.clone(),
        value: it.value,
        valid: it.valid,
    }
}

/// `BlockIter::advance` before 01e2cde (the restart array read per entry).
fn old_step(block: &Block, s: &mut Shadow) -> Result<bool, BlockError> {
    if s.offset >= block.restarts_at {
        s.valid = false;
        return Ok(false);
    }
    let e = block.entry_at(s.offset)?;
    if e.shared > s.key.len() {
        return Err(BlockError::SharesTooMuch {
            offset: s.offset,
            shared: e.shared,
            previous_len: s.key.len(),
        });
    }
    while s.next_restart < block.num_restarts && block.restart(s.next_restart) < s.offset {
        s.next_restart += 1;
    }
    if s.next_restart < block.num_restarts && block.restart(s.next_restart) == s.offset {
        if e.shared != 0 {
            return Err(BlockError::RestartSharesPrefix {
                offset: s.offset,
                shared: e.shared,
            });
        }
        s.next_restart += 1;
        s.since_restart = 0;
    } else {
        s.since_restart += 1;
        if s.since_restart >= RESTART_INTERVAL {
            return Err(BlockError::TooFarFromRestart {
                offset: s.offset,
                interval: RESTART_INTERVAL,
            });
        }
    }
    s.key.truncate(e.shared);
    s.key.extend_from_slice(e.key_delta);
    s.value = (e.next - e.value.len(), e.next);
    s.current = s.offset;
    s.offset = e.next;
    s.valid = true;
    Ok(true)
}

/// `BlockIter::seek` before 01e2cde, over `old_step`.
fn old_seek(block: &Block, s: &mut Shadow, user_key: &[u8], seq: u64) -> Result<bool, BlockError> {
    let cmp = |ikey: &[u8], offset: usize| -> Result<(Ordering, bool), BlockError> {
        let (u, q, _) = split_internal_key(ikey).ok_or(BlockError::KeyShorterThanTag {
            offset,
            len: ikey.len(),
        })?;
        Ok((compare_keys(u, q, user_key, seq), u == user_key))
    };
    let (mut lo, mut hi) = (0usize, block.num_restarts - 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let (key, offset) = block.restart_key(mid)?;
        if cmp(key, offset)?.0 == Ordering::Less {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    s.offset = block.restart(lo);
    s.next_restart = lo;
    s.since_restart = 0;
    s.key.clear();
    s.valid = false;
    let mut newer_seen = false;
    while old_step(block, s)? {
        let (order, same_user) = cmp(&s.key, s.current)?;
        if order != Ordering::Less {
            break;
        }
        newer_seen = same_user;
    }
    Ok(newer_seen)
}

fn assert_cache(it: &BlockIter<&Block>) {
    assert_eq!(it.next_restart_at, it.block.restart_or_end(it.next_restart));
}

/// Runs up to `steps` steps (advance or try_advance, as `fallible` says)
/// on both, comparing each result and state; goes on after errors (a
/// caller may call again), stops at the end.
fn walk(block: &Block, it: &mut BlockIter<&Block>, s: &mut Shadow, fallible: &[bool]) {
    let mut errors = 0;
    for (n, &f) in fallible.iter().enumerate() {
        let new = if f {
            it.try_advance().unwrap()
        } else {
            it.advance()
        };
        let old = old_step(block, s);
        assert_eq!(new, old, "step {n}");
        assert_eq!(shadow_of(it), *s, "state after step {n}");
        assert_cache(it);
        // An error comes again at the next call (nothing moved): two are
        // enough.
        errors += usize::from(new.is_err());
        if new == Ok(false) || errors == 2 {
            break;
        }
    }
}

/// One-byte-varint entries (lengths < 128); `shared` picks below 240
/// share within the previous key (as a writer does), others any of 0..16.
fn entries_bytes(entries: &[(u8, Vec<u8>, Vec<u8>)]) -> (Vec<u8>, Vec<u32>) {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let mut previous_len = 0usize;
    for (pick, delta, value) in entries {
        let shared = if *pick < 240 {
            usize::from(*pick) % (previous_len.min(100) + 1)
        } else {
            usize::from(*pick % 16)
        };
        previous_len = shared + delta.len();
        offsets.push(out.len() as u32);
        out.extend_from_slice(&[shared as u8, delta.len() as u8, value.len() as u8]);
        out.extend_from_slice(delta);
        out.extend_from_slice(value);
    }
    (out, offsets)
}

/// A block's bytes: entries (shared mostly within the previous key), a
/// restart array drawn from entry offsets, offsets inside entries, past
/// them and `u32::MAX` (sorted or not, duplicates kept), and a few bytes
/// overwritten.
fn block_bytes() -> impl Strategy<Value = Vec<u8>> {
    let entry = (
        any::<u8>(),
        proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..14),
        proptest::collection::vec(any::<u8>(), 0..4),
    );
    (
        proptest::collection::vec(entry, 1..70),
        proptest::collection::vec(
            (
                prop_oneof![6 => Just(0u8), 12 => Just(1), 1 => Just(2), 1 => Just(3), 1 => Just(4)],
                any::<u32>(),
            ),
            0..16,
        ),
        0u8..4,
        prop_oneof![9 => Just(true), 1 => Just(false)],
        prop_oneof![9 => Just(true), 1 => Just(false)],
        prop_oneof![
            3 => Just(Vec::new()),
            1 => proptest::collection::vec((any::<u16>(), any::<u8>()), 1..3),
        ],
    )
        .prop_map(|(entries, picks, every, sort, zero_restarts, mutations)| {
            let (mut bytes, offsets) = entries_bytes(&entries);
            let len = bytes.len() as u32;
            // Restarts every `6 * every + 1` entries (past 16: too far) (the writer's shape), then
            // the picks: 0 an entry offset, 1 inside the entries, 2 past
            // them, 3 u32::MAX, 4 a duplicate.
            let mut restarts: Vec<u32> = offsets
                .iter()
                .step_by(usize::from(every) * 6 + 1)
                .copied()
                .collect();
            for (how, r) in picks {
                let r = match how {
                    0 => offsets[r as usize % offsets.len()],
                    1 => r % len,
                    2 => len + r % 8,
                    3 => u32::MAX,
                    _ => restarts[r as usize % restarts.len()],
                };
                restarts.push(r);
            }
            if sort {
                restarts.sort_unstable();
                restarts.dedup();
            }
            // A writer's restart entries share nothing.
            if zero_restarts {
                for r in &restarts {
                    if offsets.binary_search(r).is_ok() {
                        bytes[*r as usize] = 0;
                    }
                }
            }
            for r in &restarts {
                bytes.extend_from_slice(&r.to_le_bytes());
            }
            bytes.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
            for (at, b) in mutations {
                let at = usize::from(at) % bytes.len();
                bytes[at] = b;
            }
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn cached_restart_rule_matches_the_array_read(
        bytes in block_bytes(),
        seeks in proptest::collection::vec((proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..6), any::<u64>()), 0..4),
        fallible in proptest::collection::vec(any::<bool>(), 90..91),
    ) {
        let Ok(block) = Block::new(bytes) else { return Ok(()); };
        let mut it = block.iter();
        assert_cache(&it);
        let mut s = shadow_of(&it);
        walk(&block, &mut it, &mut s, &fallible);
        for (key, seq) in seeks {
            let seq = seq >> 8;
            let mut it = block.iter();
            let mut s = shadow_of(&it);
            let new = it.seek(&key, seq);
            let old = old_seek(&block, &mut s, &key, seq);
            prop_assert_eq!(&new, &old);
            if new.is_ok() {
                prop_assert_eq!(shadow_of(&it), s.clone());
                assert_cache(&it);
                walk(&block, &mut it, &mut s, &fallible);
            }
        }
    }
}
