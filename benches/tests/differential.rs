//! Differential test: the same random operations applied to bloomlsm and
//! RocksDB give identical answers, across flushes and reopens.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use bloomlsm::{Db, Options, WriteBatch};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Put(u8, u16),
    Delete(u8),
    Batch(Vec<(u8, Option<u16>)>),
    Get(u8),
    Scan(u8),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Put(k % 48, v)),
        2 => any::<u8>().prop_map(|k| Op::Delete(k % 48)),
        1 => proptest::collection::vec((any::<u8>(), proptest::option::of(any::<u16>())), 1..5)
            .prop_map(|v| Op::Batch(v.into_iter().map(|(k, x)| (k % 48, x)).collect())),
        4 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        1 => any::<u8>().prop_map(|k| Op::Scan(k % 64)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k / 10, k % 10, k]
}

fn small() -> Options {
    Options {
        memtable_bytes: 1024,
        block_size: 128,
        target_file_bytes: 1024,
        l1_bytes: 4096,
        ..Options::default()
    }
}

fn rocks(dir: &std::path::Path) -> rocksdb::DB {
    let mut o = rocksdb::Options::default();
    o.create_if_missing(true);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    rocksdb::DB::open(&o, dir).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn same_answers_as_rocksdb(ops in proptest::collection::vec(op(), 1..150)) {
        let dir = tempfile::tempdir().unwrap();
        let (ours_dir, rocks_dir) = (dir.path().join("ours"), dir.path().join("rocks"));
        let mut ours = Some(Db::open(&ours_dir, small()).unwrap());
        let mut theirs = Some(rocks(&rocks_dir));
        for op in ops {
            let (o, r) = (ours.as_ref().unwrap(), theirs.as_ref().unwrap());
            match op {
                Op::Put(k, v) => { o.put(&key(k), &v.to_le_bytes()).unwrap(); r.put(key(k), v.to_le_bytes()).unwrap(); }
                Op::Delete(k) => { o.delete(&key(k)).unwrap(); r.delete(key(k)).unwrap(); }
                Op::Batch(items) => {
                    let mut b = WriteBatch::new();
                    let mut rb = rocksdb::WriteBatch::default();
                    for (k, v) in items {
                        match v {
                            Some(v) => { b.put(&key(k), &v.to_le_bytes()); rb.put(key(k), v.to_le_bytes()); }
                            None => { b.delete(&key(k)); rb.delete(key(k)); }
                        }
                    }
                    o.write(b).unwrap();
                    r.write(rb).unwrap();
                }
                Op::Get(k) => prop_assert_eq!(o.get(&key(k)).unwrap(), r.get(key(k)).unwrap()),
                Op::Scan(k) => {
                    let mine: Vec<_> = o.scan(key(k)..).unwrap().take(10).map(|x| x.unwrap()).collect();
                    let mode = rocksdb::IteratorMode::From(&key(k), rocksdb::Direction::Forward);
                    let theirs: Vec<_> = r.iterator(mode).take(10).map(|x| { let (a, b) = x.unwrap(); (a.to_vec(), b.to_vec()) }).collect();
                    prop_assert_eq!(mine, theirs);
                }
                Op::Flush => { o.flush().unwrap(); r.flush().unwrap(); }
                Op::Reopen => {
                    ours.take().unwrap().close().unwrap();
                    drop(theirs.take());
                    ours = Some(Db::open(&ours_dir, small()).unwrap());
                    theirs = Some(rocks(&rocks_dir));
                }
            }
        }
    }
}
