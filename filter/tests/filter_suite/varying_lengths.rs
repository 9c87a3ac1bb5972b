//! LevelDB's `util/bloom_test.cc` "VaryingLengths" check, for every kind.
//!
//! For lengths 1 to 10,000 on LevelDB's steps (+1 below 10, +10 below 100,
//! +100 below 1,000, then +1,000), a filter at 10 bits per key holds the
//! 4-byte little-endian integers 0..length and is asked about 10,000 keys
//! 1e9 + 0..10,000. Every length must hold all its keys and stay at or under
//! 2% false positives, and the lengths over 1.25% ("mediocre") may be at
//! most a fifth of those at or under it ("good"), as in LevelDB.
//!
//! LevelDB also bounds each filter's size by length * 10 / 8 + 40 bytes.
//! Our filters carry a 40-byte header and checksum and each kind has its own
//! minimum (64 bytes for the Bloom kinds, two 128-slot blocks for Ribbon),
//! so the size bound here is on the bit array: length * 10 / 8 bytes plus
//! that kind's minimum.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterKind, InsertFilter,
    KeyHash, MIN_FILTER_BITS, RibbonFilter,
};

fn next_length(length: u32) -> u32 {
    if length < 10 {
        length + 1
    } else if length < 100 {
        length + 10
    } else if length < 1000 {
        length + 100
    } else {
        length + 1000
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_le_bytes()
}

/// The filter of `length` keys for `kind`, and its size allowance in bytes
/// of bit array (counters for the counting kind, at 4 bits each).
fn build(kind: FilterKind, length: u32) -> (Box<dyn Filter>, usize) {
    let n = u64::from(length);
    let budget = (length as usize * 10) / 8;
    match kind {
        FilterKind::Ribbon => {
            let hashes: Vec<KeyHash> = (0..length).map(|i| KeyHash::of(&key(i))).collect();
            // Two blocks of ten columns of 16 bytes.
            (
                Box::new(RibbonFilter::from_hashes(&hashes, 10.0)),
                budget + 2 * 10 * 16,
            )
        }
        FilterKind::Standard => {
            let mut f = BloomFilter::with_bits_per_key(n, 10.0);
            (0..length).for_each(|i| f.insert(&key(i)));
            (Box::new(f), budget + MIN_FILTER_BITS as usize / 8)
        }
        FilterKind::Blocked => {
            let mut f = BlockedBloomFilter::with_bits_per_key(n, 10.0);
            (0..length).for_each(|i| f.insert(&key(i)));
            // Rounding up to whole 64-byte blocks adds at most one block.
            (Box::new(f), budget + 2 * 64)
        }
        FilterKind::Counting => {
            let mut f = CountingBloomFilter::with_bits_per_key(n, 10.0);
            (0..length).for_each(|i| f.insert(&key(i)));
            (Box::new(f), 4 * (budget + MIN_FILTER_BITS as usize / 8))
        }
    }
}

fn varying_lengths(kind: FilterKind) {
    let (mut good, mut mediocre) = (0, 0);
    let mut length = 1;
    while length <= 10_000 {
        let (filter, allowed_bytes) = build(kind, length);
        assert!(
            filter.memory_bytes() <= allowed_bytes,
            "{kind} length {length}: {} bytes > {allowed_bytes}",
            filter.memory_bytes()
        );
        for i in 0..length {
            assert!(filter.contains(&key(i)), "{kind} length {length}: key {i}");
        }
        let hits = (0..10_000u32)
            .filter(|&i| filter.contains(&key(i + 1_000_000_000)))
            .count();
        let rate = hits as f64 / 10_000.0;
        println!(
            "{kind}: false positives {:5.2}% at length {length:6}, {} bytes",
            rate * 100.0,
            filter.memory_bytes()
        );
        assert!(rate <= 0.02, "{kind} length {length}: {rate} over 2%");
        if rate > 0.0125 {
            mediocre += 1;
        } else {
            good += 1;
        }
        length = next_length(length);
    }
    println!("{kind}: {good} good, {mediocre} mediocre");
    assert!(
        mediocre <= good / 5,
        "{kind}: {mediocre} mediocre filters against {good} good"
    );
}

#[test]
fn standard() {
    varying_lengths(FilterKind::Standard);
}

#[test]
fn blocked() {
    varying_lengths(FilterKind::Blocked);
}

#[test]
fn counting() {
    varying_lengths(FilterKind::Counting);
}

#[test]
fn ribbon() {
    varying_lengths(FilterKind::Ribbon);
}

#[test]
fn lengths_follow_leveldb() {
    let mut lengths = vec![1];
    while let Some(&l) = lengths.last() {
        let n = next_length(l);
        if n > 10_000 {
            break;
        }
        lengths.push(n);
    }
    assert_eq!(lengths.len(), 37);
    assert_eq!(&lengths[..12], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30]);
    assert_eq!(lengths.last(), Some(&10_000));
}
