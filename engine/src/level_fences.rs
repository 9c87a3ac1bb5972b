//! Finding a sorted level's one candidate table for a key without touching
//! every probed table's key bytes.
//!
//! A lookup binary-searches each sorted level for the first table whose
//! largest key is not below the key. Probing a table's own largest key
//! follows two pointers (the handle, then the key's heap bytes), each a
//! cache miss once the store's filters and indexes no longer fit the
//! CPU's caches. The fences keep the first eight bytes of every table's
//! largest key, big-endian and zero-padded, in one array per level, so the
//! search reads that array and compares a table's whole key only when its
//! eight bytes equal the key's.
//!
//! Why a fence decides where it differs: at the first byte where two
//! zero-padded prefixes differ, say `b`'s is above `a`'s. If `a`'s is a
//! real byte, `a < b` at that byte; if it is padding, `a` ended there
//! after bytes equal to `b`'s, so `a` is a proper prefix of `b`. Either way
//! `a < b`. Equal prefixes decide nothing.

/// The first eight bytes of `key`, big-endian, zero-padded: the order of
/// fences agrees with the order of keys wherever two fences differ.
pub(crate) fn fence_of(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// The first index `i` in `0..fences.len()` whose largest key
/// (`largest(i)`) is not below `key`, or `fences.len()` when every one is:
/// what `partition_point(|t| t.largest < key)` returns.
/// REQUIRES: `fences[i] == fence_of(largest(i))` for every `i`, and the
/// largest keys ascend.
pub(crate) fn first_not_below<'a>(
    fences: &[u64],
    largest: impl Fn(usize) -> &'a [u8],
    key: &[u8],
) -> usize {
    let fence = fence_of(key);
    let below = |i: usize| match fences[i].cmp(&fence) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => largest(i) < key,
    };
    let (mut lo, mut hi) = (0, fences.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn search(largest: &[Vec<u8>], key: &[u8]) -> usize {
        let fences: Vec<u64> = largest.iter().map(|k| fence_of(k)).collect();
        first_not_below(&fences, |i| largest[i].as_slice(), key)
    }

    #[test]
    fn equal_prefixes_fall_back_to_the_whole_key() {
        let largest: Vec<Vec<u8>> = [
            &b"aaaaaaaa"[..],
            b"aaaaaaaa\x00",
            b"aaaaaaaab",
            b"aaaaaaaac",
            b"ab",
            b"ab\x00\x00",
            b"b",
        ]
        .iter()
        .map(|k| k.to_vec())
        .collect();
        for key in [
            &b""[..],
            b"a",
            b"aaaaaaaa",
            b"aaaaaaaa\x00",
            b"aaaaaaaa\x00\x00",
            b"aaaaaaaab",
            b"aaaaaaaabb",
            b"aaaaaaaad",
            b"ab",
            b"ab\x00",
            b"ab\x00\x00\x00",
            b"b",
            b"c",
        ] {
            let want = largest.partition_point(|k| k.as_slice() < key);
            assert_eq!(search(&largest, key), want, "key {key:?}");
        }
    }

    proptest! {
        #[test]
        fn agrees_with_a_search_of_the_whole_keys(
            mut largest in prop::collection::vec(prop::collection::vec(0u8..4, 0..12), 0..40),
            keys in prop::collection::vec(prop::collection::vec(0u8..4, 0..12), 1..20),
        ) {
            // Few distinct bytes and lengths around eight: many ties.
            largest.sort();
            largest.dedup();
            for key in &keys {
                let want = largest.partition_point(|k| k < key);
                prop_assert_eq!(search(&largest, key), want);
            }
        }
    }
}
