//! Edge shapes of the write path: keys and values of the largest sizes the
//! options allow (the memtable arena gives each its own chunk), keys that
//! are prefixes of one another, batches of zero ops, one op, deletes only,
//! and a batch far larger than the memtable; each checked against a model
//! after the write, after a reopen (WAL replay), after a flush and after
//! the compactions the store chooses.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;

use bloomlsm::{Db, Options, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        background_work: false,
        memtable_bytes: 1 << 20,
        target_file_bytes: 256 << 10,
        l1_bytes: 1 << 20,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

fn check(db: &Db, model: &Model, probes: &[Vec<u8>], when: &str) {
    for k in probes {
        let got = db.get(k).unwrap();
        assert!(
            got.as_deref() == model.get(k).map(Vec::as_slice),
            "{when}: key of {} bytes ({:?}...): got {:?} bytes, want {:?}",
            k.len(),
            &k[..k.len().min(8)],
            got.as_ref().map(Vec::len),
            model.get(k).map(Vec::len)
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan::<&[u8], _>(..)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert!(scanned == want, "{when}: the scan differs from the model");
}

/// Distinct bytes, so a value read from the wrong offset shows.
fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

#[test]
fn max_size_keys_that_prefix_each_other_through_flush_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options();
    let max_key = opts.max_key_bytes;
    let max_value = opts.max_value_bytes;
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    // Keys of every length a prefix of the longest: "k", "kk", ... the
    // largest key allowed, and its neighbours at the end of the byte range.
    let long = vec![b'k'; max_key];
    let mut keys: Vec<Vec<u8>> = [1, 2, 7, 255, 256, 4095, 4096, max_key / 2, max_key - 1]
        .iter()
        .map(|&n| long[..n].to_vec())
        .collect();
    keys.push(long.clone());
    let mut high = long.clone();
    *high.last_mut().unwrap() = 0xff;
    keys.push(high);
    let mut low = long.clone();
    *low.last_mut().unwrap() = 0x00;
    keys.push(low);
    let mut probes = keys.clone();
    probes.push(b"kl".to_vec());
    probes.push(vec![b'k'; 3]);

    // One batch, far past the memtable's size: the largest value, values
    // past a quarter arena chunk, empty values.
    let mut batch = WriteBatch::new();
    for (i, k) in keys.iter().enumerate() {
        let v = match i % 4 {
            0 => pattern(20 << 10, i as u8),
            1 => Vec::new(),
            2 => pattern(100, i as u8),
            _ => pattern(70 << 10, i as u8),
        };
        batch.put(k, &v);
        model.insert(k.clone(), v);
    }
    let biggest = pattern(max_value, 0xab);
    batch.put(&keys[3], &biggest);
    model.insert(keys[3].clone(), biggest);
    db.write(batch).unwrap();
    check(&db, &model, &probes, "after the big batch");
    db.close().unwrap();
    db = Db::open(dir.path(), opts.clone()).unwrap();
    check(&db, &model, &probes, "after replaying the big batch");

    // Zero ops: nothing logged, no sequence used.
    let seq = db.last_sequence();
    db.write(WriteBatch::new()).unwrap();
    assert_eq!(db.last_sequence(), seq);
    // Deletes only, of written and never-written keys alike.
    let mut deletes = WriteBatch::new();
    for k in keys.iter().step_by(3).chain([&b"never"[..].to_vec()]) {
        deletes.delete(k);
        model.remove(k);
    }
    db.write(deletes).unwrap();
    // One op.
    let mut one = WriteBatch::new();
    one.put(&keys[1], b"one");
    model.insert(keys[1].clone(), b"one".to_vec());
    db.write(one).unwrap();
    check(&db, &model, &probes, "after the small batches");
    db.close().unwrap();
    db = Db::open(dir.path(), opts.clone()).unwrap();
    check(&db, &model, &probes, "after replaying the small batches");

    // Overwrites in three flushed tables: the store compacts them (inline,
    // at the next write) into its base level.
    for round in 0..3u8 {
        for (i, k) in keys.iter().enumerate().skip(usize::from(round)).step_by(2) {
            let v = pattern((i * 997) % (30 << 10), round);
            db.put(k, &v).unwrap();
            model.insert(k.clone(), v);
        }
        db.flush().unwrap();
    }
    db.put(b"kl", b"last").unwrap();
    model.insert(b"kl".to_vec(), b"last".to_vec());
    let stats = db.stats();
    assert!(
        stats.compactions + stats.trivial_moves > 0,
        "the case must reach a compaction"
    );
    check(&db, &model, &probes, "after compactions");
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    check(&db, &model, &probes, "after the last reopen");
}

/// Finding: with dynamic level budgets (the default) even a store of four
/// keys has its tables at the last level, so reopening it with fewer
/// `num_levels` (an option change) was refused as a corrupt manifest, and
/// before dynamic budgets the same store, its tables at L1, opened fine.
/// It must be refused as an options error that says what to do, and leave
/// the store as it was.
#[test]
fn reopening_with_fewer_levels_than_the_tree_uses_is_an_options_error() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        l0_compaction_trigger: 2,
        ..options()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for r in 0..3u8 {
        db.put(&[b'k', r], b"v").unwrap();
        db.flush().unwrap();
    }
    db.put(b"z", b"v").unwrap();
    let deepest = db.stats().levels.iter().rposition(|l| l.tables > 0);
    assert_eq!(
        deepest,
        Some(opts.num_levels - 1),
        "an empty tree's L0 goes to the last level"
    );
    db.close().unwrap();
    let fewer = Options {
        num_levels: 3,
        ..opts.clone()
    };
    let Err(err) = Db::open(dir.path(), fewer) else {
        panic!("opened with 3 levels, though the tree has a table at L6");
    };
    assert!(
        matches!(err, bloomlsm::Error::InvalidOptions(_)),
        "an option mismatch reported as: {err}"
    );
    assert!(err.to_string().contains("num_levels"), "{err}");
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.get(b"k\x01").unwrap(), Some(b"v".to_vec()));
}
