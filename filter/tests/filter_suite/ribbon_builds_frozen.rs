//! Ribbon filters built by this build are byte for byte those of the
//! build before the three-chain, BMI2 banding (51859da): a change in
//! banding may change speed, never the filter (any order of the equations
//! gives the same solution, and fails on the same seeds). The sizes cover
//! every banding order (`ribbon::solve`: unsorted up to a 512 KiB band,
//! by region up to 2.5 MiB, sorted by block above) and the counts around
//! `2 * CHAINS` that `Banding::add_all` bands one at a time.
//! The digests were printed by this file at 51859da's parent
//! (`RIBBON_FROZEN_PRINT=1 cargo test -p bloomlsm-filter --test
//! ribbon_builds_frozen -- --nocapture`).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{KeyHash, RibbonFilter};

/// FNV-1a, 64 bits: a digest of a filter's bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Keys, bits per key, and the digest of the filter's bytes.
const FROZEN: [(u32, f64, u64); 16] = [
    (1, 7.0, 0x2c66eb968dd34373),
    (2, 7.0, 0xa266c09cb530507a),
    (5, 9.5, 0x5054a06d1ed6fc93),
    (6, 9.5, 0x0f611954462561e5),
    (7, 9.5, 0x83e4b7728f50211b),
    (8, 2.0, 0xca672e2d3b03dda2),
    (13, 7.0, 0x312e2dcdd74dc058),
    (100, 1.5, 0xb727ef941d5c1b73),
    (1000, 7.0, 0xb02a66e1c04bfe95),
    (4321, 9.5, 0x661aae649f8e5359),
    (20000, 7.0, 0xdad5783ccafbd20d),
    (20000, 16.0, 0x99b9769d5d04ab95),
    (60000, 9.5, 0xcdad659f7c0a0afa),
    (90000, 7.0, 0xf0b1e067fe8e8d1a),
    (200000, 9.5, 0x7a6a799be07b7fa3),
    (300000, 5.0, 0xfe7fc393db5e051f),
];

const CASES: [(u32, f64); 16] = [
    (1, 7.0),
    (2, 7.0),
    (5, 9.5),
    (6, 9.5),
    (7, 9.5),
    (8, 2.0),
    (13, 7.0),
    (100, 1.5),
    (1_000, 7.0),
    (4_321, 9.5),
    (20_000, 7.0),
    (20_000, 16.0),
    (60_000, 9.5),
    (90_000, 7.0),
    (200_000, 9.5),
    (300_000, 5.0),
];

fn digest(n: u32, bits_per_key: f64) -> u64 {
    let hashes: Vec<KeyHash> = (0..n)
        .map(|i| KeyHash::of(&(u64::from(i) * 0x9e37_79b9).to_le_bytes()))
        .collect();
    fnv1a(&RibbonFilter::from_hashes(&hashes, bits_per_key).to_bytes())
}

#[test]
fn ribbon_filters_are_byte_identical_to_the_two_chain_build() {
    if std::env::var_os("RIBBON_FROZEN_PRINT").is_some() {
        for (n, bits) in CASES {
            println!("    ({n}, {bits:?}, {:#018x}),", digest(n, bits));
        }
        return;
    }
    assert_eq!(FROZEN.len(), CASES.len());
    for (n, bits, want) in FROZEN {
        assert_eq!(digest(n, bits), want, "{n} keys at {bits} bits per key");
    }
}
