//! Hunt 28: the life of a store after a lossy point-in-time recovery,
//! where RocksDB has had bugs (writes after a point-in-time recovery and
//! a second crash bringing back the dropped writes, or reusing their
//! sequence numbers).
//!
//! A first session writes a history of puts, deletes and batches on a
//! deep tree of narrow tables, snapshots held, then, flushes held, fills
//! one to three WALs, and is killed (its files copied as they are). One
//! of its WALs is damaged: a byte flipped, a sector or page zeroed, the
//! file cut inside a record or where one starts, and maybe a header torn
//! as a seal's rewrite tears it (flags new, checksum old). Read-only opens
//! (point-in-time and default) must recover exactly what
//! `WalRecovery::PointInTime` promises (the writes before the first
//! damaged record, nothing after), report the cut and the salvaged header
//! truthfully, and change no file.
//!
//! Then a second session opens it read-write at a point in time and
//! writes (favouring the keys whose writes were dropped: overwrites and
//! deletes of keys that existed before the cut), flushes (compactions run
//! inline), holds snapshots and closes, on `FaultFs` failing every
//! operation from a crash point on (its open included), then a power loss
//! under page, overwrite, rename and unlink fates; read-only opens of both
//! modes check the recovered store is one of the session's models within
//! what was durable (`SyncMode::Always`: every acknowledged write;
//! `Never`: every write before a flush that returned, all of them after a
//! clean close), that no dropped write comes back, no deleted key and no
//! older version wins, and every key's get agrees. Half the time a byte
//! of a record that recovery replayed is then flipped (a second lossy
//! recovery, `second.rs`): the session's model before that write, and the
//! cut there. A third session does it again, opened in either mode, and
//! last a read-write open of each mode must hold the same store.
//!
//! `BLOOMLSM_PIT_AFTERLIFE_SEEDS=N` runs N seeds (default 10) from
//! `BLOOMLSM_PIT_AFTERLIFE_FIRST` (0); `BLOOMLSM_PIT_AFTERLIFE_POINTS`
//! sets the crash points per seed (default 12); `..._VERBOSE` prints each
//! seed's draws and counts.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

mod check;
mod damage;
mod history;
mod second;
mod session;

use std::path::Path;

use bloomlsm::fs::fault::{OverwriteFate, RenameFate, Revival, UnsyncedFate};
use bloomlsm::{Db, SyncMode, WalCut, WalRecovery};

use crate::common::{self, Model, Rng};

use check::{Seen, check_reads, read_only_opens, with_recovery};
use damage::{Damage, KINDS};
use history::{Image, Origins, narrow};
use second::Second;
use session::{Plan, Session};

const SESSION_2_STEPS: usize = 60;
const SESSION_3_STEPS: usize = 40;

fn env(name: &str, unset: u64) -> u64 {
    std::env::var(name).map_or(unset, |s| s.parse().unwrap())
}

fn place(cut: &Option<WalCut>) -> Option<(String, u64, u64)> {
    cut.as_ref().map(|c| {
        let name = c.path.file_name().unwrap().to_string_lossy().into_owned();
        (name, c.offset, c.bytes_not_replayed)
    })
}

fn names(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// One seed's damaged first session and what point-in-time owes for it.
struct Start {
    image: Image,
    damage: Damage,
    pit_model: Model,
    favoured: Vec<u64>,
    origins: Origins,
    syncs: [SyncMode; 3],
    /// The last sequence of a write the point-in-time open recovers.
    recovered_seq: u64,
    /// The default open of the damaged image succeeds.
    tolerant: bool,
    /// The second session runs flushes and compactions on background
    /// threads (its crash points then fall wherever the threads are).
    background: bool,
}

fn start(seed: u64) -> Start {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9) ^ 0x28);
    let mut sync = || {
        if rng.below(2) == 0 {
            SyncMode::Always
        } else {
            SyncMode::Never
        }
    };
    let syncs = [sync(), sync(), sync()];
    let background = rng.below(3) == 0;
    let mut origins = Origins::default();
    let before_hold = 250 + rng.below(150) as usize;
    let wals = 1 + rng.below(3) as usize;
    let image = history::first_session(&mut rng, syncs[0], before_hold, wals, &mut origins);
    let kind = *rng.pick(&KINDS);
    let damage = damage::damage(&mut rng, &image, kind);
    let pit_model = history::model_of(&image.commits, damage.prefix);
    let mut favoured: Vec<u64> = image.commits[damage.prefix..]
        .iter()
        .flat_map(|c| c.keys())
        .collect();
    favoured.sort_unstable();
    favoured.dedup();
    let recovered_seq = damage.prefix.checked_sub(1).map_or(0, |c| {
        image.first_seqs[c] + image.commits[c].0.len() as u64 - 1
    });
    Start {
        image,
        damage,
        pit_model,
        favoured,
        origins,
        syncs,
        recovered_seq,
        tolerant: false,
        background,
    }
}

/// The read-only opens of the damaged image: exactly the promise.
fn check_image(s: &Start, what: &str) -> bool {
    let options = narrow(s.syncs[0], false);
    let seen = read_only_opens(s.image.dir.path(), &options, what, &s.origins);
    check_first_damage(s, &seen, what, &s.origins);
    assert!(
        seen.tolerant || s.damage.cut.is_some() || !s.damage.salvaged.is_empty(),
        "{what}: the default open refused a store with no damage it could see"
    );
    seen.tolerant
}

/// `seen` recovered the damaged first session: its writes and cut are
/// exactly the point-in-time promise.
fn check_first_damage(s: &Start, seen: &Seen, what: &str, origins: &Origins) {
    assert!(
        seen.model == s.pit_model,
        "{what}: {:?} damage, {} of {} writes owed: {}",
        s.damage.kind,
        s.damage.prefix,
        s.image.commits.len(),
        origins.explain(&seen.model, &s.pit_model)
    );
    let want = s.damage.cut.as_ref().map(|(p, o, b)| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let offset = o.or(seen.cut.as_ref().map(|c| c.offset)).unwrap_or(0);
        (name, offset, *b)
    });
    assert_eq!(place(&seen.cut), want, "{what}: {:?}", s.damage);
    assert_eq!(
        names(&seen.salvaged),
        names(&s.damage.salvaged),
        "{what}: salvaged"
    );
}

/// Whether `cut` names one of the first session's WALs: its damage is
/// still what the store's log ends at.
fn names_first_wal(s: &Start, cut: &Option<WalCut>) -> bool {
    let first = names(&s.damage.wals);
    place(cut).is_some_and(|(name, _, _)| first.contains(&name))
}

/// The store after a power loss that ended `session`: one of its models
/// within its durable bounds.
fn check_after(
    s: &Start,
    origins: &Origins,
    dir: &Path,
    session: &Session,
    number: u32,
    second: Option<&Second>,
    what: &str,
) -> Seen {
    let options = narrow(session.sync, false);
    let seen = read_only_opens(dir, &options, what, origins);
    let (least, most) = session.bounds();
    let found = session.models.iter().rposition(|m| *m == seen.model);
    match found {
        Some(_) if session.models[least..=most].contains(&seen.model) => {}
        Some(n) => panic!(
            "{what}: {n} of session {number}'s commits recovered, owed {least}..={most} \
             ({} acknowledged, closed {})",
            session.acked, session.closed
        ),
        None => panic!(
            "{what}: no model of session {number} (owed {least}..={most}): {}",
            origins.explain(&seen.model, &session.models[least])
        ),
    }
    if names_first_wal(s, &seen.cut) || !seen.salvaged.is_empty() {
        // Every later open failed before its manifest: the first damage
        // is where the log still ends.
        check_first_damage(s, &seen, what, origins);
    } else if let Some(x) = second.filter(|x| place(&seen.cut).is_some_and(|c| c.0 == x.wal)) {
        // The open after the second damage failed before its manifest.
        assert_eq!(place(&seen.cut), Some(x.cut.clone()), "{what}");
    } else {
        assert!(
            seen.tolerant,
            "{what}: the default open refused: {:?}",
            seen.cut
        );
    }
    seen
}

use common::power_loss_fates::{Fates, armed};

fn fates(n: u64) -> Fates {
    match n % 4 {
        0 => (
            UnsyncedFate::Pages(n),
            OverwriteFate::Applied,
            Revival::All,
            RenameFate::Undone,
        ),
        1 => (
            UnsyncedFate::Sectors(n),
            OverwriteFate::Seeded(n),
            Revival::Seeded(n),
            RenameFate::Seeded(n),
        ),
        2 => (
            UnsyncedFate::Truncated,
            OverwriteFate::Lost,
            Revival::Nothing,
            RenameFate::Kept,
        ),
        _ => (
            UnsyncedFate::Pages(n),
            OverwriteFate::Seeded(n),
            Revival::All,
            RenameFate::Kept,
        ),
    }
}

/// Operations each later session made (for the choice of crash points).
struct Ops(u64, u64, u64);

/// What the runs reached, per later session (index 0: session 2).
#[derive(Debug, Default)]
struct Tally {
    cases: u64,
    /// Opens that returned `Ok`.
    opened: [u64; 2],
    /// Sessions that crashed after their open.
    crashed_running: [u64; 2],
    /// Recoveries holding some of the session's commits but not all.
    partial: [u64; 2],
    /// Recoveries whose log still ended at the first session's damage.
    first_damage_left: [u64; 2],
    /// Default opens refused after the session.
    refused: [u64; 2],
    /// Commits acknowledged.
    acked: [u64; 2],
    /// Cases damaged a second time after session 2.
    second: u64,
}

impl Tally {
    fn add(&mut self, i: usize, s: &Session, seen: &Seen, first_damage: bool) {
        let all = s.models.len() - 1;
        self.opened[i] += u64::from(s.opened.is_some());
        self.crashed_running[i] += u64::from(s.opened.is_some() && !s.closed);
        let n = s.models.iter().rposition(|m| *m == seen.model).unwrap_or(0);
        self.partial[i] += u64::from(n > 0 && n < all);
        self.first_damage_left[i] += u64::from(first_damage);
        self.refused[i] += u64::from(!seen.tolerant);
        self.acked[i] += s.acked as u64;
    }
}

/// Sessions 2 and 3 on a copy of the damaged image, crashing at `k2` and
/// `k3` operations into each.
fn run_case(s: &Start, seed: u64, k2: u64, k3: u64, f: Fates, tally: &mut Tally) -> Ops {
    tally.cases += 1;
    let what = format!("seed {seed} crash {k2}/{k3} {f:?}");
    let dir = common::scratch_dir();
    for name in common::listing(s.image.dir.path()) {
        std::fs::copy(s.image.dir.path().join(&name), dir.path().join(&name)).unwrap();
    }
    let fs = armed(f);
    let mut origins = Origins(s.origins.0.clone());
    // The same commits whatever the crash point.
    let mut rng = Rng(seed ^ 0x5e55_1002);
    // Mostly at a point in time; by default where that open would succeed.
    let mode = if s.tolerant && rng.below(4) == 0 {
        WalRecovery::TolerateTornTail
    } else {
        WalRecovery::PointInTime
    };
    let plan = Plan {
        number: 2,
        options: with_recovery(&narrow(s.syncs[1], s.background), mode),
        crash_at: k2,
        commits: SESSION_2_STEPS,
        favoured: &s.favoured,
    };
    let session2 = session::run(dir.path(), &fs, &plan, &s.pit_model, &mut rng, &mut origins);
    let (ops2, open2) = (fs.ops(), session2.open_ops);
    if let Some((cut, salvaged, last_seq)) = &session2.opened {
        let seen = Seen {
            model: s.pit_model.clone(),
            cut: cut.clone(),
            salvaged: salvaged.clone(),
            tolerant: false,
            last_sequence: *last_seq,
        };
        check_first_damage(s, &seen, &format!("{what}: session 2's open"), &origins);
        assert!(*last_seq >= s.recovered_seq, "{what}: sequence {last_seq}");
    }
    fs.heal();
    fs.simulate_power_loss().unwrap();
    let after2 = format!("{what}: after session 2");
    let mut seen2 = check_after(s, &origins, dir.path(), &session2, 2, None, &after2);
    tally.add(0, &session2, &seen2, names_first_wal(s, &seen2.cut));

    // Half the time a second lossy recovery: a record session 2's
    // recovery replayed damaged.
    let mut rng = Rng(seed ^ k2 ^ 0xda3a);
    let second =
        (rng.below(2) == 0 && !names_first_wal(s, &seen2.cut) && seen2.salvaged.is_empty())
            .then(|| second::damage_again(dir.path(), &session2, &seen2, &mut rng))
            .flatten();
    if let Some(x) = &second {
        let again = format!("{after2}, damaged again in {}", x.wal);
        seen2 = read_only_opens(dir.path(), &narrow(s.syncs[1], false), &again, &origins);
        assert!(
            seen2.model == x.model,
            "{again}: {}",
            origins.explain(&seen2.model, &x.model)
        );
        assert_eq!(place(&seen2.cut), Some(x.cut.clone()), "{again}");
        tally.second += 1;
    }

    let mut rng = Rng(seed ^ 0x5e55_1003);
    let mode = if seen2.tolerant && rng.below(2) == 0 {
        WalRecovery::TolerateTornTail
    } else {
        WalRecovery::PointInTime
    };
    let plan = Plan {
        number: 3,
        options: with_recovery(&narrow(s.syncs[2], false), mode),
        crash_at: k3,
        commits: SESSION_3_STEPS,
        favoured: &s.favoured,
    };
    let before3 = fs.ops();
    let session3 = session::run(dir.path(), &fs, &plan, &seen2.model, &mut rng, &mut origins);
    let ops3 = fs.ops() - before3;
    if let Some((cut, salvaged, _)) = &session3.opened {
        assert_eq!(place(cut), place(&seen2.cut), "{what}: session 3's open");
        assert_eq!(names(salvaged), names(&seen2.salvaged), "{what}");
    }
    fs.heal();
    fs.simulate_power_loss().unwrap();
    let after3 = format!("{what}: after session 3");
    let seen3 = check_after(
        s,
        &origins,
        dir.path(),
        &session3,
        3,
        second.as_ref(),
        &after3,
    );
    tally.add(1, &session3, &seen3, names_first_wal(s, &seen3.cut));
    // A sequence is never handed out twice: the store's last one never
    // goes back.
    assert!(
        s.recovered_seq <= seen2.last_sequence && seen2.last_sequence <= seen3.last_sequence,
        "{after3}: last sequences {} then {} then {}",
        s.recovered_seq,
        seen2.last_sequence,
        seen3.last_sequence
    );

    // Last, read-write opens of each mode hold that store.
    let options = narrow(s.syncs[2], false);
    for mode in [WalRecovery::PointInTime, WalRecovery::TolerateTornTail] {
        let db = Db::open(dir.path(), with_recovery(&options, mode))
            .unwrap_or_else(|e| panic!("{after3}: read-write {mode:?} open: {e}"));
        check_reads(&db, &seen3.model, &[], &after3, &origins);
        db.close().unwrap();
    }
    Ops(ops2, ops3, open2)
}

#[test]
fn point_in_time_recovery_then_crashing_sessions_keep_the_promise() {
    let seeds = common::env_seeds(
        "BLOOMLSM_PIT_AFTERLIFE_SEEDS",
        "BLOOMLSM_PIT_AFTERLIFE_FIRST",
        10,
    );
    let points = env("BLOOMLSM_PIT_AFTERLIFE_POINTS", 12);
    let verbose = std::env::var_os("BLOOMLSM_PIT_AFTERLIFE_VERBOSE").is_some();
    let mut tally = Tally::default();
    for seed in seeds {
        let mut s = start(seed);
        s.tolerant = check_image(&s, &format!("seed {seed}: the damaged image"));
        // A run crashing nowhere counts each session's operations.
        let far = u64::MAX / 4;
        let Ops(ops2, ops3, open2) = run_case(&s, seed, far, far, fates(seed), &mut tally);
        let mut rng = Rng(seed ^ 0xc4a5);
        for p in 0..points {
            // Every third in the second session's open, the others
            // spread over the whole session.
            let k2 = if p % 3 == 0 {
                rng.below(open2 + 1)
            } else {
                (p * (ops2 + 2) + rng.below(ops2 / points + 1)) / points
            };
            let k3 = if rng.below(4) == 0 {
                far
            } else {
                rng.below(ops3 + 2)
            };
            run_case(&s, seed, k2, k3, fates(seed * 31 + p), &mut tally);
        }
        if verbose {
            eprintln!(
                "seed {seed}: syncs {:?}, {} commits, {:?} damage (torn header {:?}), {} kept, \
                 cut {:?}, salvaged {:?}, session ops {ops2} (open {open2})/{ops3}",
                s.syncs,
                s.image.commits.len(),
                s.damage.kind,
                s.damage.torn_header,
                s.damage.prefix,
                s.damage.cut,
                names(&s.damage.salvaged),
            );
        }
    }
    if verbose {
        eprintln!("{tally:?}");
    }
}
