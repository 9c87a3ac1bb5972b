use proptest::prelude::*;

use super::*;
use crate::format::{FORMAT_VERSION, OLDEST_FORMAT_VERSION, TRAILER_LEN};

/// [`super::decode`] where memory is granted (every index here is small).
fn decode(version: u32, bytes: Vec<u8>, limit: u64) -> Result<TableIndex, BlockError> {
    super::decode(version, bytes, limit).expect("memory for a small index")
}

/// Blocks of `sizes` bytes tiling the file from 0, with separators `keys`.
fn written(version: u32, keys: &[(&[u8], u64)], sizes: &[u64]) -> Vec<u8> {
    let mut writer = IndexBlockWriter::new(version);
    let mut offset = 0;
    for (&(key, seq), &size) in keys.iter().zip(sizes) {
        writer.add(key, seq, BlockHandle { offset, size });
        offset = offset.wrapping_add(size).wrapping_add(TRAILER_LEN as u64);
    }
    writer.finish()
}

fn entries(index: &TableIndex) -> Vec<(Vec<u8>, bool, BlockHandle)> {
    (0..index.len())
        .map(|i| {
            let key = index.key(i).to_vec();
            let exact = index.ends_with_version_of(i, &key);
            (key, exact, index.handle(i))
        })
        .collect()
}

const KEYS: [(&[u8], u64); 5] = [
    (b"apple", 0),
    (b"apr", 0),
    (b"b", 9),
    (b"b", 4),
    (b"zzzz-the-last-key", 0),
];
const SIZES: [u64; 5] = [4000, 4100, 0, 70_000_000, 1];

#[test]
fn both_versions_decode_to_the_same_index() {
    let limit = SIZES.iter().map(|s| s + TRAILER_LEN as u64).sum::<u64>();
    let decoded: Vec<_> = [OLDEST_FORMAT_VERSION, FORMAT_VERSION]
        .map(|v| entries(&decode(v, written(v, &KEYS, &SIZES), limit).unwrap()))
        .into();
    assert_eq!(decoded[0], decoded[1]);
    assert_eq!(decoded[0].len(), 5);
    assert_eq!(
        decoded[0][2],
        (
            b"b".to_vec(),
            true,
            BlockHandle {
                offset: 8100 + 2 * TRAILER_LEN as u64,
                size: 0
            }
        )
    );
    // One byte short of the last block's end.
    for v in [OLDEST_FORMAT_VERSION, FORMAT_VERSION] {
        assert!(matches!(
            decode(v, written(v, &KEYS, &SIZES), limit - 1),
            Err(BlockError::PastEnd { .. })
        ));
    }
}

#[test]
fn version_2_is_smaller() {
    let keys: Vec<Vec<u8>> = (0..100u32)
        .map(|i| format!("user{:012}", i * 7919).into_bytes())
        .collect();
    let seps: Vec<(&[u8], u64)> = keys.iter().map(|k| (k.as_slice(), 0)).collect();
    let sizes = vec![4096; 100];
    let (v1, v2) = (written(1, &seps, &sizes), written(2, &seps, &sizes));
    // Version 1: varints, a 24-byte internal key, a 16-byte handle and a
    // restart a block. Version 2: the key's new bytes, four varints.
    assert!(v2.len() * 3 < v1.len(), "{} against {}", v2.len(), v1.len());
}

#[test]
fn version_2_damage_is_named() {
    let limit = u64::MAX;
    let good = written(2, &KEYS, &SIZES);
    assert!(matches!(
        decode(2, Vec::new(), limit),
        Err(BlockError::NoEntries)
    ));
    // Every cut inside an entry is a malformed entry at that entry's start.
    let starts = entry_starts(&good);
    for cut in 1..good.len() {
        if starts.contains(&cut) {
            assert!(
                decode(2, good[..cut].to_vec(), limit).is_ok(),
                "cut at {cut}"
            );
            continue;
        }
        let at = *starts.iter().filter(|&&s| s < cut).max().unwrap();
        assert_eq!(
            decode(2, good[..cut].to_vec(), limit).err(),
            Some(BlockError::MalformedEntry { offset: at }),
            "cut at {cut}"
        );
    }
    // The first entry claims a shared prefix.
    let mut bad = good.clone();
    bad[0] = 1;
    assert_eq!(
        decode(2, bad, limit).err(),
        Some(BlockError::SharesTooMuch {
            offset: 0,
            shared: 1,
            previous_len: 0
        })
    );
    // Separators out of order: the same key twice with the same sequence.
    let same = written(2, &[(b"k", 0), (b"k", 0)], &[1, 1]);
    assert_eq!(
        decode(2, same, limit).err(),
        Some(BlockError::IndexOutOfOrder { offset: 5 })
    );
    // A sequence number past 56 bits.
    let mut bytes = Vec::new();
    for v in [0, 1] {
        varint::put_u64(&mut bytes, v);
    }
    bytes.push(b'k');
    varint::put_u64(&mut bytes, MAX_SEQUENCE + 1);
    varint::put_u64(&mut bytes, 1);
    assert_eq!(
        decode(2, bytes, limit).err(),
        Some(BlockError::MalformedEntry { offset: 0 })
    );
    // A size whose end overflows.
    let huge = written(2, &[(b"k", 0)], &[u64::MAX - 2]);
    assert!(matches!(
        decode(2, huge, limit),
        Err(BlockError::PastEnd { .. })
    ));
}

/// An index whose entries each reuse a long previous key whole, in a few
/// bytes, is refused at the entry whose separators pass the bytes before
/// the index, not after holding all of them.
#[test]
fn separators_past_the_data_region_are_refused_as_they_come() {
    let long = vec![b'k'; 1000];
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    let mut entry = |shared: u64, delta: &[u8]| {
        starts.push(bytes.len());
        for v in [shared, delta.len() as u64] {
            varint::put_u64(&mut bytes, v);
        }
        bytes.extend_from_slice(delta);
        for v in [0, 1] {
            varint::put_u64(&mut bytes, v);
        }
    };
    entry(0, &long);
    for i in 1..=100u8 {
        entry(1000, &[i]);
    }
    // 1,000 bytes, then 1,001 more an entry: past 20,000 at the 20th entry.
    assert_eq!(
        decode(2, bytes.clone(), 20_000).err(),
        Some(BlockError::IndexKeysPastData {
            offset: starts[19],
            key_bytes: 1000 + 19 * 1001,
            limit: 20_000,
        })
    );
    assert_eq!(decode(2, bytes, 1000 + 100 * 1001).unwrap().len(), 101);
}

/// Where each entry of a well-formed version 2 block begins.
fn entry_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        starts.push(at);
        let mut read = || {
            let (v, n) = varint::get_u64(&bytes[at..]).unwrap();
            at += n;
            v
        };
        let (_, unshared) = (read(), read());
        at += unshared as usize;
        let mut read = || {
            let (v, n) = varint::get_u64(&bytes[at..]).unwrap();
            at += n;
            v
        };
        let _ = (read(), read());
    }
    starts
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        limit in any::<u64>(),
    ) {
        for version in [OLDEST_FORMAT_VERSION, FORMAT_VERSION] {
            let _ = decode(version, bytes.clone(), limit);
        }
    }

    #[test]
    fn written_indexes_read_back(
        mut keys in proptest::collection::btree_set(
            proptest::collection::vec(any::<u8>(), 1..12), 1..40),
        sizes in proptest::collection::vec(0u64..100_000, 40),
        seqs in proptest::collection::vec(prop_oneof![Just(0u64), 1..=MAX_SEQUENCE], 40),
    ) {
        let keys: Vec<Vec<u8>> = std::mem::take(&mut keys).into_iter().collect();
        let seps: Vec<(&[u8], u64)> =
            keys.iter().zip(&seqs).map(|(k, &s)| (k.as_slice(), s)).collect();
        let limit = u64::MAX;
        let a = entries(&decode(1, written(1, &seps, &sizes), limit).unwrap());
        let b = entries(&decode(2, written(2, &seps, &sizes), limit).unwrap());
        prop_assert_eq!(&a, &b);
        for (i, (key, _, handle)) in b.iter().enumerate() {
            prop_assert_eq!(key.as_slice(), seps[i].0);
            prop_assert_eq!(handle.size, sizes[i]);
        }
    }

    /// A valid version 2 block with one byte changed decodes or is refused;
    /// whatever it decodes to still tiles and ascends (the decoder's
    /// checks, not the writer's, hold it).
    #[test]
    fn edited_blocks_decode_only_to_valid_indexes(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = written(2, &KEYS, &SIZES);
        let i = at.index(bytes.len());
        bytes[i] = byte;
        if let Ok(index) = decode(2, bytes, u64::MAX) {
            let e = entries(&index);
            for pair in e.windows(2) {
                prop_assert_eq!(pair[1].2.offset, pair[0].2.offset + pair[0].2.size + TRAILER_LEN as u64);
            }
            prop_assert_eq!(e[0].2.offset, 0);
        }
    }
}
