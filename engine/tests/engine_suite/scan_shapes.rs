//! Scans over sorted levels read one table after another
//! (`LevelSource`): a range that meets a level's tables only partly must
//! not open the tables outside it, and a bad block in a later table of a
//! level must end the scan with an error at that point, never skip the
//! table's keys silently, and nothing after the error.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use std::ops::Bound;

use bloomlsm::{Db, Options};
use common::{Rng, read_manifest, scratch_dir, short_key as key};

const KEYS: u64 = 4000;

fn options() -> Options {
    Options {
        memtable_bytes: 4096,
        target_file_bytes: 1024,
        l1_bytes: 4096,
        level_size_ratio: 4,
        block_size: 256,
        background_work: false,
        ..Options::default()
    }
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Items of `db.scan(range)` up to its first error: (pairs, error seen),
/// and checks the iterator yields nothing after an error.
fn scan_until_error(db: &Db, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> (Pairs, bool) {
    let mut it = match db.scan(range) {
        Ok(it) => it,
        Err(_) => return (Vec::new(), true),
    };
    let mut got = Vec::new();
    for r in it.by_ref() {
        match r {
            Ok(p) => got.push(p),
            Err(_) => {
                assert!(it.next().is_none(), "an item after the scan's error");
                return (got, true);
            }
        }
    }
    (got, false)
}

#[test]
fn a_bad_block_in_a_later_table_of_a_level_ends_the_scan_there() {
    let tmp = scratch_dir();
    let db = Db::open(tmp.path(), options()).unwrap();
    let mut rng = Rng(11);
    // Each key written once (values tell rounds apart), in scattered order.
    let mut order: Vec<u64> = (0..KEYS).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for &i in &order {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
    }
    db.close().unwrap();

    let manifest = read_manifest(tmp.path());
    let (level, mut tables) = (1..8u32)
        .map(|l| {
            let t: Vec<_> = manifest.tables.iter().filter(|t| t.level == l).collect();
            (l, t)
        })
        .max_by_key(|(_, t)| t.len())
        .unwrap();
    assert!(
        tables.len() >= 4,
        "L{level} holds {} tables: not the shape",
        tables.len()
    );
    tables.sort_by(|a, b| a.keys[0].cmp(&b.keys[0]));
    let (first, bad) = (tables[0], tables[1]);
    // A key of the bad table is in that table only (each written once).
    let path = tmp.path().join(format!("{:06}.sst", bad.numbers[0]));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 0x5a; // inside its first data block
    std::fs::write(&path, &bytes).unwrap();

    let db = Db::open(tmp.path(), options()).unwrap();
    let all: Pairs = {
        let mut v: Vec<u64> = (0..KEYS).collect();
        v.sort_by_key(|&i| key(i));
        v.into_iter()
            .map(|i| (key(i), format!("v{i}").into_bytes()))
            .collect()
    };
    let below = |k: &[u8], end: &[u8]| k < end;

    // The whole range: an error, after only keys below the bad table.
    let (got, failed) = scan_until_error(&db, (Bound::Unbounded, Bound::Unbounded));
    assert!(failed, "a scan over a bad block ended without an error");
    assert!(
        !got.is_empty(),
        "the error came at the scan's start: not the shape"
    );
    assert!(
        got.iter().all(|(k, _)| below(k, &bad.keys[0])),
        "a key at or past the bad table before its error"
    );
    assert_eq!(got[..], all[..got.len()], "the pairs before the error");

    // Ranges that end before the bad table never open it.
    for end in [
        Bound::Excluded(bad.keys[0].clone()),
        Bound::Included(first.keys[1].clone()),
    ] {
        for start in [
            Bound::Unbounded,
            Bound::Included(first.keys[0].clone()),
            Bound::Excluded(first.keys[1].clone()),
        ] {
            let (got, failed) = scan_until_error(&db, (start.clone(), end.clone()));
            assert!(!failed, "{start:?}..{end:?} read the bad table");
            let want: Pairs = all
                .iter()
                .filter(|(k, _)| (start.clone(), end.clone()).contains_key(k))
                .cloned()
                .collect();
            assert!(got == want, "{start:?}..{end:?}");
        }
    }

    // Ranges that start in or reach into the bad table fail.
    for start in [
        Bound::Unbounded,
        Bound::Included(first.keys[1].clone()),
        Bound::Excluded(first.keys[1].clone()),
        Bound::Included(bad.keys[0].clone()),
    ] {
        let (got, failed) =
            scan_until_error(&db, (start.clone(), Bound::Included(bad.keys[0].clone())));
        assert!(
            failed,
            "{start:?}..= the bad table's first key: no error ({} pairs)",
            got.len()
        );
        assert!(
            got.iter().all(|(k, _)| below(k, &bad.keys[0])),
            "{start:?}: past the error"
        );
    }

    // The good tables after the bad one still read on their own.
    let after = tables[2].keys[0].clone();
    let (got, failed) = scan_until_error(&db, (Bound::Included(after.clone()), Bound::Unbounded));
    assert!(!failed, "a scan after the bad table");
    let want: Pairs = all.iter().filter(|(k, _)| *k >= after).cloned().collect();
    assert!(got == want, "the pairs after the bad table");
}

trait ContainsKey {
    fn contains_key(&self, k: &[u8]) -> bool;
}

impl ContainsKey for (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    fn contains_key(&self, k: &[u8]) -> bool {
        let lo = match &self.0 {
            Bound::Included(s) => k >= s.as_slice(),
            Bound::Excluded(s) => k > s.as_slice(),
            Bound::Unbounded => true,
        };
        let hi = match &self.1 {
            Bound::Included(e) => k <= e.as_slice(),
            Bound::Excluded(e) => k < e.as_slice(),
            Bound::Unbounded => true,
        };
        lo && hi
    }
}

/// Keys that are prefixes of one another: each `k + [0]`, where a
/// memtable chunk resumes after `k`'s last version, is itself a key.
fn prefix_family() -> Vec<Vec<u8>> {
    [
        &b"a"[..],
        b"a\0",
        b"a\0\0",
        b"a\x01",
        b"ab",
        b"b",
        b"b\xff",
        b"b\xff\0",
    ]
    .map(<[u8]>::to_vec)
    .to_vec()
}

/// Scans of the active memtable with more versions of every key than the
/// largest chunk (so chunk ends fall inside a key's versions), keys that
/// are prefixes of one another, bounds at those keys, at snapshots and
/// now, read one pair at a time while the same keys and their `+ [0]`
/// extensions are written between reads.
#[test]
fn memtable_scans_over_prefix_keys_with_thousands_of_versions_each() {
    use std::collections::BTreeMap;
    let tmp = scratch_dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let keys = prefix_family();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snaps = Vec::new();
    for round in 0..1500u64 {
        for (i, k) in keys.iter().enumerate() {
            if (round + i as u64) % 7 == 3 {
                db.delete(k).unwrap();
                model.remove(k);
            } else {
                let v = format!("{round}-{i}").into_bytes();
                db.put(k, &v).unwrap();
                model.insert(k.clone(), v);
            }
        }
        if round % 300 == 299 {
            snaps.push((db.snapshot(), model.clone()));
        }
    }
    assert_eq!(db.stats().flushes, 0, "all in the memtable");
    let b = |k: &[u8]| k.to_vec();
    let ranges = [
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Included(b(b"a\0")), Bound::Included(b(b"a\0\0"))),
        (Bound::Excluded(b(b"a")), Bound::Excluded(b(b"b"))),
        (Bound::Excluded(b(b"a\0")), Bound::Included(b(b"a\0"))),
        (Bound::Included(b(b"a\0\0")), Bound::Unbounded),
        (Bound::Unbounded, Bound::Included(b(b"b\xff"))),
        (Bound::Excluded(b(b"b")), Bound::Included(b(b"b\xff\0"))),
    ];
    let mut extra = 0u64;
    for range in &ranges {
        for view in 0..=snaps.len() {
            let (snap, at) = match snaps.get(view) {
                Some((s, m)) => (Some(s), m.clone()),
                None => (None, model.clone()),
            };
            let want: Pairs = at
                .iter()
                .filter(|(k, _)| range.contains_key(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let it = match snap {
                Some(s) => s.scan(range.clone()).unwrap(),
                None => db.scan(range.clone()).unwrap(),
            };
            let mut got = Vec::new();
            for r in it {
                let (k, v) = r.unwrap();
                // Writes between reads: the key just read, its extension,
                // and a key of the family.
                for w in [
                    k.clone(),
                    [k.as_slice(), &[0]].concat(),
                    keys[(extra % 8) as usize].clone(),
                ] {
                    db.put(&w, b"later").unwrap();
                    model.insert(w, b"later".to_vec());
                    extra += 1;
                }
                got.push((k, v));
            }
            assert!(
                got == want,
                "{range:?} at {:?}: {} pairs, want {}",
                snap.map(bloomlsm::Snapshot::sequence),
                got.len(),
                want.len()
            );
        }
    }
}

/// The version a snapshot sees placed exactly at, before and after each
/// memtable chunk end (chunks of 16, 32, ..., 1,024 versions from the
/// scan's start), and the next key `k + [0]` right after a key whose
/// last version ends a chunk: a resumption one version or one key off
/// shows here.
#[test]
fn memtable_chunk_ends_fall_on_the_visible_version_and_on_a_key_end() {
    let tmp = scratch_dir();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let mut ends = Vec::new();
    let (mut end, mut len) = (0, 16);
    while end < 3000 {
        end += len;
        len = (len * 2).min(1024);
        ends.extend([end - 1, end, end + 1]);
    }
    let mut cases = Vec::new();
    for &newer in &ends {
        let k = format!("c{newer:05}").into_bytes();
        let next = [k.as_slice(), &[0]].concat();
        db.put(&k, b"visible").unwrap();
        db.put(&next, b"next").unwrap();
        let snap = db.snapshot();
        for j in 0..newer {
            db.put(&k, format!("newer-{j}").as_bytes()).unwrap();
        }
        cases.push((newer, k, next, snap));
    }
    assert_eq!(db.stats().flushes, 0, "all in the memtable");
    for (newer, k, next, snap) in &cases {
        let range = (
            Bound::Included(k.clone()),
            Bound::Excluded([k.as_slice(), &[1]].concat()),
        );
        let got: Pairs = snap
            .scan(range.clone())
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let want = vec![
            (k.clone(), b"visible".to_vec()),
            (next.clone(), b"next".to_vec()),
        ];
        assert!(
            got == want,
            "{newer} newer versions: at the snapshot {got:?}"
        );
        let got: Pairs = db.scan(range).unwrap().map(|r| r.unwrap()).collect();
        let newest = if *newer == 0 {
            "visible".to_string()
        } else {
            format!("newer-{}", newer - 1)
        };
        let want = vec![
            (k.clone(), newest.into_bytes()),
            (next.clone(), b"next".to_vec()),
        ];
        assert!(got == want, "{newer} newer versions: now {got:?}");
    }
}
