//! Model test: random operations against a BTreeMap, checked after every
//! step, including flush, compaction, snapshots and close-and-reopen.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;

use bloomlsm::{Db, FilterKind, Options, WriteBatch};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Batch(Vec<(u8, Option<u8>)>),
    Get(u8),
    Scan(u8, u8),
    Snapshot,
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), any::<u8>()).prop_map(|(k, v)| Op::Put(k % 64, v)),
        2 => any::<u8>().prop_map(|k| Op::Delete(k % 64)),
        2 => proptest::collection::vec((any::<u8>(), proptest::option::of(any::<u8>())), 1..6)
            .prop_map(|v| Op::Batch(v.into_iter().map(|(k, x)| (k % 64, x)).collect())),
        3 => any::<u8>().prop_map(|k| Op::Get(k % 80)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Scan(a % 70, b % 70)),
        1 => Just(Op::Snapshot),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key{k:03}").into_bytes()
}

fn value(v: u8, salt: usize) -> Vec<u8> {
    format!("value{v}-{salt}").into_bytes()
}

fn options(bits: f64, kind: FilterKind) -> Options {
    Options {
        memtable_bytes: 2048,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        l1_bytes: 8 << 10,
        target_file_bytes: 2048,
        block_size: 256,
        block_cache_bytes: 64 << 10,
        ..Options::default().with_bits_per_key(bits)
    }
    .with_kind(kind)
}

trait WithKind {
    fn with_kind(self, kind: FilterKind) -> Self;
}

impl WithKind for Options {
    fn with_kind(mut self, kind: FilterKind) -> Self {
        self.filter_kind = kind;
        self
    }
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for k in 0..80u8 {
        assert_eq!(
            db.get(&key(k)).unwrap(),
            model.get(&key(k)).cloned(),
            "key {k}"
        );
    }
    let all: Vec<_> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, expected);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..120), filter in 0usize..3) {
        let (bits, kind) = [(10.0, FilterKind::Blocked), (7.5, FilterKind::Standard), (0.0, FilterKind::Blocked)][filter];
        let dir = tempfile::tempdir().unwrap();
        let mut db = Some(Db::open(dir.path(), options(bits, kind)).unwrap());
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut snapshots = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let d = db.as_ref().unwrap();
            match op {
                Op::Put(k, v) => { d.put(&key(k), &value(v, i)).unwrap(); model.insert(key(k), value(v, i)); }
                Op::Delete(k) => { d.delete(&key(k)).unwrap(); model.remove(&key(k)); }
                Op::Batch(ops) => {
                    let mut b = WriteBatch::new();
                    for (k, v) in ops {
                        match v {
                            Some(v) => { b.put(&key(k), &value(v, i)); model.insert(key(k), value(v, i)); }
                            None => { b.delete(&key(k)); model.remove(&key(k)); }
                        }
                    }
                    d.write(b).unwrap();
                }
                Op::Get(k) => prop_assert_eq!(d.get(&key(k)).unwrap(), model.get(&key(k)).cloned()),
                Op::Scan(a, b) => {
                    let (lo, hi) = (key(a.min(b)), key(a.max(b)));
                    let got: Vec<_> = d.scan(lo.clone()..hi.clone()).unwrap().map(|r| r.unwrap()).collect();
                    let want: Vec<_> = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone())).collect();
                    prop_assert_eq!(got, want);
                }
                Op::Snapshot => snapshots.push((d.snapshot(), model.clone())),
                Op::Flush => d.flush().unwrap(),
                Op::Compact => d.compact().unwrap(),
                Op::Reopen => {
                    snapshots.clear();
                    db.take().unwrap().close().unwrap();
                    db = Some(Db::open(dir.path(), options(bits, kind)).unwrap());
                }
            }
            for (snap, m) in &snapshots {
                for k in [0u8, 7, 33, 63] {
                    prop_assert_eq!(snap.get(&key(k)).unwrap(), m.get(&key(k)).cloned());
                }
            }
        }
        let d = db.as_ref().unwrap();
        check_all(d, &model);
        d.compact().unwrap();
        check_all(d, &model);
    }
}
