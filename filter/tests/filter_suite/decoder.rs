//! The decoder rejects every damaged filter with an error and never panics.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterError,
    InsertFilter, KeyHash, RibbonFilter, fuzzing,
};
use proptest::prelude::*;

fn sample_filters() -> Vec<Vec<u8>> {
    let mut standard = BloomFilter::with_bits_per_key(50, 10.0);
    let mut blocked = BlockedBloomFilter::with_bits_per_key(50, 10.0);
    let mut counting = CountingBloomFilter::with_bits_per_key(50, 10.0);
    for i in 0..50u32 {
        standard.insert(&i.to_le_bytes());
        blocked.insert(&i.to_le_bytes());
        counting.insert(&i.to_le_bytes());
    }
    let hashes: Vec<KeyHash> = (0..50u32).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
    vec![
        standard.to_bytes(),
        blocked.to_bytes(),
        counting.to_bytes(),
        RibbonFilter::from_hashes(&hashes, 7.5).to_bytes(),
        RibbonFilter::from_hashes(&[], 7.5).to_bytes(),
        RibbonFilter::from_hashes(&hashes, 0.0).to_bytes(),
    ]
}

fn decode_all(bytes: &[u8]) -> [bool; 5] {
    [
        BloomFilter::from_bytes(bytes).is_ok(),
        BlockedBloomFilter::from_bytes(bytes).is_ok(),
        CountingBloomFilter::from_bytes(bytes).is_ok(),
        RibbonFilter::from_bytes(bytes).is_ok(),
        AnyFilter::from_bytes(bytes).is_ok(),
    ]
}

/// Replaces `value` at `at` and recomputes the checksum, so only the field
/// under test is wrong.
fn resign(mut b: Vec<u8>, at: usize, value: &[u8]) -> Vec<u8> {
    b[at..at + value.len()].copy_from_slice(value);
    let body = b.len() - 4;
    let crc = crc32fast_hash(&b[..body]);
    b[body..].copy_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let mut checked = 0;
    for original in sample_filters() {
        for offset in 0..original.len() {
            for bit in 0..8 {
                let mut bytes = original.clone();
                bytes[offset] ^= 1 << bit;
                assert_eq!(
                    decode_all(&bytes),
                    [false; 5],
                    "flip at {offset} bit {bit} accepted"
                );
                checked += 1;
            }
        }
    }
    println!("{checked} bit flips rejected");
}

#[test]
fn every_truncation_is_rejected() {
    for original in sample_filters() {
        for len in 0..original.len() {
            assert_eq!(
                decode_all(&original[..len]),
                [false; 5],
                "truncation to {len} accepted"
            );
        }
        let mut longer = original.clone();
        longer.push(0);
        assert_eq!(decode_all(&longer), [false; 5]);
    }
}

#[test]
fn errors_are_specific() {
    let bytes = BloomFilter::new(64, 3).to_bytes();
    assert!(matches!(
        BloomFilter::from_bytes(&bytes[..10]),
        Err(FilterError::Truncated { .. })
    ));
    let mut flipped = bytes.clone();
    flipped[40] ^= 1;
    assert!(matches!(
        BloomFilter::from_bytes(&flipped),
        Err(FilterError::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        BlockedBloomFilter::from_bytes(&bytes),
        Err(FilterError::WrongKind { .. })
    ));

    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 0, b"XXXX")),
        Err(FilterError::BadMagic(_))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 4, &[9, 0])),
        Err(FilterError::UnsupportedVersion(9))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 6, &[77])),
        Err(FilterError::UnknownKind(77))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 7, &[5])),
        Err(FilterError::UnknownHash(5))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 16, &[0, 0, 0, 0])),
        Err(FilterError::InvalidParameters(_))
    ));
    assert!(matches!(
        BloomFilter::from_bytes(&resign(bytes.clone(), 20, &128u64.to_le_bytes())),
        Err(FilterError::SizeMismatch { .. })
    ));
}

#[test]
fn ribbon_errors_are_specific() {
    let hashes: Vec<KeyHash> = (0..300u32).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
    let f = RibbonFilter::from_hashes(&hashes, 7.0);
    let bytes = f.to_bytes();
    assert_eq!(RibbonFilter::from_bytes(&bytes).unwrap(), f);
    let invalid = |b: &[u8]| {
        matches!(
            RibbonFilter::from_bytes(b),
            Err(FilterError::InvalidParameters(_))
        )
    };
    // k (offset 16) must be the upper column count of the layout.
    let k = f.num_hashes();
    assert!(invalid(&resign(bytes.clone(), 16, &(k + 1).to_le_bytes())));
    // m (offset 20) a multiple of 128.
    let m = f.num_bits();
    assert!(invalid(&resign(bytes.clone(), 20, &(m + 64).to_le_bytes())));
    // Blocks (offset 36): one block, or none while holding keys.
    assert!(invalid(&resign(bytes.clone(), 36, &1u32.to_le_bytes())));
    assert!(invalid(&resign(bytes.clone(), 36, &0u32.to_le_bytes())));
    // Fewer blocks than the segments allow (more than 32 columns).
    let wide = RibbonFilter::from_hashes(&hashes, 40.0);
    assert_eq!((wide.num_hashes(), wide.num_slots()), (32, 384));
    assert!(invalid(&resign(wide.to_bytes(), 36, &2u32.to_le_bytes())));
    // Seed (offset 40) in 0..=255.
    assert!(invalid(&resign(bytes.clone(), 40, &256u32.to_le_bytes())));
    // A good seed of the wrong value decodes, but the check catches it as a
    // different filter: equal bytes only for equal filters.
    let other = resign(bytes.clone(), 40, &((f.seed() + 1) % 256).to_le_bytes());
    assert_ne!(RibbonFilter::from_bytes(&other).unwrap(), f);
    // Wrong kinds both ways.
    assert!(matches!(
        BloomFilter::from_bytes(&bytes),
        Err(FilterError::WrongKind { .. })
    ));
    assert!(matches!(
        RibbonFilter::from_bytes(&BloomFilter::new(64, 3).to_bytes()),
        Err(FilterError::WrongKind { .. })
    ));
}

/// A Ribbon filter's bytes from its fields, the solution `segments`
/// pseudo-random segments from `fill`, signed.
fn ribbon_bytes(
    version: u16,
    k: u32,
    segments: u64,
    items: u64,
    blocks: u32,
    seed: u32,
    fill: u64,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x464d_4c42u32.to_le_bytes());
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&[4, 1]);
    b.extend_from_slice(&bloomlsm_filter::HASH_SEED.to_le_bytes());
    b.extend_from_slice(&k.to_le_bytes());
    b.extend_from_slice(&(segments * 128).to_le_bytes());
    b.extend_from_slice(&items.to_le_bytes());
    b.extend_from_slice(&blocks.to_le_bytes());
    b.extend_from_slice(&seed.to_le_bytes());
    let mut x = fill;
    for _ in 0..segments * 2 {
        x = x
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(0x632b_e59b_d9b4_e019);
        b.extend_from_slice(&(x ^ (x >> 29)).to_le_bytes());
    }
    let crc = crc32fast_hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn ribbon_versions_outside_1_and_2_are_refused() {
    let good = ribbon_bytes(2, 2, 4, 3, 2, 7, 1);
    assert!(RibbonFilter::from_bytes(&good).is_ok());
    assert!(RibbonFilter::from_bytes(&resign(good.clone(), 4, &1u16.to_le_bytes())).is_ok());
    for version in [0u16, 3, 0xffff] {
        assert!(matches!(
            RibbonFilter::from_bytes(&resign(good.clone(), 4, &version.to_le_bytes())),
            Err(FilterError::UnsupportedVersion(v)) if v == version
        ));
    }
}

/// A version 1 filter claiming the most blocks with few segments decodes
/// (and quickly: reading version 1 order walks the blocks that hold
/// segments, not all of them).
#[test]
fn version_1_with_the_most_blocks_decodes() {
    for segments in [0u64, 1, 5] {
        let k = u32::from(segments > 0);
        let bytes = ribbon_bytes(1, k, segments, 9, u32::MAX, 3, 11);
        let f = RibbonFilter::from_bytes(&bytes).unwrap();
        assert_eq!(f.num_bits(), segments * 128);
        let _ = f.contains(b"x");
    }
}

/// `fuzzing::reseal` builds frames every kind accepts from plain bytes
/// (so the property test and the fuzz target reach past the header), and
/// its raw-header mode reaches the header checks.
#[test]
fn reseal_frames_decode_for_every_kind() {
    for ctl in 0u8..8 {
        let mut data = vec![ctl, 3, 0, 0, 0];
        data.extend_from_slice(&[0; 16]);
        data.extend_from_slice(&5u32.to_le_bytes()); // Ribbon blocks
        data.extend_from_slice(&7u32.to_le_bytes()); // Ribbon seed
        data.extend((0..256u32).map(|i| (i * 37) as u8));
        let bytes = fuzzing::reseal(&data);
        assert!(fuzzing::exercise(&bytes), "control byte {ctl}");
    }
    let valid = BloomFilter::new(64, 3).to_bytes();
    let mut raw = vec![0xc0];
    raw.extend_from_slice(&valid[..valid.len() - 4]);
    assert_eq!(fuzzing::reseal(&raw), valid);
}

/// A checksummed blocked filter of one 512-bit block whose header claims
/// k = 30 and 600 to 900 keys (over-full: the weights of the rate's
/// Poisson sum rounded to 1 + 3e-13): its rates are still probabilities
/// (`fuzzing::exercise` checks them).
#[test]
fn an_over_full_blocked_header_reports_rates_in_0_to_1() {
    for items in 600u64..=900 {
        // Blocked (kind 1), k as given (bit 4): k, m (ignored), items,
        // the Ribbon fields (unused), one block of set bits.
        let mut data = vec![1 | 16];
        data.extend_from_slice(&30u32.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        data.extend_from_slice(&items.to_le_bytes());
        data.extend_from_slice(&[0; 8]);
        data.extend_from_slice(&[0xff; 64]);
        let bytes = fuzzing::reseal(&data);
        let f = BlockedBloomFilter::from_bytes(&bytes).unwrap();
        assert!(
            f.theoretical_fpr() <= 1.0,
            "{items} keys: {}",
            f.theoretical_fpr()
        );
        assert!(fuzzing::exercise(&bytes));
    }
}

fn crc32fast_hash(bytes: &[u8]) -> u32 {
    // The same CRC-32 (IEEE) as the codec, computed bitwise so the test
    // does not share code with what it checks.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let _ = decode_all(&bytes);
    }

    #[test]
    fn random_edits_of_valid_filters_never_panic(which in 0usize..6, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8)) {
        let mut bytes = sample_filters().swap_remove(which);
        for (at, value) in edits {
            let at = usize::from(at) % bytes.len();
            bytes[at] = value;
        }
        let _ = decode_all(&bytes);
    }

    /// Ribbon headers of either version, with any block count (small ones
    /// and ones near the u32 limit) and solution bytes of the size the
    /// header claims: decoding never panics and takes time in proportion
    /// to the bytes, not to the block count; what decodes answers any
    /// probe and re-encodes to the same filter (and version 2 bytes to
    /// themselves).
    #[test]
    fn ribbon_headers_of_either_version_decode_safely(
        version in 1u16..=2,
        blocks in prop_oneof![0u32..40, (u32::MAX - 40)..=u32::MAX, any::<u32>()],
        segments in 0u64..160,
        k_off in prop_oneof![Just(0i64), -2i64..3],
        seed in prop_oneof![0u32..256, any::<u32>()],
        fill in any::<u64>(),
        probes in proptest::collection::vec(any::<u64>(), 1..64),
    ) {
        let k = if blocks == 0 { 0 } else { segments.div_ceil(u64::from(blocks)) as i64 + k_off };
        let bytes = ribbon_bytes(version, u32::try_from(k).unwrap_or(0), segments, u64::from(blocks), blocks, seed, fill);
        if let Ok(f) = RibbonFilter::from_bytes(&bytes) {
            for probe in probes {
                let _ = f.contains_hash(KeyHash::from_raw(probe));
            }
            let _ = (f.theoretical_fpr(), f.fill_ratio(), f.estimated_fpr(), f.mean_columns());
            let again = f.to_bytes();
            if version == 2 {
                prop_assert_eq!(&again, &bytes);
            }
            prop_assert_eq!(RibbonFilter::from_bytes(&again).unwrap(), f);
        }
    }

    /// Random header fields and payload of every kind in a frame with a
    /// valid checksum (`fuzzing::reseal`, as the fuzz target
    /// `filter_resealed`): decoding never panics, the kind decoders agree,
    /// what decodes answers probes, holds memory in proportion to its
    /// bytes and re-encodes as its version says (`fuzzing::exercise`).
    #[test]
    fn resealed_random_fields_decode_safely(
        ctl in any::<u8>(),
        fields in proptest::collection::vec(any::<u8>(), 0..64),
        payload_len in prop_oneof![0usize..80, 0usize..600],
        fill in any::<u8>(),
    ) {
        let mut data = vec![ctl];
        data.extend_from_slice(&fields);
        data.resize(1 + fields.len().max(28) + payload_len, fill);
        let bytes = fuzzing::reseal(&data);
        fuzzing::exercise(&bytes);
    }

    /// Whatever a re-signed (checksum-valid) edit of a Ribbon filter's
    /// header and parameters decodes to, querying it never panics.
    #[test]
    fn resigned_ribbon_edits_decode_safely(edits in proptest::collection::vec((0usize..44, any::<u8>()), 1..6), probe in any::<u64>()) {
        let mut bytes = sample_filters().swap_remove(3);
        for (at, value) in edits {
            bytes = resign(bytes, at, &[value]);
        }
        if let Ok(f) = AnyFilter::from_bytes(&bytes) {
            let _ = f.contains_hash(KeyHash::from_raw(probe));
            let _ = (f.theoretical_fpr(), f.fill_ratio(), f.estimated_fpr());
        }
    }
}
