//! The close marker (`wal/seal.rs`): an empty batch at the sequence the
//! log goes on at. Replay takes it as a record holding no write; an empty
//! batch anywhere else is damage. After it, damage in the last write has a
//! record of the log after it, so a WAL whose header says "synced" refuses
//! it where it used to take it for a torn tail.

use super::tests::{FRESH, PIT, TORN, batch, record, replay, replay_cut, wal_damage, wal_of};
use super::*;
use crate::wal::header;

fn marker(seq: u64) -> Vec<u8> {
    record(&batch(seq, 0, 0))
}

fn headed(synced: bool, body: &[u8]) -> Vec<u8> {
    let mut out = header::encode_v2(synced).to_vec();
    out.extend_from_slice(body);
    out
}

#[test]
fn a_marker_at_the_next_sequence_holds_no_write() {
    for synced in [false, true] {
        let mut body = wal_of(1..=3);
        body.extend(marker(4));
        for mode in [TORN, PIT] {
            let wal = headed(synced, &body);
            assert_eq!(replay(vec![wal.clone()], mode, FRESH).unwrap(), Some(3));
            assert_eq!(replay_cut(vec![wal], mode), None);
        }
        // The marker as the first record of the newest WAL (its frozen
        // predecessor holds the writes), then a WAL of later writes.
        let older = headed(synced, &wal_of(1..=3));
        let newest = headed(synced, &marker(4));
        assert_eq!(
            replay(vec![older.clone(), newest.clone()], TORN, FRESH).unwrap(),
            Some(3)
        );
        let mut later = marker(4);
        later.extend(wal_of(4..=5));
        assert_eq!(
            replay(vec![older, headed(synced, &later)], TORN, FRESH).unwrap(),
            Some(5)
        );
    }
}

#[test]
fn an_empty_batch_where_the_log_does_not_go_on_is_damage() {
    for seq in [2, 5] {
        let mut body = wal_of(1..=3);
        body.extend(marker(seq));
        body.extend(wal_of(4..=5));
        let (_, offset, reason) = wal_damage(replay(vec![headed(true, &body)], TORN, FRESH));
        assert_eq!(reason, WalDamage::EmptyBatch, "marker at {seq}");
        assert_eq!(offset as usize, header::V2_HEADER_LEN + wal_of(1..=3).len());
    }
    // Nor may a log begin with one outside the range a first record has.
    let (_, _, reason) = wal_damage(replay(vec![headed(true, &marker(7))], TORN, FRESH));
    assert_eq!(reason, WalDamage::EmptyBatch);
}

#[test]
fn damage_in_the_last_write_before_a_marker_is_refused_when_synced() {
    let writes = wal_of(1..=3);
    let last = wal_of(1..=2).len();
    let mut body = writes.clone();
    body.extend(marker(4));
    body[last + 12] ^= 0x01; // the last write's payload
    let (_, offset, reason) = wal_damage(replay(vec![headed(true, &body)], TORN, FRESH));
    assert_eq!(offset as usize, header::V2_HEADER_LEN + last);
    assert_eq!(reason, WalDamage::BeforeIntact);
    // Without the marker the same damage is a torn tail: the write dropped.
    let mut torn = writes;
    torn[last + 12] ^= 0x01;
    assert_eq!(
        replay(vec![headed(true, &torn)], TORN, FRESH).unwrap(),
        Some(2)
    );
    // A WAL that says "unsynced" but ends in an intact marker (its header
    // never rewritten: a file system without `overwrite`, or a power loss
    // before the rewrite) was fsynced whole before the marker: refused too.
    let (_, offset, reason) = wal_damage(replay(vec![headed(false, &body)], TORN, FRESH));
    assert_eq!(offset as usize, header::V2_HEADER_LEN + last);
    assert_eq!(reason, WalDamage::BeforeIntact);
    // Without an intact marker at its end it ends the log there (what a
    // power loss leaves of a WAL written without fsync).
    let mut torn_marker = body.clone();
    torn_marker.truncate(body.len() - 1);
    assert_eq!(
        replay(vec![headed(false, &torn_marker)], TORN, FRESH).unwrap(),
        Some(2)
    );
}

/// An intact marker in the newest WAL vouches for the older WALs too: the
/// close fsynced every live WAL before writing it. Damage in an older
/// unsynced WAL is refused; without the marker the log ends there.
#[test]
fn a_marker_makes_the_older_unsynced_wals_strict_too() {
    let mut older = wal_of(1..=3);
    older[wal_of(1..=1).len() + 12] ^= 0x01; // the second write's payload
    let mut newest = wal_of(4..=5);
    newest.extend(marker(6));
    let logs = vec![headed(false, &older), headed(false, &newest)];
    let (path, _, reason) = wal_damage(replay(logs, TORN, FRESH));
    assert_eq!(
        (path.as_str(), reason),
        ("000001.wal", WalDamage::BeforeIntact)
    );
    let unmarked = vec![headed(false, &older), headed(false, &wal_of(4..=5))];
    assert_eq!(replay(unmarked, TORN, FRESH).unwrap(), Some(1));
}

/// Review rev5: a marker torn or damaged (a power loss during the close's
/// append of it) is the log's tail and drops no write, so the open reports
/// no cut (`Stats::wal_replay_cut`: "the writes logged from there on were
/// dropped"), as a torn header of the newest WAL is no cut. Only when its
/// length field is whole and intact: a tail of fewer bytes, or a length
/// flipped, may be a write's, and is still reported.
#[test]
fn a_torn_or_damaged_marker_is_no_cut() {
    let writes = wal_of(1..=3);
    let mut body = writes.clone();
    body.extend(marker(4));
    let mut cases = Vec::new();
    let length_field = writes.len()..writes.len() + 4;
    for keep in length_field.end..body.len() {
        cases.push((format!("torn to {keep}"), body[..keep].to_vec()));
    }
    for byte in length_field.end..body.len() {
        let mut flipped = body.clone();
        flipped[byte] ^= 0x01;
        cases.push((format!("bit flipped at {byte}"), flipped));
    }
    let mut reported = Vec::new();
    for synced in [false, true] {
        for (name, case) in &cases {
            for mode in [TORN, PIT] {
                let wal = headed(synced, case);
                let got = replay(vec![wal.clone()], mode, FRESH);
                assert_eq!(got.unwrap(), Some(3), "{name} synced={synced}");
                if let Some(cut) = replay_cut(vec![wal], mode) {
                    reported.push(format!("{name} synced={synced} {mode:?}: {cut:?}"));
                }
            }
        }
    }
    assert!(
        reported.is_empty(),
        "{} false cuts, e.g. {:?}",
        reported.len(),
        reported.first()
    );
}

/// A write at `seq` whose value ends with `tail`.
fn write_ending_with(seq: u64, tail: &[u8]) -> Vec<u8> {
    let mut value = vec![b'v'; 40];
    value.extend_from_slice(tail);
    let mut b = WriteBatch::new();
    b.put(b"backup", &value);
    record(b.encode(seq))
}

/// Review rev6: a value ending with a marker's 20 bytes (a closed WAL
/// stored in the store) is not a marker: in the last write of a WAL
/// written without fsync it must not make a power loss's damage before it
/// a refusal. Checked on the WAL alone, where the write is intact, and as
/// the newest WAL behind a damaged older one (the marker would vouch for
/// both). Before the fix both were refused as `BeforeIntact`.
#[test]
fn a_value_ending_like_a_marker_vouches_for_nothing() {
    for fake_seq in [1, 4, 5, 1000] {
        let mut body = wal_of(1..=2);
        body.extend(write_ending_with(3, &marker(fake_seq)));
        let second = wal_of(1..=1).len();
        body[second..second + 8].fill(0); // a lost page took its header
        let wal = headed(false, &body);
        assert_eq!(
            replay(vec![wal], TORN, FRESH).unwrap(),
            Some(1),
            "marker-like bytes at {fake_seq}"
        );
        let mut older = wal_of(1..=2);
        older[second..second + 8].fill(0);
        let newest = write_ending_with(3, &marker(fake_seq));
        let logs = vec![headed(false, &older), headed(false, &newest)];
        assert_eq!(replay(logs, TORN, FRESH).unwrap(), Some(1));
        // The write holding them damaged itself (a lost page inside its
        // value): its length field frames them inside it.
        let mut body = wal_of(1..=2);
        body.extend(write_ending_with(3, &marker(fake_seq)));
        let third = wal_of(1..=2).len();
        body[third + 40] = 0;
        assert_eq!(
            replay(vec![headed(false, &body)], TORN, FRESH).unwrap(),
            Some(2)
        );
    }
}

/// Past damage, marker-like bytes whose write's header the damage took
/// are told from a marker by their sequence alone: one the log has moved
/// past (a value holding this store's earlier close) is no marker; one
/// the log could reach is read as one, as a real marker after a lost
/// header must be (the residual a value holding another store's WAL
/// leaves).
#[test]
fn past_damage_a_marker_must_be_at_a_sequence_the_log_goes_on_at() {
    let second = wal_of(1..=1).len();
    let third = wal_of(1..=2).len();
    for (fake_seq, refused) in [(1, false), (2, false), (3, true), (9, true)] {
        let mut body = wal_of(1..=2);
        body.extend(write_ending_with(3, &marker(fake_seq)));
        body[second + 12] ^= 0x01; // the second write's payload
        body[third..third + 8].fill(0); // and the third's header
        let got = replay(vec![headed(false, &body)], TORN, FRESH);
        if refused {
            let (_, offset, _) = wal_damage(got);
            assert_eq!(offset as usize, header::V2_HEADER_LEN + second);
        } else {
            assert_eq!(got.unwrap(), Some(1), "marker-like bytes at {fake_seq}");
        }
    }
    // Where the tables leave the log (`LogStart::lowest`) counts too: a
    // WAL damaged from its first record, its marker-like bytes at the
    // sequence the log starts at, held at least one write before them.
    let start = LogStart {
        lowest: 11,
        highest: 11,
        acknowledged: 10,
        salted: false,
    };
    let mut body = wal_of(11..=12);
    body.extend(write_ending_with(13, &marker(11)));
    body[12] ^= 0x01;
    body[third..third + 8].fill(0);
    assert_eq!(
        replay(vec![headed(false, &body)], TORN, start).unwrap(),
        None
    );
}

/// Review rev6: a WAL whose header says a clean close ended it with a
/// marker (`CLOSED`) refuses damage at its end that takes the marker and
/// writes with it (a zeroed last page), which without the flag reads as a
/// torn tail and drops them; a damaged marker alone still drops nothing.
#[test]
fn a_closed_wal_refuses_damage_at_its_end_but_a_damaged_marker() {
    let mut body = wal_of(1..=3);
    body.extend(marker(4));
    let closed = |body: &[u8]| {
        let mut out = header::encode_closed_v2().to_vec();
        out.extend_from_slice(body);
        out
    };
    let last = wal_of(1..=2).len();
    let mut zeroed = body.clone();
    zeroed[last + 4..].fill(0); // the last write's checksum on, and the marker
    let (_, offset, reason) = wal_damage(replay(vec![closed(&zeroed)], TORN, FRESH));
    assert_eq!(offset as usize, header::V2_HEADER_LEN + last);
    assert_eq!(reason, WalDamage::ClosedWalEnd);
    // The same bytes under a "synced" header: a torn tail.
    assert_eq!(
        replay(vec![headed(true, &zeroed)], TORN, FRESH).unwrap(),
        Some(2)
    );
    assert_eq!(replay(vec![closed(&zeroed)], PIT, FRESH).unwrap(), Some(2));
    // Cut before the marker, or the marker's payload flipped: no write lost.
    let mut flipped = body.clone();
    *flipped.last_mut().unwrap() ^= 0x01;
    for case in [body[..wal_of(1..=3).len() + 6].to_vec(), flipped] {
        assert_eq!(replay(vec![closed(&case)], TORN, FRESH).unwrap(), Some(3));
    }
    // Cut before it wholly: the marker a sealed header promised is gone.
    let cut = &body[..wal_of(1..=3).len()];
    let (_, _, reason) = wal_damage(replay(vec![closed(cut)], TORN, FRESH));
    assert_eq!(reason, WalDamage::ClosedWalEnd);
}
