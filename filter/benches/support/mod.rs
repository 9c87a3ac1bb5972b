//! What the Ribbon bench and `examples/ribbon_profile.rs` share.

use bloomlsm_filter::{
    BlockedBloomFilter, Filter, FilterKind, HASH_ID_XXH3_64, HASH_SEED, RibbonFilter, codec,
};

/// A bijective mix of a counter: random-looking hashes for free.
#[inline]
pub fn splitmix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A serialized Ribbon filter of `items` keys at `bits_per_key` whose
/// solution is random bytes: the layout of a built one, without building.
pub fn random_ribbon(items: u64, bits_per_key: f64) -> RibbonFilter {
    let sizing = bloomlsm_filter::ribbon_sizing(
        items,
        bloomlsm_filter::RibbonTarget::BitsPerKey(bits_per_key),
    );
    let blocks = sizing.slots / 128;
    let segments = sizing.solution_bytes / 16;
    let upper = segments.div_ceil(blocks) as u32;
    let mut bytes = Vec::with_capacity(codec::HEADER_LEN + 12 + sizing.solution_bytes as usize);
    bytes.extend_from_slice(&codec::FILTER_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&codec::RIBBON_FORMAT_VERSION.to_le_bytes());
    bytes.push(FilterKind::Ribbon.tag());
    bytes.push(HASH_ID_XXH3_64);
    bytes.extend_from_slice(&HASH_SEED.to_le_bytes());
    bytes.extend_from_slice(&upper.to_le_bytes());
    bytes.extend_from_slice(&(segments * 128).to_le_bytes());
    bytes.extend_from_slice(&items.to_le_bytes());
    // The payload: blocks, seed 0, the random solution.
    bytes.extend_from_slice(&(blocks as u32).to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    for i in 0..sizing.solution_bytes / 8 {
        bytes.extend_from_slice(&splitmix(i ^ (0x5eed << 48)).to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    match RibbonFilter::from_bytes(&bytes) {
        Ok(f) => f,
        Err(e) => panic!("random Ribbon filter does not decode: {e}"),
    }
}

/// A serialized blocked Bloom filter sized for `items` keys at
/// `bits_per_key`, with the k a built one has, whose bits are random with
/// density 7/16 (a built filter at 10 bits per key has about 0.45): an
/// absent key meets about the same work and exactly one cache line, and a
/// filter of gigabytes takes seconds, not minutes of inserts.
pub fn random_blocked(items: u64, bits_per_key: f64) -> BlockedBloomFilter {
    let shape =
        BlockedBloomFilter::new(64, bloomlsm_filter::math::blocked_num_hashes(bits_per_key));
    let blocks = ((items as f64 * bits_per_key) as u64).div_ceil(512).max(1);
    let words = blocks * 8;
    let mut bytes = Vec::with_capacity(codec::HEADER_LEN + 8 * words as usize + 4);
    bytes.extend_from_slice(&codec::FILTER_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&codec::FILTER_FORMAT_VERSION.to_le_bytes());
    bytes.push(FilterKind::Blocked.tag());
    bytes.push(HASH_ID_XXH3_64);
    bytes.extend_from_slice(&HASH_SEED.to_le_bytes());
    bytes.extend_from_slice(&shape.num_hashes().to_le_bytes());
    bytes.extend_from_slice(&(blocks * 512).to_le_bytes());
    bytes.extend_from_slice(&items.to_le_bytes());
    for i in 0..words {
        let r = |j: u64| splitmix((i * 4 + j) ^ (0xb10c << 48));
        let word = (r(0) & r(1)) | (r(2) & r(3));
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    match BlockedBloomFilter::from_bytes(&bytes) {
        Ok(f) => f,
        Err(e) => panic!("random blocked filter does not decode: {e}"),
    }
}
