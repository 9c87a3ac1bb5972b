//! Golden vectors: the hash, the probe positions and the byte layout of a
//! persisted filter are frozen. If one of these fails, filters already on
//! disk would answer "absent" for keys they hold: do not update the values;
//! introduce a new hash id or format version instead.
//! (`cargo run -p bloomlsm-filter --example print_golden` prints them.)
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm_filter::{
    AnyFilter, BlockedBloomFilter, BloomFilter, Filter, FilterKind, HASH_SEED, InsertFilter,
    KeyHash, RibbonFilter,
};

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

/// A 1024-bit blocked filter, k = 7, holding "a", "b" and "c": the k that
/// `with_bits_per_key(_, 10.0)` chose before it chose 6.
const BLOCKED_K7_HEX: &str = "424c4d46010002016d736c6d6f6f6c62070000000004000000000000030000000000000000000000110040000040000002000000000020000001000000000204000080000000100000000000000000000200000000000000000000000000000000040004000000000000000000000000000001000000000000000000000000000000000000040000000000800000000000000000000020080040000000000000000000409f4491fd";

/// A Ribbon filter of "a", "b" and "c" at 2 bits per key: two blocks of two
/// columns, solved with seed 206, as format version 1 wrote it (still read).
const RIBBON_V1_HEX: &str = "424c4d46010004016d736c6d6f6f6c62020000000002000000000000030000000000000002000000ce00000000000000000000000000002000000000000000000000000000000020020000000000000000000000000000000000000001000000000000000000000000000000902b2f4d";

/// The same filter as version 2 writes it: with two columns every segment
/// is in the head, in the same order as version 1, so only the version and
/// the checksum differ.
const RIBBON_V2_HEX: &str = "424c4d46020004016d736c6d6f6f6c62020000000002000000000000030000000000000002000000ce00000000000000000000000000002000000000000000000000000000000020020000000000000000000000000000000000000001000000000000000000000000000000a76aec58";

/// "a", "b" and "c" at 5.5 bits per key (format version 2): two blocks of
/// 5 and 6 columns, seed 206; the heads of 4 columns (8 segments) come
/// first, then block 0's tail of one column and block 1's of two.
const RIBBON_SPLIT_HEX: &str = "424c4d46020004016d736c6d6f6f6c62060000008005000000000000030000000000000002000000ce0000000000000000000000000000200000000000000000000000000000002002000000000000000000000000000020000000000000000000000000000000000000000000000000000000000000000000000000010000000000000000000000000000000100000000000000000000000000000001000000000000000000000000000000000000000000000000000020020000000100000000000000000000000000000001000000000000000000000000000000c6a7485f";

/// Which of the 4-byte little-endian keys 0..256 the split fixture calls
/// "maybe".
const RIBBON_SPLIT_MAYBE: [u32; 3] = [43, 46, 205];

/// Which of the 4-byte little-endian keys 0..64 the Ribbon fixture calls
/// "maybe" (about a quarter: two result bits).
const RIBBON_MAYBE: [u32; 17] = [
    1, 6, 8, 9, 16, 19, 23, 30, 32, 34, 43, 46, 48, 50, 51, 55, 61,
];

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

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
    let bytes = unhex(FIXTURE_HEX);
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

#[test]
fn blocked_filters_of_the_old_k_still_read() {
    // New filters at 10 bits per key use k = 6; one written with k = 7 keeps
    // its own k (it is in the header) and answers exactly as before.
    assert_eq!(
        BlockedBloomFilter::with_bits_per_key(1000, 10.0).num_hashes(),
        6
    );
    let bytes = unhex(BLOCKED_K7_HEX);
    let mut f = BlockedBloomFilter::new(1024, 7);
    for k in [&b"a"[..], b"b", b"c"] {
        f.insert(k);
    }
    assert_eq!(f.to_bytes(), bytes, "encoding changed");
    let decoded = AnyFilter::from_bytes(&bytes).unwrap();
    assert_eq!(decoded, AnyFilter::Blocked(f.clone()));
    assert_eq!(decoded.num_hashes(), 7);
    for k in [&b"a"[..], b"b", b"c"] {
        assert!(decoded.contains(k));
    }
    for i in 0..10_000u32 {
        let h = KeyHash::of(&i.to_le_bytes());
        assert_eq!(decoded.contains_hash(h), f.contains_hash(h));
    }
}

#[test]
fn ribbon_fixture_is_frozen() {
    // Decoding and querying are the format: these must never change, for
    // either version.
    let v1 = RibbonFilter::from_bytes(&unhex(RIBBON_V1_HEX)).unwrap();
    let bytes = unhex(RIBBON_V2_HEX);
    let decoded = RibbonFilter::from_bytes(&bytes).unwrap();
    assert_eq!(v1, decoded, "version 1 reads as the same filter");
    assert_eq!(v1.to_bytes(), bytes, "and is written back as version 2");
    assert_eq!(
        (decoded.seed(), decoded.len(), decoded.num_hashes()),
        (206, 3, 2)
    );
    assert_eq!(
        AnyFilter::from_bytes(&bytes).unwrap().kind(),
        FilterKind::Ribbon
    );
    for k in [&b"a"[..], b"b", b"c"] {
        assert!(decoded.contains(k));
    }
    let maybe: Vec<u32> = (0..64u32)
        .filter(|i| decoded.contains(&i.to_le_bytes()))
        .collect();
    assert_eq!(maybe, RIBBON_MAYBE);
    // Construction is deterministic too. (Unlike the lines above, this may
    // be updated, deliberately, if the construction changes: any correct
    // construction solves the same equations, which is all a reader needs.)
    assert_eq!(
        RibbonFilter::from_keys([&b"a"[..], b"b", b"c"], 2.0).to_bytes(),
        bytes
    );
}

#[test]
fn ribbon_head_and_tail_fixture_is_frozen() {
    let bytes = unhex(RIBBON_SPLIT_HEX);
    let decoded = RibbonFilter::from_bytes(&bytes).unwrap();
    assert_eq!(
        (decoded.seed(), decoded.num_hashes(), decoded.num_bits()),
        (206, 6, 11 * 128)
    );
    for k in [&b"a"[..], b"b", b"c"] {
        assert!(decoded.contains(k));
    }
    let maybe: Vec<u32> = (0..256u32)
        .filter(|i| decoded.contains(&i.to_le_bytes()))
        .collect();
    assert_eq!(maybe, RIBBON_SPLIT_MAYBE);
    let spec: Vec<u32> = (0..256u32)
        .filter(|i| spec_query(&bytes, KeyHash::of(&i.to_le_bytes()).raw()))
        .collect();
    assert_eq!(spec, RIBBON_SPLIT_MAYBE);
    // Construction (may be updated deliberately, as above).
    assert_eq!(
        RibbonFilter::from_keys([&b"a"[..], b"b", b"c"], 5.5).to_bytes(),
        bytes
    );
}

#[test]
fn ribbon_of_a_thousand_keys_is_frozen() {
    let f = RibbonFilter::from_keys((0..1000u32).map(|i| i.to_le_bytes()), 7.0);
    assert_eq!((f.seed(), f.to_bytes().len()), (95, 928));
    let maybe: Vec<u32> = (1000..1400u32)
        .filter(|i| f.contains(&i.to_le_bytes()))
        .collect();
    assert_eq!(maybe, [1086, 1117, 1119, 1182, 1199, 1278]);
    // The checksum of everything before it. (The crc32 of a filter's whole
    // bytes, checksum included, is the same for every valid filter, the
    // CRC residue 0x2144_df1c: that is what this line checked before
    // format version 2, which pinned nothing.)
    let bytes = f.to_bytes();
    assert_eq!(crc32(&bytes[..bytes.len() - 4]), 0x6625_04f1);
    assert_eq!(crc32(&bytes), 0x2144_df1c);
}

fn crc32(bytes: &[u8]) -> u32 {
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

fn mix64(v: u64) -> u64 {
    let mut x = v ^ (v >> 33);
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The Ribbon query exactly as `sstable/FORMAT.md` states it, from the
/// serialized bytes alone, for format versions 1 and 2.
fn spec_query(bytes: &[u8], h: u64) -> bool {
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (k, m) = (u64::from(u32_at(16)), u64_at(20));
    let (b, s) = (u64::from(u32_at(36)), u64::from(u32_at(40)));
    if b == 0 {
        return false;
    }
    let segments = m / 128;
    let seg = |i: u64| {
        let at = 44 + 16 * i as usize;
        u128::from_le_bytes(bytes[at..at + 16].try_into().unwrap())
    };
    let u = segments.div_ceil(b);
    assert_eq!(u, k);
    let lower = u * b - segments;
    let columns = |j: u64| if j < lower { u - 1 } else { u };
    // Version 1: block j's columns from segment j u - min(j, L) on.
    // Version 2: heads of min(4, fewest columns) columns, then tails.
    let head = 4.min(if lower > 0 { u - 1 } else { u });
    let place = |j: u64, i: u64| match version {
        1 => j * u - j.min(lower) + i,
        2 if i < head => j * head + i,
        2 => b * head + j * (u - head) - j.min(lower) + (i - head),
        _ => panic!("version {version}"),
    };
    let x = (h ^ mix64(s ^ 0x614f_d729_fd4c_5389)).wrapping_mul(0x833c_792a_e7bd_c8eb);
    let p = ((u128::from(x) * u128::from(128 * b - 127)) >> 64) as u64;
    let (j, o) = (p / 128, (p % 128) as u32);
    let y = mix64(x ^ 0x1c93_d0e2_1e86_3ed1);
    let c = ((u128::from(y) * u128::from(0xd545_3ea6_c191_d439u64)) ^ (u128::from(y) << 64)) | 1;
    let r = ((x ^ (x >> 29)).wrapping_mul(0x99ba_7935_1750_b503) >> 32) as u32;
    (0..columns(j)).all(|i| {
        let mut v = seg(place(j, i)) & (c << o);
        if o > 0 {
            v ^= seg(place(j + 1, i)) & (c >> (128 - o));
        }
        v.count_ones() % 2 == (r >> i) & 1
    })
}

#[test]
fn ribbon_query_as_the_format_states_it() {
    for hex in [RIBBON_V1_HEX, RIBBON_V2_HEX] {
        let bytes = unhex(hex);
        let maybe: Vec<u32> = (0..64u32)
            .filter(|i| spec_query(&bytes, KeyHash::of(&i.to_le_bytes()).raw()))
            .collect();
        assert_eq!(maybe, RIBBON_MAYBE);
    }
    // A filter with two column counts (7 bits per key: 6 and 7 columns).
    let f = RibbonFilter::from_keys((0..1000u32).map(|i| i.to_le_bytes()), 7.0);
    let bytes = f.to_bytes();
    assert!(f.mean_columns().fract() > 0.0);
    for i in 0..20_000u32 {
        let h = KeyHash::of(&i.to_le_bytes());
        assert_eq!(spec_query(&bytes, h.raw()), f.contains_hash(h), "key {i}");
    }
}
