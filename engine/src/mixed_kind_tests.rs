//! Equal filter memory across a change of filter kind: a store loaded
//! under `Optimized` with one `Options::filter_kind`, reopened with
//! another (and back), keeps the tables written before with their old
//! kind of filter until a compaction or a rebalancing rebuild rewrites
//! them. Uniform's memory for such a tree is what uniform filters at
//! `BITS` take for each table in the kind its filter has (a store under
//! `Uniform` with the same history holds exactly that: it never rebuilds a
//! filter, so its old tables keep their old kind). The samples are taken
//! inside every install (flush, compaction, rebuild) of deep loads of
//! narrow tables with overwrites and deletes, inline and on the
//! background threads.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use bloomlsm_filter::planning::planned_memory_bytes;
use parking_lot::Mutex;

use crate::budget_test_shapes::{mix, narrow_options, spread_key as key};
use crate::filter_budget::{table_filter_bytes, table_keys};
use crate::inner::DbInner;
use crate::{Db, FilterKind, Options, Stats};

const BITS: f64 = 10.0;

fn options(kind: FilterKind, background_work: bool) -> Options {
    narrow_options(kind, BITS, background_work)
}

/// One install's tree: its filter bytes, and uniform's bytes at `BITS`
/// for the same tables, each in the kind of its own filter (`own`) and
/// all in the store's current kind (`current`, what the budget counts).
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    filters: u64,
    own: u64,
    current: u64,
    tables: usize,
    /// Tables whose filter is not of the current kind.
    foreign: usize,
    unfiltered: u64,
}

fn sample(inner: &DbInner, s: &Stats) -> Sample {
    let kind = inner.options.filter_kind;
    let sv = inner.current.load_full();
    let mut out = Sample {
        unfiltered: s.total.tables_without_usable_filter,
        ..Sample::default()
    };
    for t in sv.version.levels.iter().flatten() {
        let keys = table_keys(t);
        let own = t.table.filter().map_or(kind, |f| f.kind());
        out.filters += table_filter_bytes(t);
        out.own += planned_memory_bytes(own, keys, BITS);
        out.current += planned_memory_bytes(kind, keys, BITS);
        out.tables += 1;
        out.foreign += usize::from(own != kind);
        // A filter dropped when written (bits 0) is not "unusable".
        out.unfiltered += u64::from(t.table.filter().is_none());
    }
    out
}

fn watch(db: &Db) -> Arc<Mutex<Vec<Sample>>> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&samples);
    let inner: Weak<DbInner> = Arc::downgrade(&db.inner);
    db.inner
        .install_hook
        .set(Some(Arc::new(move |s: &Stats, _: &[Vec<u64>]| {
            if let Some(inner) = inner.upgrade() {
                into.lock().push(sample(&inner, s));
            }
        })));
    samples
}

/// The worst install of `samples` against uniform in each table's own
/// kind, and against uniform all in the current kind.
fn report(samples: &[Sample], what: &str) -> (f64, f64) {
    let worst = |f: fn(&Sample) -> u64| {
        samples
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.filters as f64 / f(s).max(1) as f64))
            .fold((0, 0.0f64), |a, b| if b.1 > a.1 { b } else { a })
    };
    let (own_at, own) = worst(|s| s.own);
    let (cur_at, cur) = worst(|s| s.current);
    println!(
        "{what}: {} installs; worst x{own:.4} of own-kind uniform at {own_at} ({:?}); \
         worst x{cur:.4} of current-kind uniform at {cur_at} ({:?})",
        samples.len(),
        samples.get(own_at),
        samples.get(cur_at),
    );
    (own, cur)
}

fn check(samples: &[Sample], what: &str) {
    report(samples, what);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(
            s.unfiltered, 0,
            "{what}: install {i}: a table without a filter"
        );
        assert!(
            s.filters as f64 <= 1.02 * s.own as f64,
            "{what}: install {i} of {}: {} filter bytes over 1.02 x uniform's {} \
             for the same tables in their own kinds ({s:?})",
            samples.len(),
            s.filters,
            s.own,
        );
    }
}

/// Loads `keys` new keys from `first`, then overwrites and deletes every
/// third of all keys so far, into a store opened with `kind`.
fn phase(
    dir: &std::path::Path,
    kind: FilterKind,
    background_work: bool,
    first: u64,
    keys: u64,
    model: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
) {
    let db = Db::open(dir, options(kind, background_work)).unwrap();
    let samples = watch(&db);
    let opened = sample(&db.inner, &db.stats());
    let what = format!("{kind} from key {first}");
    println!("{what}: opened {opened:?}");
    let value = |i: u64| format!("v{i}-{:x}", mix(i ^ first)).into_bytes();
    for i in first..first + keys {
        db.put(&key(i), &value(i)).unwrap();
        model.insert(key(i), Some(value(i)));
    }
    for i in (first % 3..first + keys).step_by(3) {
        if mix(i).is_multiple_of(2) {
            db.delete(&key(i)).unwrap();
            model.insert(key(i), None);
        } else {
            db.put(&key(i), &value(i + 1)).unwrap();
            model.insert(key(i), Some(value(i + 1)));
        }
    }
    let mut all = vec![opened];
    all.extend(samples.lock().iter().copied());
    let s = db.stats();
    println!(
        "{what}: levels {:?}, bits per key {:?}, {} rebalanced",
        s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
        s.levels
            .iter()
            .map(|l| (l.bits_per_key * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        s.filters_rebalanced
    );
    check(&all, &what);
    for (k, v) in model.iter() {
        assert_eq!(&db.get(k).unwrap(), v, "{what}: key {k:?}");
    }
    db.close().unwrap();
}

fn kinds_back_and_forth(first: FilterKind, second: FilterKind, background_work: bool) {
    let dir = crate::scratch_dirs::scratch_dir();
    let mut model = BTreeMap::new();
    phase(dir.path(), first, background_work, 0, 6_000, &mut model);
    phase(
        dir.path(),
        second,
        background_work,
        6_000,
        3_000,
        &mut model,
    );
    phase(dir.path(), first, background_work, 9_000, 3_000, &mut model);
}

#[test]
fn standard_to_ribbon_and_back() {
    kinds_back_and_forth(FilterKind::Standard, FilterKind::Ribbon, false);
}

#[test]
fn ribbon_to_standard_and_back() {
    kinds_back_and_forth(FilterKind::Ribbon, FilterKind::Standard, false);
}

#[test]
fn standard_to_blocked_and_back() {
    kinds_back_and_forth(FilterKind::Standard, FilterKind::Blocked, false);
}

#[test]
fn blocked_to_ribbon_and_back() {
    kinds_back_and_forth(FilterKind::Blocked, FilterKind::Ribbon, false);
}

/// Failed at about 1.027 x in the last (Ribbon) phase before the write's
/// allowance (`FilterAllowance`) bounded its tables' filters together.
#[test]
fn ribbon_to_standard_and_back_on_background_threads() {
    kinds_back_and_forth(FilterKind::Ribbon, FilterKind::Standard, true);
}

#[test]
fn standard_to_blocked_and_back_on_background_threads() {
    kinds_back_and_forth(FilterKind::Standard, FilterKind::Blocked, true);
}

/// Failed at about 1.036 x before the write's allowance, and not for
/// mixing kinds: the install over the bound was an L0 -> L1 compaction of
/// Ribbon tables alone into ~30 narrow Ribbon tables at 352 bytes each
/// (320 at `BITS`). The write is planned (and claims) as one filter over
/// all its keys above `BITS`, spending headroom the old Standard tables'
/// low deep-level filters left; each ~20-key output rounded its own filter
/// up by 32 bytes, which no claim covered. Now the tables of a write fit
/// their filters into what its plan spends (`FilterAllowance`).
#[test]
fn standard_to_ribbon_and_back_on_background_threads() {
    kinds_back_and_forth(FilterKind::Standard, FilterKind::Ribbon, true);
}
