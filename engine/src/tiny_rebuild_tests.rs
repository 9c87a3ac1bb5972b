//! Filters rebuilt at fractional and extreme bits per key, into every
//! kind, on tables of one and two keys, tables of tombstones only and
//! tables of many versions of one key: no key is ever ruled out, the
//! newest version wins and deleted keys stay deleted, across a reopen.

use std::collections::BTreeMap;

use crate::scratch_dirs::scratch_dir;
use crate::{Db, FilterKind, FilterPolicy, Options};

fn options(kind: FilterKind, policy: FilterPolicy) -> Options {
    Options {
        filter_policy: policy,
        filter_kind: kind,
        background_work: false,
        block_cache_bytes: 0,
        l0_compaction_trigger: 64,
        l0_slowdown_trigger: 64,
        l0_stop_trigger: 64,
        ..Options::default()
    }
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

fn check(db: &Db, model: &Model, what: &str) {
    for (k, v) in model {
        assert_eq!(&db.get(k).unwrap(), v, "{what}: key {}", k.escape_ascii());
    }
}

/// L0 tables: one key; two keys; tombstones only (over keys of an older
/// table); 300 versions of one key (written in separate flushes and one
/// memtable).
fn load(db: &Db, model: &mut Model) {
    let put = |k: &[u8], v: &[u8], model: &mut Model| {
        db.put(k, v).unwrap();
        model.insert(k.to_vec(), Some(v.to_vec()));
    };
    put(b"one", b"1", model);
    db.flush().unwrap();
    put(b"two-a", b"a", model);
    put(b"two-b", b"b", model);
    db.flush().unwrap();
    for v in 0..300u32 {
        put(b"hot", format!("v{v}").as_bytes(), model);
        if v % 100 == 99 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    for k in [b"one".as_slice(), b"two-b"] {
        db.delete(k).unwrap();
        model.insert(k.to_vec(), None);
    }
    db.delete(b"never").unwrap();
    model.insert(b"never".to_vec(), None);
    db.flush().unwrap();
}

#[test]
fn tiny_tables_rebuilt_at_any_bits_into_any_kind_keep_every_key() {
    let kinds = [
        FilterKind::Blocked,
        FilterKind::Standard,
        FilterKind::Ribbon,
    ];
    let policies = [
        FilterPolicy::Uniform { bits_per_key: 1.0 },
        FilterPolicy::Uniform {
            bits_per_key: 1.0001,
        },
        FilterPolicy::Uniform {
            bits_per_key: 0.999,
        },
        FilterPolicy::Uniform { bits_per_key: 2.37 },
        FilterPolicy::Uniform {
            bits_per_key: 100.0,
        },
        FilterPolicy::PerLevel(vec![1.5, 7.77, 0.0]),
        FilterPolicy::Optimized { bits_per_key: 1.03 },
        FilterPolicy::Optimized { bits_per_key: 3.3 },
        FilterPolicy::Optimized { bits_per_key: 99.9 },
    ];
    for (i, first) in kinds.iter().enumerate() {
        let second = kinds[(i + 1) % kinds.len()];
        for policy in &policies {
            let dir = scratch_dir();
            let mut model = Model::new();
            let what = format!("{first:?} then {second:?} at {policy:?}");
            {
                let db = Db::open(dir.path(), options(*first, policy.clone())).unwrap();
                load(&db, &mut model);
                check(&db, &model, &format!("{what}: loaded"));
                db.close().unwrap();
            }
            let db = Db::open(dir.path(), options(second, policy.clone())).unwrap();
            db.rebuild_filters(policy.clone()).unwrap();
            check(&db, &model, &format!("{what}: rebuilt"));
            db.rebuild_filters(FilterPolicy::Optimized { bits_per_key: 7.5 })
                .unwrap();
            check(&db, &model, &format!("{what}: rebuilt again"));
            db.close().unwrap();
            let db = Db::open(dir.path(), options(*first, policy.clone())).unwrap();
            check(&db, &model, &format!("{what}: reopened"));
            db.close().unwrap();
        }
    }
}
