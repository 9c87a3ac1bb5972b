//! A manifest whose tables break the tree's order (checksummed, so only a
//! bug or a hand edit makes one) is refused at open with a typed reason:
//! a lookup in such a tree could return an older version of a key.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

mod common;

use bloomlsm::{Damage, Db, Error, Options, TreeOrderError};
use common::{fill, key};

/// One table record of the manifest, as its layout in `manifest.rs` says.
struct Record {
    level: u32,
    numbers: [u64; 5], // number, file size, entries, smallest seq, largest seq
    keys: [Vec<u8>; 2],
}

struct Manifest {
    version: u32,
    counters: [u64; 3],
    tables: Vec<Record>,
}

fn u32_at(b: &[u8], at: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
    *at += 4;
    v
}

fn u64_at(b: &[u8], at: &mut usize) -> u64 {
    let v = u64::from_le_bytes(b[*at..*at + 8].try_into().unwrap());
    *at += 8;
    v
}

fn read_manifest(dir: &std::path::Path) -> Manifest {
    let bytes = std::fs::read(dir.join("MANIFEST")).unwrap();
    let mut at = 8;
    let version = u32_at(&bytes, &mut at);
    at += 8; // payload length, crc
    let counters = [(); 3].map(|_| u64_at(&bytes, &mut at));
    let count = u32_at(&bytes, &mut at);
    let tables = (0..count)
        .map(|_| {
            let level = u32_at(&bytes, &mut at);
            let numbers = [(); 5].map(|_| u64_at(&bytes, &mut at));
            let keys = [(); 2].map(|_| {
                let len = u32_at(&bytes, &mut at) as usize;
                at += len;
                bytes[at - len..at].to_vec()
            });
            Record {
                level,
                numbers,
                keys,
            }
        })
        .collect();
    assert_eq!(at, bytes.len(), "the test's reading of the layout");
    Manifest {
        version,
        counters,
        tables,
    }
}

fn write_manifest(dir: &std::path::Path, m: &Manifest) {
    let mut payload = Vec::new();
    for c in m.counters {
        payload.extend_from_slice(&c.to_le_bytes());
    }
    payload.extend_from_slice(&(m.tables.len() as u32).to_le_bytes());
    for t in &m.tables {
        payload.extend_from_slice(&t.level.to_le_bytes());
        for n in t.numbers {
            payload.extend_from_slice(&n.to_le_bytes());
        }
        for k in &t.keys {
            payload.extend_from_slice(&(k.len() as u32).to_le_bytes());
            payload.extend_from_slice(k);
        }
    }
    let mut out = std::fs::read(dir.join("MANIFEST")).unwrap()[..8].to_vec();
    out.extend_from_slice(&m.version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..16]);
    crc.update(&payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&payload);
    std::fs::write(dir.join("MANIFEST"), out).unwrap();
}

/// A closed store with two L0 tables holding the same keys, the second
/// written after the first.
fn two_l0_tables() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    fill(&db, 500);
    db.flush().unwrap();
    for i in 0..500 {
        db.put(&key(i), b"newer").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let m = read_manifest(dir.path());
    assert_eq!(m.tables.len(), 2);
    assert!(m.tables.iter().all(|t| t.level == 0));
    dir
}

fn tree_order_reason(err: Error) -> TreeOrderError {
    match err {
        Error::Corruption {
            reason: Damage::TreeOrder(reason),
            ..
        } => reason,
        other => panic!("expected a tree-order refusal, got {other}"),
    }
}

#[test]
fn l0_tables_with_overlapping_sequences_are_refused() {
    let dir = two_l0_tables();
    let mut m = read_manifest(dir.path());
    let oldest_start = m.tables.iter().map(|t| t.numbers[3]).min().unwrap();
    for t in &mut m.tables {
        t.numbers[3] = oldest_start; // both ranges now start at the first write
    }
    write_manifest(dir.path(), &m);
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.to_string().contains("MANIFEST"), "{err}");
    assert!(matches!(
        tree_order_reason(err),
        TreeOrderError::L0Sequences { .. }
    ));
}

#[test]
fn sorted_level_tables_sharing_keys_are_refused() {
    let dir = two_l0_tables();
    let mut m = read_manifest(dir.path());
    for t in &mut m.tables {
        t.level = 1; // both hold key(0)..key(499)
    }
    write_manifest(dir.path(), &m);
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    let numbers = [m.tables[0].numbers[0], m.tables[1].numbers[0]];
    match tree_order_reason(err) {
        TreeOrderError::LevelKeys {
            level: 1,
            first,
            second,
        } => assert!(numbers.contains(&first) && numbers.contains(&second) && first != second),
        other => panic!("expected two L1 tables sharing keys, got {other}"),
    }
}

#[test]
fn the_untouched_manifest_opens() {
    let dir = two_l0_tables();
    let m = read_manifest(dir.path());
    write_manifest(dir.path(), &m);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(&key(7)).unwrap().as_deref(), Some(&b"newer"[..]));
    db.close().unwrap();
}
