//! Entry points for fuzz targets and property tests: the filter decoders
//! fed bytes that pass the checksum. Not part of the stable API.
//!
//! A serialized filter ends in a crc32 of everything before it (`codec`),
//! so random bytes are refused before any field is read. [`reseal`] builds
//! a frame from random bytes instead: the magic, a version, a kind and the
//! hash id and seed this build writes, the caller's k, m, item count,
//! Ribbon parameters and payload, and the right checksum, with m (and a
//! Ribbon filter's k) usually agreeing with the payload's length, so the
//! decoders behind the checksum see the random fields. [`exercise`] decodes
//! such bytes with every decoder and checks what they promise.

mod counting_alloc;
mod fields;
pub use counting_alloc::CountingAlloc;
pub use fields::Fields;

use crate::codec::{CHECKSUM_LEN, FILTER_MAGIC, HEADER_LEN, RIBBON_PARAMS_LEN};
use crate::{
    AnyFilter, BlockedBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterKind, KeyHash,
    RibbonFilter,
};
use crate::{HASH_ID_XXH3_64, HASH_SEED};

/// A serialized filter with a valid checksum, from `data`:
///
/// - byte 0: bits 0-1 the kind (standard, blocked, Ribbon, counting);
///   bit 2 the version (1 or 2); bit 3 set: m as given, else m agrees with
///   the payload's length; bit 4 set: k as given, else a k the kind
///   accepts (a Ribbon filter's k from its blocks and segments); bit 5 set:
///   the item count as given, else below 2^16; bits 6-7 both set: bytes
///   1..37 are the whole header as given (magic, version, kind, hash id
///   and seed too);
/// - then k (u32), m (u64), items (u64), and for a Ribbon filter its
///   parameters (blocks u32, seed u32; the seed below 256 unless bit 3);
/// - the rest is the payload (the bit array, counters or solution).
pub fn reseal(data: &[u8]) -> Vec<u8> {
    let Some((&ctl, rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut f = Fields(rest);
    let mut out = Vec::with_capacity(HEADER_LEN + data.len() + CHECKSUM_LEN);
    if ctl >> 6 == 3 {
        out.extend_from_slice(&f.take::<HEADER_LEN>());
        out.extend_from_slice(f.0);
        seal(&mut out);
        return out;
    }
    let kind = [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
        FilterKind::Counting,
    ][usize::from(ctl & 3)];
    let version: u16 = if ctl & 4 == 0 { 1 } else { 2 };
    let m_as_given = ctl & 8 != 0;
    let k_as_given = ctl & 16 != 0;
    let raw_k = f.u32();
    let raw_m = f.u64();
    let raw_items = f.u64();
    let items = if ctl & 32 != 0 {
        raw_items
    } else {
        raw_items & 0xffff
    };
    let (blocks, seed) = (f.u32(), f.u32());
    let mut payload = f.0.to_vec();
    let (k, m) = match kind {
        FilterKind::Standard => {
            payload.truncate(payload.len() / 8 * 8);
            // Any m whose words are the payload's: 8P - 63 ..= 8P bits.
            let m = (payload.len() as u64 * 8).saturating_sub(raw_m % 64);
            (1 + raw_k % 30, m)
        }
        FilterKind::Blocked => {
            payload.truncate(payload.len() / 64 * 64);
            (1 + raw_k % 30, payload.len() as u64 * 8)
        }
        FilterKind::Counting => {
            let m = (payload.len() as u64 * 2).saturating_sub(raw_m & 1);
            (1 + raw_k % 30, m)
        }
        FilterKind::Ribbon => {
            payload.truncate(payload.len() / 16 * 16);
            let segments = payload.len() as u64 / 16;
            let k = if blocks == 0 {
                0
            } else {
                segments.div_ceil(u64::from(blocks)) as u32
            };
            let mut params = Vec::with_capacity(RIBBON_PARAMS_LEN + payload.len());
            params.extend_from_slice(&blocks.to_le_bytes());
            let seed = if m_as_given { seed } else { seed % 256 };
            params.extend_from_slice(&seed.to_le_bytes());
            params.extend_from_slice(&payload);
            payload = params;
            (k, segments * 128)
        }
    };
    let k = if k_as_given { raw_k } else { k };
    let m = if m_as_given { raw_m } else { m };
    out.extend_from_slice(&FILTER_MAGIC.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.push(kind.tag());
    out.push(HASH_ID_XXH3_64);
    out.extend_from_slice(&HASH_SEED.to_le_bytes());
    out.extend_from_slice(&k.to_le_bytes());
    out.extend_from_slice(&m.to_le_bytes());
    out.extend_from_slice(&items.to_le_bytes());
    out.extend_from_slice(&payload);
    seal(&mut out);
    out
}

/// Appends the crc32 of `bytes`.
fn seal(bytes: &mut Vec<u8>) {
    let crc = crc32fast::hash(bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes `bytes` with every decoder and panics if one breaks a promise:
/// decoding never panics; the kind decoders agree with [`AnyFilter`]; a
/// decoded filter answers probes and reports its statistics (its fill and
/// rates in 0..=1), holds no
/// more memory than a small multiple of `bytes`, and re-encodes to `bytes`
/// when they are of the version this build writes for its kind (1 for the
/// Bloom kinds, 2 for Ribbon), else to bytes that decode to the same
/// filter. Returns whether any decoder accepted the bytes.
pub fn exercise(bytes: &[u8]) -> bool {
    let probes: Vec<KeyHash> = bytes
        .chunks(8)
        .take(32)
        .map(|c| {
            let mut raw = [0u8; 8];
            raw[..c.len()].copy_from_slice(c);
            KeyHash::from_raw(u64::from_le_bytes(raw))
        })
        .collect();
    let standard = BloomFilter::from_bytes(bytes).ok();
    let blocked = BlockedBloomFilter::from_bytes(bytes).ok();
    let ribbon = RibbonFilter::from_bytes(bytes).ok();
    let counting = CountingBloomFilter::from_bytes(bytes).ok();
    let any = AnyFilter::from_bytes(bytes).ok();
    let by_kind = match (&standard, &blocked, &ribbon) {
        (Some(f), None, None) => Some(AnyFilter::Standard(f.clone())),
        (None, Some(f), None) => Some(AnyFilter::Blocked(f.clone())),
        (None, None, Some(f)) => Some(AnyFilter::Ribbon(f.clone())),
        (None, None, None) => None,
        _ => panic!("bytes decode as more than one kind"),
    };
    assert_eq!(any, by_kind, "AnyFilter disagrees with the kind decoders");
    assert!(
        counting.is_none() || any.is_none(),
        "bytes decode as counting and as a table kind"
    );
    // A filter's memory is its payload's bytes (blocked: whole blocks).
    let bound = 2 * bytes.len() + 256;
    if let Some(f) = &any {
        let decode = |b: &[u8]| AnyFilter::from_bytes(b).ok();
        check(f, bytes, &probes, bound, decode, AnyFilter::to_bytes);
    }
    if let Some(f) = &counting {
        let decode = |b: &[u8]| CountingBloomFilter::from_bytes(b).ok();
        check(
            f,
            bytes,
            &probes,
            bound,
            decode,
            CountingBloomFilter::to_bytes,
        );
    }
    any.is_some() || counting.is_some()
}

fn check<F: Filter + PartialEq + std::fmt::Debug>(
    f: &F,
    bytes: &[u8],
    probes: &[KeyHash],
    bound: usize,
    decode: impl Fn(&[u8]) -> Option<F>,
    reencode: impl Fn(&F) -> Vec<u8>,
) {
    for &h in probes {
        let _ = f.contains_hash(h);
    }
    let _ = (f.num_bits(), f.num_hashes(), f.len(), f.estimated_items());
    // Rates and fractions, whatever the header says (`Stats` averages the
    // rates into the store's).
    for (what, p) in [
        ("fill ratio", f.fill_ratio()),
        ("theoretical rate", f.theoretical_fpr()),
        ("estimated rate", f.estimated_fpr()),
    ] {
        assert!((0.0..=1.0).contains(&p), "{what} {p}");
    }
    assert!(
        f.memory_bytes() <= bound,
        "a filter of {} bytes holds {} bytes",
        bytes.len(),
        f.memory_bytes()
    );
    let again = reencode(f);
    let written = if bytes.get(6) == Some(&FilterKind::Ribbon.tag()) {
        2u16
    } else {
        1
    };
    if bytes.get(4..6) == Some(&written.to_le_bytes()[..]) {
        assert_eq!(again, bytes, "re-encoding changed the bytes");
    } else {
        assert_eq!(
            decode(&again).as_ref(),
            Some(f),
            "re-encoding changed the filter"
        );
    }
}
