//! What one batch promises, on a deep tree of narrow tables with tiny
//! memtables: the later op of a key in a batch wins (put, delete, put),
//! its ops get consecutive sequence numbers (`last_sequence` moves by its
//! length, a snapshot taken after it is at its last op), a batch larger
//! than the memtable is seen whole or not at all by snapshots and
//! iterators held from before it, a delete of a key that lives only in
//! deep levels stays deleted through flushes, compactions and reopens,
//! and an empty or refused batch takes no sequence number and leaves the
//! store writable. Reopening keeps `last_sequence`.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::collections::BTreeMap;

use bloomlsm::{Db, Error, Options, WriteBatch};
use common::narrow_tree::narrow_tree_options;
use common::{key, pairs, scratch_dir, value};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u64 = 300;

fn options(background: bool) -> Options {
    Options {
        memtable_bytes: 1024,
        num_levels: 8,
        l0_slowdown_trigger: 4,
        l0_stop_trigger: 8,
        max_key_bytes: 64,
        max_value_bytes: 512,
        background_work: background,
        ..narrow_tree_options()
    }
}

fn apply(model: &mut Model, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    for (k, v) in ops {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn batch_of(ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> WriteBatch {
    let mut b = WriteBatch::new();
    for (k, v) in ops {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        };
    }
    b
}

fn check(db: &Db, model: &Model, what: &str) {
    let got: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(got == *model, "{what}: scan differs from the model");
    for (k, v) in model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "{what}");
    }
}

/// A store whose first keys sit deep: every key written, then the later
/// ones rewritten a few times so the first ones are pushed down.
fn deep_store(db: &Db, model: &mut Model) {
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    for round in 0..4u64 {
        for i in KEYS / 2..KEYS {
            let v = value(i + round * 1000);
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
    db.wait_for_background_work().unwrap();
    let levels = db.stats().levels;
    let deepest = levels.iter().rposition(|l| l.tables > 0).unwrap();
    assert!(deepest >= 3, "not deep: {levels:?}");
}

fn run(background: bool) {
    let dir = scratch_dir();
    let mut db = Db::open(dir.path(), options(background)).unwrap();
    let mut model = Model::new();
    deep_store(&db, &mut model);
    check(&db, &model, "before the batches");

    // One batch, larger than the memtable: deletes of the deep keys, a key
    // put, deleted and put again, another put twice and deleted, and
    // rewrites of the others.
    let mut ops = vec![
        (b"twice".to_vec(), Some(b"1".to_vec())),
        (b"twice".to_vec(), None),
    ];
    for i in 0..KEYS / 2 {
        if i.is_multiple_of(3) {
            ops.push((key(i), None));
        } else {
            ops.push((key(i), Some(format!("big-{i}").into_bytes())));
        }
    }
    ops.extend([
        (b"twice".to_vec(), Some(b"2".to_vec())),
        (b"gone".to_vec(), Some(b"a".to_vec())),
        (b"gone".to_vec(), Some(b"b".to_vec())),
        (b"gone".to_vec(), None),
        (key(1), Some(b"again".to_vec())),
        (key(1), None),
        (key(1), Some(b"last".to_vec())),
    ]);
    let big = batch_of(&ops);
    assert!(big.encoded_len() > 2 * options(background).memtable_bytes);
    let seq_before = db.last_sequence();
    let held_snapshot = db.snapshot();
    assert_eq!(held_snapshot.sequence(), seq_before);
    let mut held_iter = db.scan::<&[u8], _>(..).unwrap();
    let first_held = held_iter.next().unwrap().unwrap();
    let before = model.clone();
    db.write(big).unwrap();
    apply(&mut model, &ops);
    assert_eq!(
        db.last_sequence(),
        seq_before + ops.len() as u64,
        "a batch's ops take consecutive sequence numbers"
    );
    assert_eq!(db.snapshot().sequence(), db.last_sequence());
    assert_eq!(db.get(b"twice").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"last".to_vec()));
    check(&db, &model, "after the big batch");

    // What was held from before sees none of it.
    let rest: Vec<_> = std::iter::once(first_held)
        .chain(held_iter.map(|r| r.unwrap()))
        .collect();
    assert!(
        rest.into_iter().collect::<Model>() == before,
        "an iterator from before the batch saw part of it"
    );
    let through_snapshot: Model = pairs(held_snapshot.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(through_snapshot == before, "a snapshot saw the batch");
    for i in 0..KEYS / 2 {
        assert_eq!(
            held_snapshot.get(&key(i)).unwrap().as_ref(),
            before.get(&key(i))
        );
    }

    // Refused batches: an oversized value, key or empty key in the
    // middle; nothing applied, no sequence number taken.
    let seq = db.last_sequence();
    let refused = [
        (vec![0u8; 513], &b"v"[..], "value"),
        (vec![b'k'; 65], &b"v"[..], "key"),
        (Vec::new(), &b"v"[..], "empty key"),
    ];
    for (bad_key_or_value, v, what) in refused {
        let mut b = WriteBatch::new();
        b.put(&key(2), b"refused").delete(&key(4));
        match what {
            "value" => b.put(b"x", &bad_key_or_value),
            _ => b.put(&bad_key_or_value, v),
        };
        b.put(&key(5), b"refused");
        let err = db.write(b).unwrap_err();
        assert!(
            matches!(err, Error::ValueTooLarge { .. } | Error::InvalidKey { .. }),
            "{what}: {err}"
        );
        assert_eq!(
            db.last_sequence(),
            seq,
            "{what}: a refused batch took numbers"
        );
    }
    db.write(WriteBatch::new()).unwrap();
    assert_eq!(db.last_sequence(), seq, "an empty batch took a number");
    check(&db, &model, "after the refused batches");

    // Settle, reopen: the same contents and the same last sequence.
    db.wait_for_background_work().unwrap();
    check(&db, &model, "settled");
    drop(held_snapshot);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let seq = db.last_sequence();
    db.close().unwrap();
    db = Db::open(dir.path(), options(background)).unwrap();
    assert_eq!(db.last_sequence(), seq, "reopen moved the last sequence");
    check(&db, &model, "reopened");

    // Batches straddling flushes and rotations keep going, each one
    // consecutive; deleted deep keys never come back.
    for round in 0..20u64 {
        let mut ops = Vec::new();
        for j in 0..30u64 {
            let i = (round * 37 + j * 11) % KEYS;
            if i.is_multiple_of(3) {
                // A deleted deep key: deleted again, or put then deleted.
                if j.is_multiple_of(2) {
                    ops.push((key(i), Some(b"brief".to_vec())));
                }
                ops.push((key(i), None));
            } else {
                ops.push((key(i), Some(format!("r{round}-{j}").into_bytes())));
            }
        }
        let seq = db.last_sequence();
        db.write(batch_of(&ops)).unwrap();
        apply(&mut model, &ops);
        assert_eq!(db.last_sequence(), seq + ops.len() as u64);
        if round % 7 == 6 {
            let seq = db.last_sequence();
            db.close().unwrap();
            db = Db::open(dir.path(), options(background)).unwrap();
            assert_eq!(db.last_sequence(), seq, "round {round}: reopen");
        }
    }
    db.wait_for_background_work().unwrap();
    check(&db, &model, "after the rounds");
    for i in (0..KEYS / 2).step_by(3) {
        assert_eq!(db.get(&key(i)).unwrap(), None, "deleted key {i} came back");
    }
    db.close().unwrap();
}

#[test]
fn batch_semantics_inline_work() {
    run(false);
}

#[test]
fn batch_semantics_background_work() {
    run(true);
}

/// The last sequence numbers: a batch that would pass the largest is
/// refused whole (`SequenceExhausted`, nothing applied), one that ends on
/// it is applied, and the store reopens holding it.
#[test]
fn a_batch_that_would_pass_the_last_sequence_is_refused_whole() {
    let max_sequence = (1u64 << 56) - 1;
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(false)).unwrap();
    db.put(b"before", b"1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let mut manifest = common::read_manifest(dir.path());
    manifest.counters[1] = max_sequence - 5; // the manifest's last sequence
    common::write_manifest(dir.path(), &manifest);
    let db = Db::open(dir.path(), options(false)).unwrap();
    assert_eq!(db.last_sequence(), max_sequence - 5);
    let batch = |n: u64, tag: &str| {
        let mut b = WriteBatch::new();
        for i in 0..n {
            b.put(&key(i), tag.as_bytes());
        }
        b
    };
    assert!(matches!(
        db.write(batch(6, "over")),
        Err(Error::SequenceExhausted)
    ));
    assert_eq!(db.last_sequence(), max_sequence - 5);
    assert_eq!(db.get(&key(0)).unwrap(), None);
    let s = db.snapshot();
    db.write(batch(5, "fits")).unwrap();
    assert_eq!(db.last_sequence(), max_sequence);
    assert_eq!(s.get(&key(4)).unwrap(), None);
    assert_eq!(db.get(&key(4)).unwrap(), Some(b"fits".to_vec()));
    db.write(WriteBatch::new()).unwrap();
    assert!(matches!(
        db.write(batch(1, "none left")),
        Err(Error::SequenceExhausted)
    ));
    drop(s);
    db.close().unwrap();
    let db = Db::open(dir.path(), options(false)).unwrap();
    assert_eq!(db.last_sequence(), max_sequence);
    for i in 0..5 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(b"fits".to_vec()));
    }
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(db.get(&key(0)).unwrap(), Some(b"fits".to_vec()));
    db.close().unwrap();
    let db = Db::open(dir.path(), options(false)).unwrap();
    assert_eq!(db.last_sequence(), max_sequence);
    assert_eq!(db.get(&key(0)).unwrap(), Some(b"fits".to_vec()));
}

/// Many versions of one key, each its own batch's (some batches writing
/// the key three times, put, delete, put), each pinned by a snapshot,
/// spread over many narrow blocks and tables as they flush and compact:
/// every snapshot reads exactly the version its batch left, by get and by
/// scan, and never one a batch wrote and overwrote inside itself.
#[test]
fn snapshots_between_batches_of_one_key_read_their_batch() {
    let dir = scratch_dir();
    let opts = Options {
        block_size: 64,
        target_file_bytes: 512,
        memtable_bytes: 768,
        ..options(true)
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut pinned = Vec::new();
    for n in 0..120u64 {
        let mut b = WriteBatch::new();
        let last = format!("v{n}-{}", "x".repeat((n % 5 * 20) as usize)).into_bytes();
        let want = match n % 4 {
            0 => {
                b.put(b"k", b"inside").delete(b"k").put(b"k", &last);
                Some(last)
            }
            1 => {
                b.put(b"k", &last).put(b"k", b"inside").delete(b"k");
                None
            }
            2 => {
                b.delete(b"k").put(b"k", &last);
                Some(last)
            }
            _ => {
                b.put(b"k", &last);
                Some(last)
            }
        };
        b.put(&key(n), b"neighbour")
            .put(b"j", &key(n))
            .put(b"l", &key(n));
        db.write(b).unwrap();
        pinned.push((db.snapshot(), want));
    }
    let check = |what: &str| {
        for (n, (s, want)) in pinned.iter().enumerate() {
            assert_eq!(s.get(b"k").unwrap(), *want, "{what}: snapshot {n}");
            let scanned: Vec<_> = pairs(s.scan(&b"j"[..]..=&b"l"[..]).unwrap());
            let k = scanned
                .iter()
                .find(|(k, _)| k == b"k")
                .map(|(_, v)| v.clone());
            assert_eq!(k, *want, "{what}: snapshot {n} scan");
            assert_eq!(scanned[0].1, key(n as u64), "{what}: snapshot {n} scan");
        }
    };
    check("written");
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    check("flushed and compacted");
    // Release every other snapshot: compactions may now drop the versions
    // only those saw, never one a held snapshot needs.
    let mut kept = Vec::new();
    for (n, p) in pinned.drain(..).enumerate() {
        if n % 2 == 1 {
            kept.push(p);
        }
    }
    for n in 0..40u64 {
        db.put(&key(1000 + n), &[b'z'; 60]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    for (i, (s, want)) in kept.iter().enumerate() {
        assert_eq!(
            s.get(b"k").unwrap(),
            *want,
            "after release: snapshot {}",
            2 * i + 1
        );
    }
}

/// A batch of thousands of ops, many times the memtable, over a deep
/// tree: keys written many times over inside it (the last op of each
/// wins), deletes of keys that only deep levels hold, new keys. It is
/// seen whole, takes consecutive sequence numbers, and stays so through
/// flushes, compactions and a reopen.
#[test]
fn a_batch_of_thousands_of_ops_applies_its_last_op_per_key() {
    let dir = scratch_dir();
    let db = Db::open(dir.path(), options(true)).unwrap();
    let mut model = Model::new();
    deep_store(&db, &mut model);
    let before = model.clone();
    let snapshot = db.snapshot();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut ops = Vec::new();
    for n in 0..6000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = x % (KEYS + 200);
        let op = if x.is_multiple_of(5) {
            (key(i), None)
        } else {
            (key(i), Some(format!("t{n}").into_bytes()))
        };
        ops.push(op);
    }
    let batch = batch_of(&ops);
    assert!(batch.encoded_len() > 50 * options(true).memtable_bytes);
    let seq = db.last_sequence();
    db.write(batch).unwrap();
    apply(&mut model, &ops);
    assert_eq!(db.last_sequence(), seq + ops.len() as u64);
    check(&db, &model, "written");
    let seen: Model = pairs(snapshot.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(seen == before, "the snapshot from before saw the batch");
    drop(snapshot);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    check(&db, &model, "settled");
    let seq = db.last_sequence();
    db.close().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    assert_eq!(db.last_sequence(), seq);
    check(&db, &model, "reopened");
    db.close().unwrap();
}

/// Once an error stopped writes, every write is refused with
/// `WritesStopped`, the empty batch included (as RocksDB returns its
/// background error for one): a caller probing with an empty batch must
/// not read `Ok` as "the store takes writes". An empty batch takes no
/// sequence number either way, and a read-only store still says
/// `ReadOnly` first.
#[test]
fn an_empty_batch_is_refused_once_writes_stopped() {
    let dir = scratch_dir();
    let fs = bloomlsm::fs::fault::FaultFs::new();
    let db = Db::open_with_fs(dir.path(), options(false), std::sync::Arc::new(fs.clone())).unwrap();
    db.put(b"a", b"1").unwrap();
    db.write(WriteBatch::new()).unwrap();
    fs.set_refuse_table_files(true);
    assert!(db.flush().is_err());
    let seq = db.last_sequence();
    let mut one = WriteBatch::new();
    one.put(b"b", b"2");
    assert!(matches!(db.write(one), Err(Error::WritesStopped(_))));
    let empty = db.write(WriteBatch::new());
    assert!(
        matches!(empty, Err(Error::WritesStopped(_))),
        "an empty batch on a store whose writes stopped: {empty:?}"
    );
    assert_eq!(db.last_sequence(), seq);
    // The caller's argument still comes before the store's state.
    let mut bad = WriteBatch::new();
    bad.put(b"", b"x");
    assert!(matches!(db.write(bad), Err(Error::InvalidKey { .. })));
    fs.set_refuse_table_files(false);
    drop(db);
    let db = Db::open(dir.path(), options(false)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.write(WriteBatch::new()).unwrap();
    db.close().unwrap();
}
