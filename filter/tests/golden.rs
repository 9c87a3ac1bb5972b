//! Golden vectors: the hash, the probe positions and the byte layout of a
//! persisted filter are frozen. If one of these fails, filters already on
//! disk would answer "absent" for keys they hold: do not update the values;
//! introduce a new hash id or format version instead.
//! (`cargo run -p bloomlsm-filter --example print_golden` prints them.)
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{AnyFilter, BlockedBloomFilter, BloomFilter, Filter, HASH_SEED, KeyHash};

type Vector = (&'static [u8], u64, [u64; 7], [u64; 6]);

const VECTORS: [Vector; 4] = [
    (
        b"",
        0x10bf_c139_454d_8151,
        [65, 97, 130, 163, 195, 228, 260],
        [16, 126, 151, 455, 329, 305],
    ),
    (
        b"bloomlsm",
        0x5e24_bd0e_15c4_9c35,
        [367, 888, 409, 930, 451, 972, 493],
        [1290, 1481, 1174, 1415, 1429, 1343],
    ),
    (
        b"https://example.com/",
        0x856e_3455_9490_08c7,
        [521, 302, 83, 864, 646, 427, 208],
        [2447, 2218, 2342, 2333, 2284, 2424],
    ),
    (
        &[0, 255, 7],
        0xf11e_7d6f_a4dd_491f,
        [941, 723, 504, 286, 67, 849, 630],
        [3984, 3643, 3647, 4086, 3846, 3774],
    ),
];

/// A 128-bit standard filter, k = 3, holding "a", "b" and "c".
const FIXTURE_HEX: &str = "424c4d46010001016d736c6d6f6f6c620300000080000000000000000300000000000000800000040041a000040020008000000086c69e8f";

#[test]
fn seed_is_frozen() {
    assert_eq!(HASH_SEED, 0x626c_6f6f_6d6c_736d);
}

#[test]
fn hashes_and_positions_are_frozen() {
    for (key, hash, standard, blocked) in VECTORS {
        let h = KeyHash::of(key);
        assert_eq!(h.raw(), hash, "hash of {key:?}");
        assert_eq!(
            BloomFilter::new(1000, 7).bit_positions(h),
            standard,
            "standard positions of {key:?}"
        );
        assert_eq!(
            BlockedBloomFilter::new(4096, 6).bit_positions(h),
            blocked,
            "blocked positions of {key:?}"
        );
    }
}

#[test]
fn serialized_fixture_is_frozen() {
    let bytes: Vec<u8> = (0..FIXTURE_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&FIXTURE_HEX[i..i + 2], 16).unwrap())
        .collect();
    let mut f = BloomFilter::new(128, 3);
    for k in [&b"a"[..], b"b", b"c"] {
        f.insert(k);
    }
    assert_eq!(f.to_bytes(), bytes, "encoding changed");
    let decoded = AnyFilter::from_bytes(&bytes).unwrap();
    assert_eq!(decoded.len(), 3);
    assert_eq!(decoded.num_hashes(), 3);
    assert!(decoded.contains(b"a") && decoded.contains(b"b") && decoded.contains(b"c"));
}
