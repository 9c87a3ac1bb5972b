//! `scan` and `get` answer what a model of the writes holds, on a store
//! several levels deep of narrow tables, written through the library with
//! overwrites and deletes, whose keys are prefixes of one another (`b`,
//! `ba`, `bab`...), hold multi-byte UTF-8 (`é` sorts after every ASCII
//! byte) and control characters (`\t`, escaped in text, exact in JSON),
//! and whose values are sometimes empty. Each bound form is asked: none,
//! `--from` alone, `--to` alone, both (a key itself, a prefix of keys, a
//! key's extension, from equal to to): the pairs printed are the model's
//! range in key order, `--from` included and `--to` excluded, and a
//! `--limit` prints the range's first pairs and says on stderr exactly
//! when it cut the range. From past to is refused (exit status 2).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::process::{Command, Output};

use bloomlsm::{Db, Options};

/// xorshift64*: the same store and bounds on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Keys of one to five characters over an alphabet that makes many keys
/// prefixes of others: `a`, `b`, `c`, `é` (two bytes), tab.
fn random_key(rng: &mut Rng) -> String {
    const ALPHABET: [char; 5] = ['a', 'b', 'c', 'é', '\t'];
    let len = 1 + rng.below(5) as usize;
    (0..len).map(|_| ALPHABET[rng.below(5) as usize]).collect()
}

/// Narrow tables (2 KiB, 256-byte blocks), a small memtable and level
/// budgets: rounds of puts (some values empty) and deletes, each flushed,
/// leave several levels and overlapping L0 tables; the last round stays
/// in the WAL. Returns the model of what the store holds.
fn deep_store(dir: &Path, rng: &mut Rng) -> BTreeMap<String, String> {
    let options = Options {
        block_size: 256,
        memtable_bytes: 4 << 10,
        target_file_bytes: 2 << 10,
        l1_bytes: 4 << 10,
        level_size_ratio: 2,
        dynamic_level_bytes: false,
        background_work: false,
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..12 {
        for op in 0..400 {
            let key = random_key(rng);
            if rng.below(4) == 0 {
                db.delete(key.as_bytes()).unwrap();
                model.remove(&key);
            } else {
                let value = if rng.below(8) == 0 {
                    String::new()
                } else {
                    format!("r{round}o{op}-{:040}", rng.below(1000))
                };
                db.put(key.as_bytes(), value.as_bytes()).unwrap();
                model.insert(key, value);
            }
        }
        if round < 11 {
            db.flush().unwrap();
        }
    }
    let levels: Vec<u64> = db.stats().levels.iter().map(|l| l.tables).collect();
    assert!(
        levels.iter().filter(|&&t| t > 0).count() >= 2,
        "not deep: {levels:?}"
    );
    db.close().unwrap();
    model
}

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .arg("--json")
        .args(args)
        .output()
        .unwrap()
}

/// The pairs `scan` printed, and whether it said the limit cut the range.
fn scan(
    db: &str,
    from: Option<&str>,
    to: Option<&str>,
    limit: usize,
) -> (Vec<(String, String)>, bool) {
    let limit = limit.to_string();
    let mut args = vec!["scan", db, "--limit", &limit];
    if let Some(from) = from {
        args.extend(["--from", from]);
    }
    if let Some(to) = to {
        args.extend(["--to", to]);
    }
    let out = cli(&args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pairs = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let field = |name: &str| p[name].as_str().unwrap().to_string();
            (field("key"), field("value"))
        })
        .collect();
    let cut = String::from_utf8(out.stderr).unwrap().contains("reached");
    (pairs, cut)
}

fn model_range(
    model: &BTreeMap<String, String>,
    from: Option<&str>,
    to: Option<&str>,
) -> Vec<(String, String)> {
    let lower = from.map_or(Bound::Unbounded, |f| Bound::Included(f.to_string()));
    let upper = to.map_or(Bound::Unbounded, |t| Bound::Excluded(t.to_string()));
    // BTreeMap::range panics on equal bounds excluded; the range is empty.
    if let (Bound::Included(f), Bound::Excluded(t)) = (&lower, &upper)
        && f >= t
    {
        return Vec::new();
    }
    model
        .range((lower, upper))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A bound near the keys: a stored or random key, a prefix of one, one
/// extended by a character, or none.
fn random_bound(rng: &mut Rng, model: &BTreeMap<String, String>) -> Option<String> {
    let keys: Vec<&String> = model.keys().collect();
    let stored = keys[rng.below(keys.len() as u64) as usize].clone();
    match rng.below(6) {
        0 => None,
        1 => Some(stored),
        2 => Some(random_key(rng)),
        3 => {
            let mut chars: Vec<char> = stored.chars().collect();
            chars.pop();
            let prefix: String = chars.into_iter().collect();
            // An empty --from is the smallest key; keep the bound real.
            Some(if prefix.is_empty() { stored } else { prefix })
        }
        4 => Some(format!("{stored}a")),
        _ => Some(format!("{stored}\u{1}")),
    }
}

#[test]
fn scan_and_get_answer_what_the_model_holds() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let model = deep_store(dir.path(), &mut rng);
    let db = dir.path().to_str().unwrap();

    // The whole store, in key order (bytewise: `é` after `b`, tab first).
    let (all, cut) = scan(db, None, None, 100_000);
    assert!(!cut);
    assert_eq!(all, model_range(&model, None, None));

    for _ in 0..60 {
        let from = random_bound(&mut rng, &model);
        let to = random_bound(&mut rng, &model);
        if let (Some(f), Some(t)) = (&from, &to)
            && f > t
        {
            let out = cli(&["scan", db, "--from", f, "--to", t]);
            assert_eq!(out.status.code(), Some(2), "{f:?}..{t:?}: {out:?}");
            continue;
        }
        let want = model_range(&model, from.as_deref(), to.as_deref());
        let (got, cut) = scan(db, from.as_deref(), to.as_deref(), 100_000);
        assert!(!cut, "{from:?}..{to:?}");
        assert_eq!(got, want, "{from:?}..{to:?}");
        // A limit: the first pairs, and the note exactly when more remain.
        let limit = 1 + rng.below(want.len() as u64 + 2) as usize;
        let (got, cut) = scan(db, from.as_deref(), to.as_deref(), limit);
        let first: Vec<_> = want.iter().take(limit).cloned().collect();
        assert_eq!(got, first, "{from:?}..{to:?} --limit {limit}");
        assert_eq!(cut, want.len() > limit, "{from:?}..{to:?} --limit {limit}");
    }

    // Equal bounds hold nothing; every stored key is alone in [key, key\u{1}) (no
    // key holds \u{1}, and argv cannot carry \u{0}).
    for (key, value) in model.iter().step_by(7) {
        assert_eq!(scan(db, Some(key), Some(key), 100).0, []);
        let next = format!("{key}\u{1}");
        assert_eq!(
            scan(db, Some(key), Some(&next), 100).0,
            [(key.clone(), value.clone())]
        );
    }

    // get: stored keys (empty values too), their prefixes and extensions.
    for _ in 0..40 {
        let key = random_bound(&mut rng, &model).unwrap_or_else(|| random_key(&mut rng));
        let out = cli(&["get", db, &key]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        match model.get(&key) {
            Some(value) => {
                assert_eq!(out.status.code(), Some(0), "{key:?}: {out:?}");
                assert_eq!(v["value"], value.as_str(), "{key:?}");
            }
            None => {
                assert_eq!(out.status.code(), Some(1), "{key:?}: {out:?}");
                assert_eq!(v["value"], serde_json::Value::Null, "{key:?}");
            }
        }
    }
}
