//! `MemSource`: a scan reads a memtable a chunk at a time, each chunk
//! resuming strictly after the last version read. Shapes that break a
//! resumption: one key with more versions than several chunks, version 0,
//! keys that are prefixes of one another (the resume key `key + [0]` is
//! itself a key), ends included at such a key, and versions inserted
//! between chunks, before, at and after the resume point.

use std::sync::Arc;

use bloomlsm_sstable::{Entry, EntryKind};

use super::{MEM_CHUNK_FIRST, MEM_CHUNK_MAX, MemSource};
use crate::memtable::MemTable;

fn source(mem: &Arc<MemTable>, from: &[u8], end: Option<&[u8]>) -> MemSource {
    MemSource {
        mem: Arc::clone(mem),
        resume: Some((from.to_vec(), u64::MAX)),
        end: end.map(<[u8]>::to_vec),
        chunk: Vec::new().into_iter(),
        chunk_len: MEM_CHUNK_FIRST,
    }
}

fn read_all(s: MemSource) -> Vec<(Vec<u8>, u64)> {
    s.map(|r| {
        let Entry { user_key, seq, .. } = r.unwrap();
        (user_key, seq)
    })
    .collect()
}

/// (key, seq) of `model` within `[from, end)` in table order.
fn expected(model: &[(Vec<u8>, u64)], from: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, u64)> {
    let mut v: Vec<_> = model
        .iter()
        .filter(|(k, _)| k.as_slice() >= from && end.is_none_or(|e| k.as_slice() < e))
        .cloned()
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    v
}

/// Keys that are prefixes of one another, each `key + [0]` of the one
/// before among them, and bytes 0 and 0xff.
fn prefix_keys() -> Vec<Vec<u8>> {
    vec![
        vec![0],
        vec![0, 0],
        vec![0, 0, 0],
        vec![0, 1],
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"a\0\0".to_vec(),
        b"a\x01".to_vec(),
        b"ab".to_vec(),
        vec![b'b', 0xff],
        vec![b'b', 0xff, 0],
        vec![0xff; 9],
    ]
}

#[test]
fn chunks_list_every_version_once_across_chunk_ends() {
    let keys = prefix_keys();
    let mem = Arc::new(MemTable::new(1));
    let mut model = Vec::new();
    let mut seq = 0;
    // Version counts around every chunk size, so chunk ends fall at a
    // key's first, middle and last version (version 0 included).
    let counts = [
        1,
        15,
        16,
        17,
        33,
        MEM_CHUNK_MAX - 1,
        2 * MEM_CHUNK_MAX + 3,
        2,
    ];
    for (i, k) in keys.iter().enumerate() {
        for _ in 0..counts[i % counts.len()] {
            let kind = if seq % 5 == 0 {
                EntryKind::Delete
            } else {
                EntryKind::Put
            };
            mem.insert(k, seq, kind, b"v");
            model.push((k.clone(), seq));
            seq += 1;
        }
    }
    let mut bounds: Vec<Vec<u8>> = keys.clone();
    bounds.extend(keys.iter().map(|k| [k.as_slice(), &[0]].concat()));
    bounds.push(Vec::new());
    for from in &bounds {
        let mut ends: Vec<Option<&[u8]>> = bounds.iter().map(|e| Some(e.as_slice())).collect();
        ends.push(None);
        for end in ends {
            let got = read_all(source(&mem, from, end));
            assert_eq!(
                got,
                expected(&model, from, end),
                "from {from:?} end {end:?}"
            );
        }
    }
}

#[test]
fn version_zero_at_a_chunk_end_resumes_at_the_next_key_not_its_own_extension() {
    // Key "k" has exactly MEM_CHUNK_FIRST versions down to 0, so the first
    // chunk ends at ("k", 0); "k\0" is the next key and must be read.
    let mem = Arc::new(MemTable::new(1));
    let mut model = Vec::new();
    for seq in 0..MEM_CHUNK_FIRST as u64 {
        mem.insert(b"k", seq, EntryKind::Put, b"v");
        model.push((b"k".to_vec(), seq));
    }
    for (k, seq) in [
        (&b"k\0"[..], 100),
        (b"k\0", 0),
        (b"k\0\0", 0),
        (b"k\x01", 7),
    ] {
        mem.insert(k, seq, EntryKind::Put, b"v");
        model.push((k.to_vec(), seq));
    }
    assert_eq!(
        read_all(source(&mem, b"", None)),
        expected(&model, b"", None)
    );
    // An end included at "k\0" (`mem_end` "k\0\0"): "k\0"'s versions in.
    let end: &[u8] = b"k\0\0";
    assert_eq!(
        read_all(source(&mem, b"k", Some(end))),
        expected(&model, b"k", Some(end))
    );
}

#[test]
fn versions_inserted_between_chunks_are_newer_and_never_disturb_the_older_ones() {
    let keys = prefix_keys();
    let mem = Arc::new(MemTable::new(1));
    let mut model = Vec::new();
    let mut seq = 0;
    for round in 0..40 {
        for k in &keys {
            if (round + k.len()) % 3 != 0 {
                mem.insert(k, seq, EntryKind::Put, b"old");
                model.push((k.clone(), seq));
                seq += 1;
            }
        }
    }
    let scan_seq = seq - 1;
    let s = source(&mem, b"", None);
    let mut got = Vec::new();
    let mut last: Option<(Vec<u8>, u64)> = None;
    let mut i = 0u64;
    for r in s {
        let e = r.unwrap();
        if let Some((k, q)) = &last {
            assert!(
                (k.as_slice(), std::cmp::Reverse(*q))
                    < (e.user_key.as_slice(), std::cmp::Reverse(e.seq)),
                "out of order or twice: {k:?}@{q} then {:?}@{}",
                e.user_key,
                e.seq
            );
        }
        last = Some((e.user_key.clone(), e.seq));
        if e.seq <= scan_seq {
            got.push((e.user_key.clone(), e.seq));
        }
        // A writer meanwhile: newer versions of the key just read, of the
        // key `key + [0]` the next chunk may resume at, and of others.
        i += 1;
        let others = [
            e.user_key.clone(),
            [e.user_key.as_slice(), &[0]].concat(),
            keys[(i as usize) % keys.len()].clone(),
        ];
        for k in &others {
            mem.insert(k, seq, EntryKind::Put, b"new");
            seq += 1;
        }
    }
    assert_eq!(got, expected(&model, b"", None));
}
