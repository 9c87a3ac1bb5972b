//! Power loss at every crash point around bottommost cleanups: key-ordered
//! runs with deletes inside move down by trivial moves, tombstones and all,
//! then the settled background work rewrites them (cleanups). After each
//! crash: reopen, every acknowledged write there, no deleted key back, no
//! orphan or missing table.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, Options, SyncMode};
use bloomlsm_tests::crash_workload::{
    self, CrashRun, Write, contents_after, synced_inline_options,
};
use bloomlsm_tests::{close_with_no_orphan_table, scratch_dir};

const RUNS: u64 = 3;
const RUN_KEYS: u64 = 24;

fn options() -> Options {
    Options {
        l1_bytes: 2048,
        target_file_bytes: 512,
        block_size: 128,
        num_levels: 5,
        ..synced_inline_options()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The workload as (key, value or delete), in order.
fn workload() -> Vec<Write> {
    let mut w = Vec::new();
    for r in 0..RUNS {
        for i in r * RUN_KEYS..(r + 1) * RUN_KEYS {
            w.push((key(i), Some(format!("value-{i:06}-{r}").into_bytes())));
            if i % 3 != 0 {
                w.push((key(i), None));
            }
        }
    }
    w
}

/// Runs the workload until the injected crash, flushing every 40 writes.
fn run_until_crash(dir: &std::path::Path, fs: &FaultFs) -> CrashRun {
    crash_workload::run_until_crash(dir, fs, options(), &workload(), 40, 0)
}

/// Every file's name and bytes.
fn image(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn model(ops: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    contents_after(&workload(), ops)
}

#[test]
fn every_crash_point_around_bottom_cleanups_recovers_the_acknowledged_state() {
    let dir = scratch_dir();
    let fs = FaultFs::new();
    let full = run_until_crash(dir.path(), &fs);
    assert_eq!(full.acked, workload().len());
    let cleanups = full.settled.map_or(0, |s| s.bottom_cleanups);
    assert!(cleanups > 0, "the workload must reach bottommost cleanups");
    let total_ops = fs.ops();
    for crash_at in 0..total_ops {
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        let acked = run_until_crash(dir.path(), &fs).acked;
        fs.simulate_power_loss().unwrap();
        // The store as the crash left it (orphans, a temporary manifest,
        // WALs a flush had made obsolete), studied read-only first: the
        // same answers as the read-write open below, and not a byte moved.
        let before = image(dir.path());
        let studied = if dir.path().join("MANIFEST").exists() {
            let ro = Db::open_read_only(dir.path(), options()).unwrap_or_else(|e| {
                panic!("read-only open after a crash at operation {crash_at} failed: {e}")
            });
            let got: BTreeMap<Vec<u8>, Vec<u8>> = ro
                .scan::<Vec<u8>, _>(..)
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            let seq = ro.last_sequence();
            ro.close().unwrap();
            Some((got, seq))
        } else {
            assert!(matches!(
                Db::open_read_only(dir.path(), options()),
                Err(Error::NoManifest { .. })
            ));
            None
        };
        assert_eq!(
            image(dir.path()),
            before,
            "crash at {crash_at}: read-only open changed the store"
        );
        let db = Db::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("reopen after a crash at operation {crash_at} failed: {e}"));
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db
            .scan::<Vec<u8>, _>(..)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        // Synced each write: the acknowledged prefix, or one more.
        assert!(
            got == model(acked) || got == model(acked + 1),
            "crash at {crash_at}: {acked} acknowledged, the store is neither prefix"
        );
        if let Some((ro_got, ro_seq)) = studied {
            assert_eq!(
                ro_got, got,
                "crash at {crash_at}: read-only and read-write answers differ"
            );
            assert_eq!(
                ro_seq,
                db.last_sequence(),
                "crash at {crash_at}: last sequence"
            );
        }
        close_with_no_orphan_table(db, dir.path(), &format!("crash at {crash_at}"));
    }
    println!("{total_ops} crash points, {cleanups} cleanups in the full run");
}

/// A copy of a store directory (files only).
fn copy_dir(from: &std::path::Path) -> tempfile::TempDir {
    let to = scratch_dir();
    for (name, bytes) in image(from) {
        std::fs::write(to.path().join(name), bytes).unwrap();
    }
    to
}

/// Every pair of a store.
type Contents = BTreeMap<Vec<u8>, Vec<u8>>;

/// What an open answers: every pair and the last sequence, or the error.
fn study(db: bloomlsm::Result<Db>) -> Result<(Contents, u64), String> {
    // The error without the store's path (the two opens study copies).
    let db = db.map_err(|e| {
        let text = format!("{e:?}");
        match (text.find("path: \""), text.find(".wal\"")) {
            (Some(from), Some(to)) if from < to => format!("{}{}", &text[..from], &text[to..]),
            _ => text,
        }
    })?;
    let got = db
        .scan::<Vec<u8>, _>(..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    Ok((got, db.last_sequence()))
}

/// `SyncMode::Never` (WAL tails torn by the power loss, several live WALs
/// when a flush failed), at every crash point (power loss or a process
/// crash), under each `WalRecovery`
/// mode, and again with a byte of the oldest WAL flipped (damage in an
/// older WAL): a read-only open answers (or refuses) exactly as a
/// read-write open of a copy does, and changes no byte.
#[test]
fn read_only_opens_answer_as_read_write_opens_after_every_never_mode_crash() {
    use bloomlsm::WalRecovery;
    let never = || Options {
        sync: SyncMode::Never,
        ..options()
    };
    let run = |dir: &std::path::Path, fs: &FaultFs| {
        let Ok(db) = Db::open_with_fs(dir, never(), Arc::new(fs.clone())) else {
            return;
        };
        for (n, (k, v)) in workload().iter().enumerate() {
            let r = match v {
                Some(v) => db.put(k, v),
                None => db.delete(k),
            };
            if r.is_err() || ((n + 1) % 40 == 0 && db.flush().is_err()) {
                break;
            }
        }
        let _ = db.wait_for_background_work();
        drop(db);
    };
    let fs = FaultFs::new();
    run(scratch_dir().path(), &fs);
    let total_ops = fs.ops();
    let mut compared = 0;
    let mut damaged = 0;
    let mut refused = 0;
    for (crash_at, power_loss) in (0..total_ops).flat_map(|n| [(n, true), (n, false)]) {
        let dir = scratch_dir();
        let fs = FaultFs::new();
        fs.fail_from_op(crash_at);
        run(dir.path(), &fs);
        if power_loss {
            // Else a process crash: what was written stays.
            fs.simulate_power_loss().unwrap();
        }
        if !dir.path().join("MANIFEST").exists() {
            continue;
        }
        for damage in [false, true] {
            if damage {
                let mut wals: Vec<_> = image(dir.path())
                    .into_keys()
                    .filter(|n| n.ends_with(".wal"))
                    .collect();
                wals.sort();
                let Some(oldest) = wals.first() else { break };
                let path = dir.path().join(oldest);
                let mut bytes = std::fs::read(&path).unwrap();
                if wals.len() < 2 || bytes.len() < 16 {
                    break;
                }
                let at = bytes.len() / 2;
                bytes[at] ^= 0x40;
                std::fs::write(&path, bytes).unwrap();
            }
            for mode in [WalRecovery::TolerateTornTail, WalRecovery::PointInTime] {
                let opts = Options {
                    wal_recovery: mode,
                    ..never()
                };
                let before = image(dir.path());
                let ro = study(Db::open_read_only(dir.path(), opts.clone()));
                assert_eq!(
                    image(dir.path()),
                    before,
                    "crash at {crash_at}: read-only open changed the store"
                );
                let copy = copy_dir(dir.path());
                let rw = study(Db::open(copy.path(), opts));
                assert_eq!(
                    ro, rw,
                    "crash at {crash_at}, {mode:?}, damaged {damage}: read-only and read-write opens differ"
                );
                compared += 1;
                damaged += u64::from(damage);
                refused += u64::from(ro.is_err());
            }
        }
    }
    println!(
        "{compared} comparisons ({damaged} with a damaged older WAL, {refused} refused) over {total_ops} operations"
    );
    assert!(damaged > 0, "some crash left several WALs");
}
