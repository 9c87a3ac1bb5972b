//! A clean close's header rewrite torn inside its sector (`wal/seal.rs`):
//! the flags of the new header and the rest of the old one, or the
//! reverse, so the header fails its checksum. Its salt (bytes 12..20) is
//! the same in both headers, and every record was fsynced before the
//! rewrite. `TolerateTornTail` refuses it (`DamagedHeader`: without a
//! trusted header it cannot tell a torn tail from lost durable writes);
//! `PointInTime`, the way to open it, replays every record that verifies
//! under that salt, up to the first damage. Failed before the fix: point
//! in time cut such a WAL at byte 0 and dropped every write in it.

use super::tests::{PIT, SALTED, TORN, batch, replay, salted, wal_damage};
use super::*;
use crate::wal::header::{self, HEADER_LEN};

const SALT: u64 = 0x0123_4567_89ab_cdef;

/// Version 3 records of one-op writes `seqs` under `salt`.
fn body(salt: Option<u64>, seqs: std::ops::RangeInclusive<u64>) -> Vec<u8> {
    seqs.flat_map(|s| salted(salt, &batch(s, 1, 5))).collect()
}

/// `old` with the byte range `torn` taken from `new`: a rewrite of one
/// header by another torn inside its sector.
fn torn(old: [u8; HEADER_LEN], new: [u8; HEADER_LEN], torn: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = old.to_vec();
    out[torn.clone()].copy_from_slice(&new[torn]);
    out
}

/// Every rewrite a seal makes (old header, new header) and every way of
/// tearing it that fails the checksum: the new flags with the old
/// checksum, or the old flags with the new checksum.
fn torn_seal_headers() -> Vec<Vec<u8>> {
    let rewrites = [
        (header::encode(true, SALT), header::encode_closed(SALT)),
        (header::encode(false, SALT), header::encode_closed(SALT)),
        (header::encode(false, SALT), header::encode(true, SALT)),
    ];
    let mut out = Vec::new();
    for (old, new) in rewrites {
        for range in [10..12, 20..24] {
            let h = torn(old, new, range);
            assert_eq!(wal::format_of(&h, true), WalFormat::DamagedHeader);
            out.push(h);
        }
    }
    out
}

/// The brief's case: a synced WAL of writes 1..=5 whose seal's rewrite
/// kept only the new flags (bytes 10..12 of `encode_closed`).
#[test]
fn a_torn_seal_header_is_refused_by_default_and_replayed_whole_at_a_point_in_time() {
    let mut image = torn(
        header::encode(true, SALT),
        header::encode_closed(SALT),
        10..12,
    );
    image.extend(body(Some(SALT), 1..=5));
    let (_, offset, reason) = wal_damage(replay(vec![image.clone()], TORN, SALTED));
    assert_eq!((offset, reason), (0, WalDamage::DamagedHeader));
    assert_eq!(replay(vec![image], PIT, SALTED).unwrap(), Some(5));
}

/// Every torn rewrite, with the close marker a clean close appends, in a
/// store salted or not (a version 3 WAL in a store of format 5 is the
/// WAL its last open created), as the only WAL or an older one: point in
/// time replays every write, and the newer WAL after it.
#[test]
fn every_torn_seal_header_replays_every_write_at_a_point_in_time() {
    let marker = salted(Some(SALT), WriteBatch::new().encode(6));
    for h in torn_seal_headers() {
        for start in [SALTED, super::tests::FRESH] {
            let image = [&h[..], &body(Some(SALT), 1..=5), &marker].concat();
            assert_eq!(replay(vec![image.clone()], PIT, start).unwrap(), Some(5));
            let older = [&h[..], &body(Some(SALT), 1..=5)].concat();
            let newer = [&header::encode(false, 7)[..], &body(Some(7), 6..=8)].concat();
            assert_eq!(replay(vec![older, newer], PIT, start).unwrap(), Some(8));
            assert!(replay(vec![image], TORN, start).is_err());
        }
    }
}

/// The records are replayed up to the first damage, which ends the log
/// there as in any WAL opened at a point in time.
#[test]
fn a_torn_seal_header_replays_up_to_the_first_damaged_record() {
    let h = &torn_seal_headers()[0];
    let mut image = [&h[..], &body(Some(SALT), 1..=5)].concat();
    let third = HEADER_LEN + body(Some(SALT), 1..=2).len();
    image[third + 13] ^= 1;
    let got = replay_logs(
        &super::tests::logs(vec![image]),
        PIT,
        SALTED,
        &MemTable::new(0),
    );
    let got = got.unwrap();
    assert_eq!(got.last, Some(2));
    assert_eq!(got.cut.map(|c| c.offset), Some(third as u64));
    assert_eq!(got.salvaged.len(), 1, "the salvaged WAL is reported");
}

/// The replay names each WAL whose damaged header it read past, oldest
/// first, and none whose header was intact (`Stats::wal_headers_salvaged`).
#[test]
fn the_replay_names_each_wal_whose_damaged_header_it_read_past() {
    let h = &torn_seal_headers()[0];
    let older = [&h[..], &body(Some(SALT), 1..=5)].concat();
    let middle = [&header::encode(true, 7)[..], &body(Some(7), 6..=8)].concat();
    // Ends in its close marker: a WAL half of whose header is the closed
    // one did (`header::torn_from_closed`; without it, a lost end).
    let marker = salted(Some(SALT), WriteBatch::new().encode(11));
    let newest = [&h[..], &body(Some(SALT), 9..=10), &marker].concat();
    let logs = super::tests::logs(vec![older, middle, newest]);
    let got = replay_logs(&logs, PIT, SALTED, &MemTable::new(0)).unwrap();
    assert_eq!(got.last, Some(10));
    assert_eq!(got.cut, None);
    assert_eq!(
        got.salvaged,
        vec![logs[0].path.clone(), logs[2].path.clone()]
    );
    let intact = [&header::encode(true, SALT)[..], &body(Some(SALT), 1..=5)].concat();
    let got = replay_logs(
        &super::tests::logs(vec![intact]),
        PIT,
        SALTED,
        &MemTable::new(0),
    );
    assert!(got.unwrap().salvaged.is_empty());
}

/// A damaged header whose salt is not its records' (a bit flipped in the
/// salt), or records of another WAL (another salt) or of version 2 (no
/// salt) after a torn header: nothing verifies, nothing is replayed.
#[test]
fn records_under_another_salt_are_not_replayed_after_a_damaged_header() {
    for bit in 96..160 {
        let mut image = [&torn_seal_headers()[0][..], &body(Some(SALT), 1..=5)].concat();
        image[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(replay(vec![image.clone()], PIT, SALTED).unwrap(), None);
        let (_, offset, reason) = wal_damage(replay(vec![image], TORN, SALTED));
        assert_eq!((offset, reason), (0, WalDamage::DamagedHeader), "bit {bit}");
    }
    for other in [None, Some(SALT ^ 1), Some(7)] {
        let image = [&torn_seal_headers()[0][..], &body(other, 1..=5)].concat();
        assert_eq!(replay(vec![image], PIT, SALTED).unwrap(), None, "{other:?}");
    }
}

/// A version 2 WAL is never rewritten by this build: its damaged header
/// still replays nothing at a point in time, as before.
#[test]
fn a_damaged_version_2_header_still_replays_nothing() {
    let mut image = header::encode_v2(true).to_vec();
    image[10] ^= 2;
    image.extend(body(None, 1..=5));
    assert_eq!(replay(vec![image], PIT, SALTED).unwrap(), None);
}

/// In a store whose WALs are all of version 3 a file without the magic is
/// a damaged header (`wal::format_of`), read at a point in time as any
/// other: a flipped magic bit, the salt intact, replays every write; in
/// an older store the file is of version 1, read from byte 0 as before.
#[test]
fn a_flipped_magic_in_a_salted_store_replays_every_write_at_a_point_in_time() {
    for bit in 0..64 {
        let mut image = [&header::encode(true, SALT)[..], &body(Some(SALT), 1..=5)].concat();
        image[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(replay(vec![image.clone()], PIT, SALTED).unwrap(), Some(5));
        let (_, offset, reason) = wal_damage(replay(vec![image.clone()], TORN, SALTED));
        assert_eq!((offset, reason), (0, WalDamage::DamagedHeader), "bit {bit}");
        assert_eq!(replay(vec![image], PIT, super::tests::FRESH).unwrap(), None);
    }
}
