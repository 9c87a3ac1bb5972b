//! Per-key histories shared by the history stress tests.
//!
//! Every write to key `k` takes the key's next version `v` (1, 2, ...),
//! recorded as a put or a delete before it is issued, and a put's value
//! names `k` and `v` ([`value`]). So the state of `k` at every version is
//! known, and a value read names the one version it can be. Each key has
//! one writer thread, so its versions reach the store in order.
//!
//! [`History`] records, per key, the last version whose write began
//! (`started`, set before the write is issued) and the last whose write
//! returned `Ok` (`acked`). A read that began after `acked[k] = a` and
//! ended before `started[k]` passed `s` must return the state of some
//! version in `a..=s` ([`check`]): anything older is a lost write or a
//! deleted key come back, anything newer was never written.
#![allow(dead_code)] // Each test binary uses the parts it needs.

pub mod cut;
pub mod rng;
pub mod run;
pub mod seeded;
pub mod shape;
pub mod snapshots;
pub mod threads;
pub mod verify;
pub mod write;

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Keys `0..KEYS`; a multiple of every writer count used.
pub const KEYS: u64 = 1536;

/// `hist` and `k` in six digits, trailing zeros cut (which keeps byte
/// order numeric order): keys of 4 to 10 bytes, many a prefix of others
/// (`hist0012` of `hist001201`), many of exactly the 8 bytes of a fence,
/// and runs sharing their 8-byte fence, so the level search and the block
/// search compare whole keys at many boundaries.
pub fn key(k: u64) -> Vec<u8> {
    let digits = format!("{k:06}");
    format!("hist{}", digits.trim_end_matches('0')).into_bytes()
}

/// The index of a key made by [`key`].
pub fn key_index(key: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(key)
        .ok()
        .and_then(|s| s.strip_prefix("hist"))
        .filter(|d| d.len() <= 6 && !d.ends_with('0'))
        .and_then(|d| format!("{d:0<6}").parse().ok())
        .filter(|&k| k < KEYS)
        .ok_or_else(|| format!("a key no write wrote: {key:?}"))
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value of version `v` of key `k` (when it is a put): `k:v:` and a
/// padding of 0 to 63 bytes, or one time in 32 of 256 to 767 bytes (more
/// than a data block), so tables fill unevenly.
pub fn value(k: u64, v: u64) -> Vec<u8> {
    let mut bytes = format!("{k}:{v}:").into_bytes();
    let r = mix(k ^ (v << 20) ^ 0x5eed);
    let pad = if r.is_multiple_of(32) {
        256 + (r >> 8) % 512
    } else {
        r % 64
    } as usize;
    bytes.resize(bytes.len() + pad, b'a' + (v % 26) as u8);
    bytes
}

/// The versions begun and acknowledged per key, and which were deletes.
pub struct History {
    started: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
    /// Per key, its versions (version `v` at index `v - 1`).
    log: Vec<RwLock<Vec<Version>>>,
    /// Writers; key `k` belongs to writer `k % writers`.
    writers: u64,
    /// Per writer, its writes (calls of `put`, `delete` or `write`) begun.
    writes: Vec<AtomicU64>,
}

/// One version of a key.
#[derive(Clone, Copy, Debug)]
struct Version {
    delete: bool,
    /// The number of the write that made it, among its writer's writes.
    write: u64,
}

impl History {
    /// The histories of keys written by `writers` threads.
    pub fn new(writers: u64) -> Self {
        Self {
            started: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            log: (0..KEYS).map(|_| RwLock::default()).collect(),
            writers,
            writes: (0..writers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The number of `writer`'s next write (only that writer calls this).
    pub fn next_write(&self, writer: u64) -> u64 {
        self.writes[writer as usize].fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Records key `k`'s next version, a delete or a put, made by write
    /// number `write` of its writer, and announces it (only `k`'s writer
    /// calls this).
    pub fn begin(&self, k: u64, delete: bool, write: u64) -> u64 {
        let mut log = self.log[k as usize].write().unwrap();
        log.push(Version { delete, write });
        let v = log.len() as u64;
        self.started[k as usize].store(v, Ordering::SeqCst);
        v
    }

    /// Records that the write of version `v` of `k` returned `Ok`.
    pub fn ack(&self, k: u64, v: u64) {
        self.acked[k as usize].fetch_max(v, Ordering::SeqCst);
    }

    /// The last version of `k` acknowledged.
    pub fn acked(&self, k: u64) -> u64 {
        self.acked[k as usize].load(Ordering::SeqCst)
    }

    /// The last version of `k` begun.
    pub fn started(&self, k: u64) -> u64 {
        self.started[k as usize].load(Ordering::SeqCst)
    }

    /// Acknowledged versions of keys `from..to`.
    pub fn acked_range(&self, from: u64, to: u64) -> Vec<u64> {
        (from..to).map(|k| self.acked(k)).collect()
    }

    /// Begun versions of keys `from..to`.
    pub fn started_range(&self, from: u64, to: u64) -> Vec<u64> {
        (from..to).map(|k| self.started(k)).collect()
    }

    /// Whether version `v` (begun) of `k` is a delete; version 0 (never
    /// written) counts as one.
    fn is_delete(&self, k: u64, v: u64) -> bool {
        v == 0 || self.log[k as usize].read().unwrap()[(v - 1) as usize].delete
    }

    /// The state of key `k` at version `v` (begun): its value, or `None`
    /// when deleted or never written.
    pub fn state(&self, k: u64, v: u64) -> Option<Vec<u8>> {
        (!self.is_delete(k, v)).then(|| value(k, v))
    }

    /// The version a value of key `k` names, if it is exactly the value of
    /// a put begun.
    pub fn version_of(&self, k: u64, bytes: &[u8]) -> Result<u64, String> {
        let bad = || {
            format!(
                "key {k}: a value no write wrote: {:?}",
                String::from_utf8_lossy(bytes)
            )
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = text.splitn(3, ':');
        let kk: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let v: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        if kk != k || v > self.started(k) || self.is_delete(k, v) || value(k, v) != bytes {
            return Err(bad());
        }
        Ok(v)
    }

    /// Checks that `got` is key `k`'s state at some version in `lo..=hi`
    /// and returns the smallest such version (a lower bound of what was
    /// read).
    pub fn check(
        &self,
        k: u64,
        got: Option<&[u8]>,
        lo: u64,
        hi: u64,
        what: &str,
    ) -> Result<u64, String> {
        match got {
            Some(bytes) => {
                let v = self
                    .version_of(k, bytes)
                    .map_err(|e| format!("{what}: {e}"))?;
                if v < lo || v > hi {
                    return Err(format!(
                        "{what}: key {k} read version {v}, but versions {lo}..={hi} were live \
                         ({} before)",
                        if v < lo {
                            "acknowledged"
                        } else {
                            "never written"
                        }
                    ));
                }
                Ok(v)
            }
            None => (lo..=hi).find(|&v| self.is_delete(k, v)).ok_or_else(|| {
                format!(
                    "{what}: key {k} absent, but versions {lo}..={hi} are all puts \
                     (a lost write)"
                )
            }),
        }
    }
}
