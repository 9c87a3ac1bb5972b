//! Review of pit27 (`wal::salvaged_records`): at a point in time a WAL
//! whose header a torn seal rewrite damaged, its salt intact, must read
//! exactly as the same WAL with its header intact would: the same
//! records, the same sequence checks against the tables and the
//! manifest (`LogStart`), the same cut. Anything else is a write the
//! salvage adds or drops.

use super::tests::{PIT, SALTED, TORN, batch, logs, salted};
use super::*;
use crate::wal::header::{self, HEADER_LEN};

const SALT: u64 = 0x0123_4567_89ab_cdef;
const NEWER_SALT: u64 = 0x7777_0000_1234_5678;

/// Version 3 records of one-op writes `seqs` under `salt`.
fn body(salt: u64, seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
    seqs.into_iter()
        .flat_map(|s| salted(Some(salt), &batch(s, 1, 5)))
        .collect()
}

fn marker(salt: u64, seq: u64) -> Vec<u8> {
    salted(Some(salt), WriteBatch::new().encode(seq))
}

/// `intact` with its header torn as a seal rewrite tears it: the new
/// header's flags (closed) over the old header's checksum.
fn torn(intact: &[u8]) -> Vec<u8> {
    let mut out = intact.to_vec();
    out[10..12].copy_from_slice(&header::encode_closed(SALT)[10..12]);
    if header::decode(&out) != WalFormat::DamagedHeader {
        // The header already said closed: tear the checksum instead.
        out[20..24].copy_from_slice(&header::encode(true, SALT)[20..24]);
    }
    assert_eq!(header::decode(&out), WalFormat::DamagedHeader);
    out
}

/// (last, cut offset and bytes) of a point-in-time replay.
fn pit(wals: Vec<Vec<u8>>, start: LogStart) -> (Option<u64>, Option<(u64, u64)>) {
    let got = replay_logs(&logs(wals), PIT, start, &MemTable::new(0)).unwrap();
    (got.last, got.cut.map(|c| (c.offset, c.bytes_not_replayed)))
}

/// Starts a store can hand replay: tables ending before, at or past the
/// WAL's first write, a manifest's last sequence before or after it.
fn starts() -> Vec<LogStart> {
    let mut out = Vec::new();
    for lowest in [1, 3, 6, 9] {
        for highest in [lowest, lowest + 2, 20] {
            out.push(LogStart {
                lowest,
                highest,
                acknowledged: highest - 1,
                salted: true,
            });
        }
    }
    out
}

/// The brief's sequence cases, salvage against an intact header: an
/// older WAL salvaged before a newer one continuing, skipping or
/// restarting its sequences; tables already holding some or all of the
/// salvaged WAL's writes; a damaged record in the middle.
#[test]
fn a_salvaged_wal_replays_as_its_intact_header_would_at_a_point_in_time() {
    let older_intact = [&header::encode(false, SALT)[..], &body(SALT, 3..=7)].concat();
    let mut damaged_mid = older_intact.clone();
    let third = HEADER_LEN + body(SALT, 3..=4).len();
    damaged_mid[third + 13] ^= 1;
    let newers: Vec<Vec<u8>> = [8..=9, 9..=10, 3..=4, 5..=6]
        .into_iter()
        .map(|seqs| {
            let last = *seqs.end();
            [
                &header::encode(false, NEWER_SALT)[..],
                &body(NEWER_SALT, seqs),
                &marker(NEWER_SALT, last + 1),
            ]
            .concat()
        })
        .collect();
    for start in starts() {
        for older in [&older_intact, &damaged_mid] {
            for newer in &newers {
                let intact = pit(vec![older.clone(), newer.clone()], start);
                let salvaged = pit(vec![torn(older), newer.clone()], start);
                assert_eq!(salvaged, intact, "{start:?}, newer {newer:?}");
            }
        }
    }
}

/// The newest WAL, sealed: its close marker after writes 3..=7, whose
/// header's rewrite (synced to synced and closed) tore.
#[test]
fn a_salvaged_newest_sealed_wal_replays_as_its_intact_header_would() {
    let sealed = [
        &header::encode_closed(SALT)[..],
        &body(SALT, 3..=7),
        &marker(SALT, 8),
    ]
    .concat();
    for start in starts() {
        let intact = pit(vec![sealed.clone()], start);
        let salvaged = pit(vec![torn(&sealed)], start);
        assert_eq!(salvaged, intact, "{start:?}");
    }
}

/// A clean close of a `SyncMode::Never` store whose live WAL holds no
/// write rewrites its header (unsynced to synced) with nothing after it
/// (`seal.rs`: no marker without a write). The rewrite torn inside its
/// sector leaves a 24-byte file that never held a record: no write is
/// lost, so no cut is owed.
#[test]
fn a_torn_seal_of_a_wal_without_records_is_no_cut() {
    let old = header::encode(false, SALT);
    let new = header::encode(true, SALT);
    let mut image = old.to_vec();
    image[20..24].copy_from_slice(&new[20..24]);
    assert_eq!(header::decode(&image), WalFormat::DamagedHeader);
    for mode in [TORN, PIT] {
        let got = replay_logs(&logs(vec![image.clone()]), mode, SALTED, &MemTable::new(0));
        let got = got.unwrap();
        assert_eq!(got.last, None);
        assert_eq!(got.cut, None, "{mode:?}: a cut of a WAL that held no write");
    }
}
