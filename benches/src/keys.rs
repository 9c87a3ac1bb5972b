//! Deterministic keys and values: present and absent keys interleave in key
//! order (so absent keys fall inside tables' ranges and only filters can
//! rule them out), and every value is derived from its key's index.

/// SplitMix64: a fixed, well-mixed permutation of u64.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The i-th present key: `key_bytes` decimal digits of an even number.
pub fn present_key(i: u64, key_bytes: usize) -> Vec<u8> {
    number_key(mix(i) % modulus(key_bytes) / 2 * 2, key_bytes)
}

/// The i-th absent key: an odd number, so never equal to a present key.
pub fn absent_key(i: u64, key_bytes: usize) -> Vec<u8> {
    number_key(
        mix(i ^ 0x5555_5555) % modulus(key_bytes) / 2 * 2 + 1,
        key_bytes,
    )
}

fn modulus(key_bytes: usize) -> u64 {
    10u64.saturating_pow(key_bytes.min(19) as u32)
}

fn number_key(n: u64, key_bytes: usize) -> Vec<u8> {
    let digits = format!("{n:0width$}", width = key_bytes.min(19));
    let mut key = digits.into_bytes();
    key.resize(key_bytes, b'k');
    key
}

/// The value stored under the i-th present key.
pub fn value(i: u64, value_bytes: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(value_bytes);
    let mut x = i;
    while v.len() < value_bytes {
        x = mix(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(value_bytes);
    v
}

/// A URL-like key for the crawler workload.
pub fn url(i: u64) -> Vec<u8> {
    format!(
        "https://site{}.example/{}/{:x}",
        mix(i) % 50_000,
        i % 997,
        mix(i ^ 77)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_and_absent_never_collide_and_have_the_length() {
        for i in 0..10_000 {
            let p = present_key(i, 16);
            let a = absent_key(i, 16);
            assert_eq!(p.len(), 16);
            assert_eq!(a.len(), 16);
            assert_ne!(p, a);
            assert_eq!(p[15] % 2, 0);
            assert_eq!(a[15] % 2, 1);
        }
        assert_eq!(value(3, 100).len(), 100);
    }
}
