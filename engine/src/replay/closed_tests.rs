//! Review rev8: a WAL whose header says a clean close ended it with its
//! marker (`CLOSED`, `wal/header.rs`) among other WALs, and the marker's
//! forgery rule (`wal::ends_with_close_marker`) for legitimate markers.
//! No spurious refusal of what a crash leaves; no write dropped unreported.

use super::tests::{FRESH, PIT, TORN, batch, record, replay, replay_cut, wal_damage, wal_of};
use super::*;
use crate::wal::header;

fn marker(seq: u64) -> Vec<u8> {
    record(&batch(seq, 0, 0))
}

fn with_header(header: [u8; header::V2_HEADER_LEN], body: &[u8]) -> Vec<u8> {
    let mut out = header.to_vec();
    out.extend_from_slice(body);
    out
}

fn closed(body: &[u8]) -> Vec<u8> {
    with_header(header::encode_closed_v2(), body)
}

/// Writes `seqs`, then the marker at the sequence after them.
fn closed_body(seqs: std::ops::RangeInclusive<u64>) -> Vec<u8> {
    let next = seqs.end() + 1;
    let mut body = wal_of(seqs);
    body.extend(marker(next));
    body
}

/// Before the fix: a `CLOSED` WAL cut cleanly before its marker (its last
/// writes lost with it) opened under `PointInTime` with no cut reported,
/// where a zeroed page at the same place is reported: writes dropped
/// silently. Its end is the first byte not replayed.
#[test]
fn point_in_time_reports_a_closed_wal_cut_before_its_marker() {
    for kept in [2, 3] {
        let cut = closed(&wal_of(1..=kept));
        let len = cut.len() as u64;
        assert_eq!(replay(vec![cut.clone()], PIT, FRESH).unwrap(), Some(kept));
        let reported = replay_cut(vec![cut], PIT).map(|c| (c.offset, c.cause));
        assert_eq!(
            reported,
            Some((len, WalCutCause::PointInTime)),
            "{kept} of 3 writes kept"
        );
    }
    // An intact closed WAL is no cut.
    assert_eq!(replay_cut(vec![closed(&closed_body(1..=3))], PIT), None);
}

/// A closed WAL that is not the newest (a reopen that crashed before its
/// manifest: its new WAL empty, torn in its header, or continuing at the
/// marker's sequence) opens, every write kept.
#[test]
fn a_closed_wal_behind_a_newer_one_opens() {
    let older = closed(&closed_body(1..=3));
    let newer_empty = header::encode_v2(false).to_vec();
    let torn_header = header::encode_v2(true)[..5].to_vec();
    let mut continuing = header::encode_v2(true).to_vec();
    continuing.extend(wal_of(4..=5));
    for mode in [TORN, PIT] {
        for (newer, last) in [
            (newer_empty.clone(), 3),
            (torn_header.clone(), 3),
            (continuing.clone(), 5),
        ] {
            let wals = vec![older.clone(), newer];
            assert_eq!(replay(wals.clone(), mode, FRESH).unwrap(), Some(last));
            assert_eq!(replay_cut(wals, mode), None, "{mode:?}");
        }
    }
}

/// A closed WAL that is not the newest, its end lost (marker, maybe a
/// write): refused by a strict open; point-in-time recovery goes on into
/// the newer WAL when its first record continues the log (only the marker
/// was lost), and is cut before it when it does not.
#[test]
fn a_closed_wal_behind_a_newer_one_refuses_a_lost_end() {
    let mut newer = header::encode_v2(true).to_vec();
    newer.extend(wal_of(4..=5));
    for kept in [2, 3] {
        let older = closed(&wal_of(1..=kept));
        let wals = vec![older, newer.clone()];
        let (path, _, reason) = wal_damage(replay(wals.clone(), TORN, FRESH));
        assert_eq!(path, "000001.wal", "{kept}");
        assert_eq!(reason, WalDamage::ClosedWalEnd, "{kept}");
        let last = if kept == 3 { 5 } else { kept };
        assert_eq!(replay(wals.clone(), PIT, FRESH).unwrap(), Some(last));
        let cut = replay_cut(wals, PIT).map(|c| c.path);
        assert_eq!(cut.is_some(), kept < 3, "{kept}");
    }
}

/// Damage in an older WAL behind a closed newest one is refused, and
/// point-in-time recovery cuts exactly at it: nothing of the newer WAL.
#[test]
fn damage_in_an_older_wal_behind_a_closed_one_is_refused() {
    let older_body = wal_of(1..=3);
    let second = wal_of(1..=1).len();
    let newest = closed(&closed_body(4..=5));
    for older_header in [header::encode_v2(true), header::encode_v2(false)] {
        for flip in [second + 2, second + 12, older_body.len() - 1] {
            let mut older = with_header(older_header, &older_body);
            older[header::V2_HEADER_LEN + flip] ^= 0x04;
            // The newest's marker vouches for the older WAL, whatever its
            // header says: strict.
            let wals = vec![older, newest.clone()];
            let (path, _, _) = wal_damage(replay(wals.clone(), TORN, FRESH));
            assert_eq!(path, "000001.wal", "flip at {flip}");
            let cut = replay_cut(wals, PIT).unwrap();
            assert_eq!(cut.path, PathBuf::from("000001.wal"));
            // The damaged record: the second, or the third for the last byte.
            let third = wal_of(1..=2).len();
            let damaged = if flip >= third { third } else { second };
            assert_eq!(cut.offset as usize, header::V2_HEADER_LEN + damaged);
        }
    }
}

/// A legitimate marker past damage vouches whatever the tables' bound
/// (`LogStart::lowest` after a flush): a store closed cleanly whose header
/// rewrite was lost (unsynced header) refuses a bit flipped in any write,
/// the first one of its WAL included (no intact record before it).
#[test]
fn a_marker_past_damage_vouches_at_any_lowest_bound() {
    let start = LogStart {
        lowest: 50,
        highest: 50,
        acknowledged: 49,
        salted: false,
    };
    let body = closed_body(50..=53);
    let starts: Vec<usize> = (50..=53).map(|s| wal_of(50..s).len()).collect();
    for (n, at) in starts.iter().enumerate() {
        let mut damaged = with_header(header::encode_v2(false), &body);
        damaged[header::V2_HEADER_LEN + at + 12] ^= 0x10; // its payload
        assert!(
            wal::ends_with_close_marker(&damaged, start.lowest),
            "write {n}"
        );
        let (_, offset, _) = wal_damage(replay(vec![damaged], TORN, start));
        assert_eq!(offset as usize, header::V2_HEADER_LEN + at, "write {n}");
    }
    // The marker alone after a header (the frozen WAL before it holds the
    // writes), its header damaged by a torn rewrite: still a marker.
    let mut only = with_header(header::encode_v2(false), &marker(54));
    only[12] ^= 0x01;
    assert!(wal::ends_with_close_marker(&only, start.lowest));
}
