//! The run's keys and values. Keys `0..KEYS` are written; numbers from
//! `KEYS` to `UNIVERSE` and every [`beside`] key never are. Four shapes
//! mix in one key space: short keys, keys sharing a 14-byte prefix (the
//! level search's 8-byte fences tie and whole keys decide), keys holding
//! a zero byte, and keys of 2 to 30 bytes under one first byte, some
//! longer than a lowered `max_key_bytes`. Every value names its key's
//! number, so a reader that cannot know the newest value still catches a
//! value served under another key.

pub const KEYS: u64 = 520;
pub const UNIVERSE: u64 = 560;

pub fn key(i: u64) -> Vec<u8> {
    match i % 4 {
        0 => format!("k{i:05}").into_bytes(),
        1 => format!("shared-prefix-{i:05}").into_bytes(),
        2 => format!("k{i:05}\0x").into_bytes(),
        _ => format!("z{}{i}", "y".repeat((i % 23) as usize)).into_bytes(),
    }
}

/// A key next to `key(i)` that no run writes (no key ends with `!`).
pub fn beside(i: u64) -> Vec<u8> {
    let mut k = key(i);
    k.push(b'!');
    k
}

/// The value of write `w` to key `i`: empty now and then, else naming
/// both, padded to up to 80 bytes.
pub fn value(w: u64, i: u64, pad: u64) -> Vec<u8> {
    if pad == 0 {
        return Vec::new();
    }
    let mut v = format!("v{w}.{i}.").into_bytes();
    v.resize(v.len() + pad as usize, b'a' + (w % 26) as u8);
    v
}

/// Whether `value` may be a value of `key`: empty, or naming it.
pub fn belongs(key_bytes: &[u8], value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    let text = String::from_utf8_lossy(value);
    let mut parts = text.split('.');
    let _write = parts.next();
    parts
        .next()
        .and_then(|i| i.parse::<u64>().ok())
        .is_some_and(|i| i < KEYS && key(i) == key_bytes)
}

/// Whether `k` is a key the run may write (and not a [`beside`] key or a
/// number past `KEYS`).
pub fn writable(k: &[u8]) -> bool {
    !k.ends_with(b"!") && (0..KEYS).any(|i| key(i) == k)
}
