//! Reads against the model, and the read-only opens between sessions:
//! what they recover, what they report, and that they change no file.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use bloomlsm::{Db, Options, Snapshot, WalCut, WalCutCause, WalRecovery};

use crate::common::{Model, pairs};

use super::damage::truthful_bytes;
use super::history::{Origins, UNIVERSE, key};

/// A full scan, a get of every key of the universe (written, deleted and
/// never written: a filter's false negative is a missing value), and
/// bounded scans, of the store and of each held snapshot.
pub fn check_reads(
    db: &Db,
    model: &Model,
    snapshots: &[(Snapshot, Model)],
    what: &str,
    origins: &Origins,
) {
    let scanned: Model = pairs(db.scan::<&[u8], _>(..).unwrap())
        .into_iter()
        .collect();
    assert!(
        scanned == *model,
        "{what}: scan: {}",
        origins.explain(&scanned, model)
    );
    for i in 0..UNIVERSE {
        let k = key(i);
        let got = db.get(&k).unwrap();
        assert!(
            got.as_ref() == model.get(&k),
            "{what}: get {i}: {}",
            origins.explain(
                &got.map(|v| (k.clone(), v)).into_iter().collect(),
                &model
                    .get(&k)
                    .map(|v| (k.clone(), v.clone()))
                    .into_iter()
                    .collect()
            )
        );
    }
    for (lo, hi) in [(3, 40), (41, 42), (77, 140)] {
        let range = (Bound::Included(key(lo)), Bound::Excluded(key(hi)));
        let got: Vec<_> = pairs(db.scan(range.clone()).unwrap());
        let want: Vec<_> = model
            .range(range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(got == want, "{what}: scan {lo}..{hi}");
    }
    for (n, (snapshot, seen)) in snapshots.iter().enumerate() {
        let scanned: Model = pairs(snapshot.scan::<&[u8], _>(..).unwrap())
            .into_iter()
            .collect();
        assert!(
            scanned == *seen,
            "{what}: snapshot {n}: {}",
            origins.explain(&scanned, seen)
        );
        for i in (0..UNIVERSE).step_by(7) {
            assert!(snapshot.get(&key(i)).unwrap().as_ref() == seen.get(&key(i)));
        }
    }
}

/// Every file of `dir` with its bytes.
pub fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::common::listing(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

pub fn with_recovery(options: &Options, wal_recovery: WalRecovery) -> Options {
    Options {
        wal_recovery,
        ..options.clone()
    }
}

/// What the read-only opens of a store found.
pub struct Seen {
    pub model: Model,
    pub cut: Option<WalCut>,
    pub salvaged: Vec<std::path::PathBuf>,
    /// The default (`TolerateTornTail`) open succeeded.
    pub tolerant: bool,
    pub last_sequence: u64,
}

/// A read-only point-in-time open and a read-only default open of `dir`:
/// neither changes a file; the point-in-time one succeeds, every answer it
/// gives agrees with its own scan, and its cut counts exactly the bytes it
/// did not replay; the default one, if it succeeds, recovers the same
/// writes and reports the same place (it may refuse damage only a
/// point-in-time open reads past: the caller says when).
pub fn read_only_opens(dir: &Path, options: &Options, what: &str, origins: &Origins) -> Seen {
    let before = files(dir);
    let pit = Db::open_read_only(dir, with_recovery(options, WalRecovery::PointInTime))
        .unwrap_or_else(|e| panic!("{what}: read-only point-in-time open: {e}"));
    let model = crate::common::contents(&pit);
    check_reads(&pit, &model, &[], what, origins);
    let stats = pit.stats();
    let last_sequence = pit.last_sequence();
    if let Some(cut) = &stats.wal_replay_cut {
        assert_eq!(cut.cause, WalCutCause::PointInTime, "{what}: {cut:?}");
        assert_eq!(
            cut.bytes_not_replayed,
            truthful_bytes(dir, &cut.path, cut.offset),
            "{what}: {cut:?}"
        );
    }
    pit.close().unwrap();
    let tolerant =
        match Db::open_read_only(dir, with_recovery(options, WalRecovery::TolerateTornTail)) {
            Ok(db) => {
                let got = crate::common::contents(&db);
                assert!(
                    got == model,
                    "{what}: the default open recovers other writes: {}",
                    origins.explain(&got, &model)
                );
                let cut = db.stats().wal_replay_cut;
                let place = |c: &Option<WalCut>| {
                    c.as_ref()
                        .map(|c| (c.path.clone(), c.offset, c.bytes_not_replayed))
                };
                assert_eq!(place(&cut), place(&stats.wal_replay_cut), "{what}");
                db.close().unwrap();
                true
            }
            Err(e) => {
                assert!(e.is_corruption(), "{what}: {e}");
                false
            }
        };
    assert!(
        before == files(dir),
        "{what}: a read-only open changed a file"
    );
    Seen {
        model,
        cut: stats.wal_replay_cut,
        salvaged: stats.wal_headers_salvaged,
        tolerant,
        last_sequence,
    }
}
