//! Review tests: every query path against the portable one on every
//! layout shape a header may claim (including shapes the builder never
//! makes), with keys aimed at block edges; and builds from hashes aimed at
//! the last block, with no false negatives on any path.

use super::solution::{Span, matches};
use super::*;

/// SplitMix64: a small deterministic generator.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The hasher's odd multiplier (FROZEN in `hasher`), to invert `seeded`.
const SEEDED_MULTIPLIER: u64 = 0x833c_792a_e7bd_c8eb;

/// The inverse of odd `m` modulo 2^64 (Newton's iteration).
fn inverse(m: u64) -> u64 {
    let mut x = m;
    for _ in 0..6 {
        x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
    }
    x
}

/// A key hash whose seeded value under `hasher` is `x`.
pub(super) fn hash_for(hasher: &RibbonHasher, x: u64) -> KeyHash {
    let m_inv = inverse(SEEDED_MULTIPLIER);
    // seeded(h) = (h ^ r) * M, so r = seeded(0) * M^-1.
    let r = hasher.seeded(KeyHash::from_raw(0)).wrapping_mul(m_inv);
    let h = KeyHash::from_raw(x.wrapping_mul(m_inv) ^ r);
    assert_eq!(hasher.seeded(h), x);
    h
}

/// A seeded value whose start is `start` (of `num_starts`), anywhere in
/// the range of those.
pub(super) fn x_at_start(start: u64, num_starts: u64, rng: &mut Rng) -> u64 {
    let first = ((u128::from(start) << 64).div_ceil(u128::from(num_starts))) as u64;
    let end = ((u128::from(start + 1) << 64).div_ceil(u128::from(num_starts))).min(1 << 64);
    let width = (end - u128::from(first)) as u64;
    first + rng.next() % width.max(1)
}

/// The bytes of a Ribbon filter whose header claims `num_blocks` blocks,
/// `num_segments` segments and `num_hashes` columns (any of them
/// inconsistent, for the decoder to refuse), random solution bits.
pub(super) fn claimed_bytes(
    num_blocks: u32,
    num_segments: u64,
    num_hashes: u32,
    seed: u32,
    items: u64,
    v1: bool,
    rng: &mut Rng,
) -> Vec<u8> {
    let mut payload =
        codec::encode_ribbon_params(codec::RibbonParams { num_blocks, seed }).to_vec();
    for _ in 0..num_segments * 2 {
        payload.extend_from_slice(&rng.next().to_le_bytes());
    }
    let mut bytes = codec::encode(
        FilterKind::Ribbon,
        num_hashes,
        num_segments * COEFF_BITS,
        items,
        &payload,
    );
    if v1 {
        bytes[4..6].copy_from_slice(&codec::FILTER_FORMAT_VERSION.to_le_bytes());
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
    bytes
}

/// The bytes of a filter of `num_blocks` blocks and `num_segments`
/// segments of random solution bits, as a header may claim them.
fn hostile_bytes(
    num_blocks: u32,
    num_segments: u64,
    seed: u32,
    v1: bool,
    rng: &mut Rng,
) -> Vec<u8> {
    let layout = Layout::new(u64::from(num_blocks), num_segments);
    let items = rng.next() % 1000;
    claimed_bytes(
        num_blocks,
        num_segments,
        layout.upper_columns(),
        seed,
        items,
        v1,
        rng,
    )
}

/// Probes aimed at every block edge (first and second start of each
/// block, the last start before it) and random ones.
fn probes(f: &RibbonFilter, random: usize, rng: &mut Rng) -> Vec<KeyHash> {
    let num_starts = f.layout.num_starts();
    let mut starts = vec![0, 1, num_starts - 1, num_starts.saturating_sub(2)];
    let blocks = f.layout.num_blocks();
    let edges: Vec<u64> = if blocks <= 64 {
        (0..blocks).collect()
    } else {
        (0..8).chain(blocks - 8..blocks).collect()
    };
    for b in edges {
        for s in [
            b * COEFF_BITS,
            b * COEFF_BITS + 1,
            (b * COEFF_BITS).wrapping_sub(1),
        ] {
            if s < num_starts {
                starts.push(s);
            }
        }
    }
    let mut out = Vec::new();
    for &s in &starts {
        for _ in 0..6 {
            out.push(hash_for(&f.hasher, x_at_start(s, num_starts, rng)));
        }
    }
    for x in [0, u64::MAX] {
        out.push(hash_for(&f.hasher, x));
    }
    for _ in 0..random {
        out.push(KeyHash::from_raw(rng.next()));
    }
    out
}

/// Every query path gives the portable path's answer for `h`.
pub(super) fn assert_paths_agree(f: &RibbonFilter, h: KeyHash, what: &str) -> bool {
    let portable = f.contains_portable(h);
    assert_eq!(f.contains_hash(h), portable, "{what} {h:?}");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has popcnt, checked just above.
        assert_eq!(unsafe { f.contains_popcnt(h) }, portable, "{what} {h:?}");
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 and popcnt, checked above.
            let avx2 = unsafe { query_avx2::contains(f, h) };
            assert_eq!(avx2, portable, "{what} {h:?}");
        }
    }
    portable
}

#[test]
fn avx2_is_what_this_cpu_runs() {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt");
        let chosen = super::query() as *const () as usize;
        println!("avx2 detected: {avx2}");
        if avx2 {
            let avx2_copy: super::Query = super::query_avx2::contains;
            assert_eq!(chosen, avx2_copy as *const () as usize);
        }
    }
}

/// Decoded filters of every shape over small block counts (every segment
/// count the format allows: 0 to 32 columns, every head and tail length,
/// both mixes of column counts), both format versions, random solution
/// bits: every path agrees on keys at every block edge.
#[test]
fn every_decoded_shape_answers_alike_on_every_path() {
    let mut rng = Rng(0x5eed);
    let mut shapes = 0;
    for num_blocks in [2u32, 3, 4, 5, 8, 13] {
        for num_segments in 0..=u64::from(MAX_COLUMNS) * u64::from(num_blocks) {
            let seed = (rng.next() % 256) as u32;
            let v1 = rng.next().is_multiple_of(2);
            let bytes = hostile_bytes(num_blocks, num_segments, seed, v1, &mut rng);
            let f = RibbonFilter::from_bytes(&bytes).expect("a shape the format allows");
            let what = format!("{:?} v1={v1}", f.layout);
            for h in probes(&f, 200, &mut rng) {
                assert_paths_agree(&f, h, &what);
            }
            shapes += 1;
        }
    }
    assert!(shapes > 1000);
}

/// Large shapes a hostile header may claim: the most blocks with one to
/// three segments (no head, lower blocks of no columns), and many blocks
/// with a single upper block at the end or 32 columns everywhere.
#[test]
fn large_decoded_shapes_answer_alike_on_every_path() {
    let mut rng = Rng(0xb16);
    for (num_blocks, num_segments) in [
        (u32::MAX, 1u64),
        (u32::MAX, 3),
        (1 << 16, 4 << 16),
        (1 << 16, (4 << 16) + 1),
        (1 << 16, (5 << 16) - 1),
        (1 << 12, 32 << 12),
        (1 << 12, (32 << 12) - 1),
    ] {
        for v1 in [false, true] {
            let bytes = hostile_bytes(num_blocks, num_segments, 255, v1, &mut rng);
            let f = RibbonFilter::from_bytes(&bytes).expect("a shape the format allows");
            let what = format!("{:?} v1={v1}", f.layout);
            for h in probes(&f, 200, &mut rng) {
                assert_paths_agree(&f, h, &what);
            }
        }
    }
}

/// Bands keys all starting at the last start (or in the last two blocks)
/// under one seed: banding runs off no edge, fails cleanly when they
/// cannot all fit, and when it succeeds every key holds on every path.
#[test]
fn keys_piled_on_the_last_block_band_safely() {
    let mut rng = Rng(0x1a57);
    let (mut failed, mut solved) = (0, 0);
    for (num_blocks, columns) in [(2u64, 1u64), (2, 7), (3, 4), (5, 32), (9, 5)] {
        let layout = Layout::new(num_blocks, num_blocks * columns);
        let num_starts = layout.num_starts();
        for seed in [0u32, 17, 255] {
            let hasher = RibbonHasher::new(seed, num_starts);
            for n in [1usize, 2, 60, 120, 128, 129, 200, 1000] {
                for spread in [1u64, 2 * COEFF_BITS] {
                    let mut keys: Vec<KeyHash> = (0..n)
                        .map(|_| {
                            let start = num_starts - 1 - rng.next() % spread.min(num_starts);
                            hash_for(&hasher, x_at_start(start, num_starts, &mut rng))
                        })
                        .collect();
                    // Duplicates too.
                    keys.extend_from_within(..n / 3);
                    let mut band = Banding::new(layout.num_slots());
                    let mut order = Vec::new();
                    if !solve(&mut band, &keys, &layout, seed, &mut order) {
                        assert!(n > 60, "{n} keys failed {layout:?}");
                        failed += 1;
                        continue;
                    }
                    let solution = solution::back_substitute(&band, &layout);
                    for &h in &keys {
                        let x = hasher.seeded(h);
                        let span = Span::new(hasher.start(x), coefficients(x), result_bits(x));
                        assert!(matches(&solution, &layout, &span), "{layout:?} {n}");
                    }
                    let f = RibbonFilter::assemble(layout, seed, solution, keys.len() as u64);
                    for &h in &keys {
                        assert!(assert_paths_agree(&f, h, "piled"), "false negative");
                    }
                    solved += 1;
                }
            }
        }
    }
    // Both outcomes were reached.
    assert!(
        failed > 10 && solved > 10,
        "{failed} failed, {solved} solved"
    );
}

/// Whole builds whose first seed (taken from the first hash) sees every
/// key in the last block, so it fails part way and the band is cleared
/// for the next seed; and degenerate key sets. No false negatives, on any
/// path, and through the bytes.
#[test]
fn builds_from_hostile_hashes_hold_every_key() {
    let mut rng = Rng(0xfeed);
    let mut sets: Vec<Vec<KeyHash>> = vec![
        vec![KeyHash::from_raw(0)],
        vec![KeyHash::from_raw(u64::MAX)],
        vec![KeyHash::from_raw(7); 1000],
        vec![KeyHash::from_raw(0), KeyHash::from_raw(u64::MAX)],
    ];
    for n in [300u64, 3000] {
        // The layout every build of n keys starts from, at 8 bits per key.
        let layout = layout_for(RibbonTarget::BitsPerKey(8.0), n, blocks_for(n));
        let num_starts = layout.num_starts();
        let seed = 200;
        let hasher = RibbonHasher::new(seed, num_starts);
        let last = |rng: &mut Rng| hash_for(&hasher, x_at_start(num_starts - 1, num_starts, rng));
        let first = loop {
            let h = last(&mut rng);
            if (h.raw() >> 56) as u32 == seed {
                break h;
            }
        };
        let mut keys = vec![first];
        keys.extend((1..n).map(|_| last(&mut rng)));
        sets.push(keys);
    }
    for (i, keys) in sets.iter().enumerate() {
        for bpk in [1.0, 4.0, 8.0, 12.5] {
            let f = RibbonFilter::from_hashes(keys, bpk);
            if i >= 4 && bpk >= 4.0 {
                // The first seed could not hold them all: another was used.
                assert_ne!(f.seed(), 200);
                assert_eq!(keys[0].raw() >> 56, 200);
            }
            let back = RibbonFilter::from_bytes(&f.to_bytes()).expect("own bytes");
            for &h in keys {
                assert!(assert_paths_agree(&f, h, "built"), "false negative");
                assert!(back.contains_hash(h), "false negative after decoding");
            }
        }
    }
}

/// A few of the shapes above, small enough for Miri (which checks every
/// unchecked index and vector load): `cargo miri test` with AVX2 and
/// popcnt enabled at compile time runs the AVX2 copies.
#[test]
fn miri_sized_shapes_and_builds() {
    let mut rng = Rng(0x3141);
    for (num_blocks, num_segments) in [
        (2u32, 0u64),
        (2, 1),
        (2, 3),
        (2, 7),
        (2, 8),
        (2, 9),
        (2, 10),
        (2, 11),
        (2, 13),
        (2, 15),
        (2, 17),
        (2, 63),
        (2, 64),
        (3, 14),
        (3, 40),
        (3, 96),
    ] {
        for v1 in [false, true] {
            let bytes = hostile_bytes(num_blocks, num_segments, 3, v1, &mut rng);
            let f = RibbonFilter::from_bytes(&bytes).expect("a shape the format allows");
            for h in probes(&f, 4, &mut rng) {
                assert_paths_agree(&f, h, "miri");
            }
        }
    }
    for bpk in [3.0, 8.0, 12.5, 33.0] {
        let keys: Vec<KeyHash> = (0..40).map(|_| KeyHash::from_raw(rng.next())).collect();
        let f = RibbonFilter::from_hashes(&keys, bpk);
        for &h in &keys {
            assert!(assert_paths_agree(&f, h, "miri build"), "false negative");
        }
    }
}

/// Built filters at fractional bits per key (blocks of two column counts,
/// tails of 1 to 28 columns, every group count), probed with their own
/// keys (which pass every column: the whole tail is read) and absent ones,
/// then with one solution bit flipped at a time in the tail, so that
/// present keys fail at one column of one group: every path agrees with
/// the portable one.
#[test]
fn present_and_absent_keys_answer_alike_on_every_path() {
    let mut rng = Rng(0x7a11);
    for (n, bpk) in [
        (700u64, 4.6),
        (700, 5.0),
        (2000, 6.3),
        (2000, 8.0),
        (3000, 9.4),
        (3000, 10.0),
        (1500, 12.7),
        (1500, 16.2),
        (900, 23.5),
        (600, 31.9),
        (40, 7.3),
    ] {
        let keys: Vec<KeyHash> = (0..n).map(|_| KeyHash::from_raw(rng.next())).collect();
        let mut f = RibbonFilter::from_hashes(&keys, bpk);
        let what = format!("{bpk} bits per key {:?}", f.layout);
        for &h in &keys {
            assert!(assert_paths_agree(&f, h, &what), "false negative");
        }
        for h in probes(&f, 2000, &mut rng) {
            assert_paths_agree(&f, h, &what);
        }
        let tail_start = f.layout.num_blocks() * u64::from(f.layout.head_columns());
        let tail_len = f.layout.num_segments() - tail_start;
        for _ in 0..40.min(tail_len) {
            let at = (tail_start + rng.next() % tail_len) as usize;
            let flipped = f.solution.get(at) ^ (1u128 << (rng.next() % 128));
            f.solution.set(at, flipped);
            for &h in keys.iter().step_by(3) {
                assert_paths_agree(&f, h, &what);
            }
        }
    }
}
