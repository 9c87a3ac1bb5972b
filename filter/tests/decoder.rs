//! The decoder rejects every damaged filter with an error and never panics.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterError,
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
    vec![standard.to_bytes(), blocked.to_bytes(), counting.to_bytes()]
}

fn decode_all(bytes: &[u8]) -> [bool; 4] {
    [
        BloomFilter::from_bytes(bytes).is_ok(),
        BlockedBloomFilter::from_bytes(bytes).is_ok(),
        CountingBloomFilter::from_bytes(bytes).is_ok(),
        AnyFilter::from_bytes(bytes).is_ok(),
    ]
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
                    [false; 4],
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
                [false; 4],
                "truncation to {len} accepted"
            );
        }
        let mut longer = original.clone();
        longer.push(0);
        assert_eq!(decode_all(&longer), [false; 4]);
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

    // Re-sign a header edit so only the field under test is wrong.
    let resign = |mut b: Vec<u8>, at: usize, value: &[u8]| {
        b[at..at + value.len()].copy_from_slice(value);
        let body = b.len() - 4;
        let crc = crc32fast_hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
        b
    };
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
    fn random_edits_of_valid_filters_never_panic(which in 0usize..3, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8)) {
        let mut bytes = sample_filters().swap_remove(which);
        for (at, value) in edits {
            let at = usize::from(at) % bytes.len();
            bytes[at] = value;
        }
        let _ = decode_all(&bytes);
    }
}
