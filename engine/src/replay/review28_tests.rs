//! Review of the salvage's report (`Replayed::salvaged`, review28): a
//! point-in-time replay of a WAL whose header a clean close's rewrite
//! tore must report what the same WAL with either of its headers intact
//! would: the same writes, the same cut, and the WALs it read past,
//! oldest first, each once, none it never reached.

use super::tests::{PIT, SALTED, batch, logs, salted};
use super::*;
use crate::wal::header::{self, HEADER_LEN};

const SALT: u64 = 0x0123_4567_89ab_cdef;

/// Version 3 records of one-op writes `seqs` under `salt`.
fn body(salt: u64, seqs: std::ops::RangeInclusive<u64>) -> Vec<u8> {
    seqs.flat_map(|s| salted(Some(salt), &batch(s, 1, 5)))
        .collect()
}

fn marker(salt: u64, seq: u64) -> Vec<u8> {
    salted(Some(salt), WriteBatch::new().encode(seq))
}

/// `old` with the bytes `range` of `new`: a header rewrite torn inside
/// its sector.
fn torn(old: [u8; HEADER_LEN], new: [u8; HEADER_LEN], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = old.to_vec();
    out[range.clone()].copy_from_slice(&new[range]);
    assert_eq!(header::decode(&out), WalFormat::DamagedHeader);
    out
}

/// The rewrites a clean close makes on the WAL it appended its close
/// marker to (synced or not, to closed: `seal.rs`), torn either way: the
/// new flags over the old checksum, or the old flags under the new one.
fn torn_closing_headers() -> Vec<Vec<u8>> {
    let closed = header::encode_closed(SALT);
    let mut out = Vec::new();
    for old in [header::encode(true, SALT), header::encode(false, SALT)] {
        for range in [10..12, 20..24] {
            out.push(torn(old, closed, range));
        }
    }
    out
}

/// A cleanly closed WAL (writes 1..=5, then its close marker) whose last
/// record or records a device lost at a record boundary, and whose
/// header's closing rewrite tore: the writes lost with the marker are a
/// lost end, which `PointInTime` reports for the intact closed header
/// (`Stats::wal_replay_cut` at the WAL's end, 0 bytes:
/// `closed_flag_crash_attack::point_in_time_reports_the_lost_end_of_a_closed_wal`).
/// The salvage must report it too: the marker was fsynced before the
/// header was rewritten (`wal/seal.rs`), so a WAL whose torn header is
/// half the closed one ended in a marker. Failed before the fix: the
/// salvage replayed writes 1..=4 with no cut (the closed promise was not
/// read), the last write dropped silently.
#[test]
fn a_salvaged_closed_wal_that_lost_its_end_reports_the_cut() {
    let records = body(SALT, 1..=5);
    let last_write = body(SALT, 1..=4).len();
    for end in [records.len(), last_write] {
        let intact = [&header::encode_closed(SALT)[..], &records[..end]].concat();
        let want = replay_logs(&logs(vec![intact.clone()]), PIT, SALTED, &MemTable::new(0));
        let want = want.unwrap();
        let lost_end = Some(WalCut {
            path: PathBuf::from("000001.wal"),
            offset: intact.len() as u64,
            bytes_not_replayed: 0,
            cause: WalCutCause::PointInTime,
        });
        assert_eq!(want.cut, lost_end, "intact, {end}");
        for h in torn_closing_headers() {
            let image = [&h[..], &records[..end]].concat();
            let got = replay_logs(&logs(vec![image]), PIT, SALTED, &MemTable::new(0)).unwrap();
            assert_eq!(got.last, want.last, "{h:?} {end}");
            assert_eq!(got.cut, want.cut, "{h:?} {end}: a lost end not reported");
            assert_eq!(got.salvaged, vec![PathBuf::from("000001.wal")]);
        }
    }
}

/// The same WAL with its marker: no cut, whichever half of the closed
/// header survived; and a rewrite that never says closed (an older WAL's
/// seal, unsynced to synced) promises no marker, so its end cut at a
/// record boundary is no cut, as under either intact header.
#[test]
fn a_salvaged_wal_reports_a_lost_end_only_where_a_half_says_closed() {
    let whole = [&body(SALT, 1..=5)[..], &marker(SALT, 6)].concat();
    for h in torn_closing_headers() {
        let image = [&h[..], &whole].concat();
        let got = replay_logs(&logs(vec![image]), PIT, SALTED, &MemTable::new(0)).unwrap();
        assert_eq!((got.last, got.cut), (Some(5), None), "{h:?}");
    }
    let old = header::encode(false, SALT);
    let new = header::encode(true, SALT);
    for range in [10..12, 20..24] {
        let image = [&torn(old, new, range)[..], &body(SALT, 1..=4)].concat();
        let got = replay_logs(&logs(vec![image]), PIT, SALTED, &MemTable::new(0)).unwrap();
        assert_eq!((got.last, got.cut), (Some(4), None));
    }
}

/// The list names only WALs the replay read past, oldest first, each
/// once: a torn-header WAL behind a cut in an older one is never reached
/// (nothing of it replayed), so it is not named; when the cut is in the
/// salvaged WAL itself, it is named and the cut is in it.
#[test]
fn only_wals_the_replay_reached_are_named() {
    let newer_salt = 0x7777_0000_1234_5678;
    let h = |salt| {
        torn(
            header::encode(true, salt),
            header::encode_closed(salt),
            10..12,
        )
    };
    let mut damaged_mid = [&header::encode(true, SALT)[..], &body(SALT, 1..=5)].concat();
    let third = HEADER_LEN + body(SALT, 1..=2).len();
    damaged_mid[third + 13] ^= 1;
    let newer = [
        &h(newer_salt)[..],
        &body(newer_salt, 6..=8),
        &marker(newer_salt, 9),
    ]
    .concat();
    let got = replay_logs(
        &logs(vec![damaged_mid.clone(), newer.clone()]),
        PIT,
        SALTED,
        &MemTable::new(0),
    )
    .unwrap();
    assert_eq!(got.last, Some(2));
    assert_eq!(got.cut.map(|c| c.offset), Some(third as u64));
    assert!(got.salvaged.is_empty(), "{:?}", got.salvaged);
    // The older one salvaged too, cut in the middle: it alone is named.
    let mut older = damaged_mid;
    older[..HEADER_LEN].copy_from_slice(&h(SALT));
    let got = replay_logs(&logs(vec![older, newer]), PIT, SALTED, &MemTable::new(0)).unwrap();
    assert_eq!(got.last, Some(2));
    assert_eq!(got.salvaged, vec![PathBuf::from("000001.wal")]);
}

/// The closing rewrite torn at any byte, not only between the flags and
/// the checksum: the device kept the new bytes before byte `j` and the
/// old ones from it, or the other way round. A tear inside the checksum
/// field (the old flags, then a checksum of new and old bytes) holds
/// neither whole half of the closed header, and the salvage reported no
/// cut for the lost end (failed before for `j` in 21..24, new bytes
/// last). Each such header is still the close's rewrite reaching the
/// device, which comes only after the marker's fsync.
#[test]
fn a_closing_rewrite_torn_at_any_byte_reports_the_lost_end() {
    let closed = header::encode_closed(SALT);
    let records = body(SALT, 1..=5);
    let intact = [&closed[..], &records[..]].concat();
    let want = replay_logs(&logs(vec![intact]), PIT, SALTED, &MemTable::new(0)).unwrap();
    assert!(want.cut.is_some());
    let mut checked = 0;
    for old in [header::encode(true, SALT), header::encode(false, SALT)] {
        for j in 1..HEADER_LEN {
            for range in [0..j, j..HEADER_LEN] {
                let mut h = old.to_vec();
                h[range.clone()].copy_from_slice(&closed[range.clone()]);
                if header::decode(&h) != WalFormat::DamagedHeader {
                    continue;
                }
                checked += 1;
                let image = [&h[..], &records[..]].concat();
                let got = replay_logs(&logs(vec![image]), PIT, SALTED, &MemTable::new(0)).unwrap();
                assert_eq!(got.last, want.last, "{range:?} of {old:?}");
                assert_eq!(
                    got.cut, want.cut,
                    "{range:?} of {old:?}: a lost end not reported"
                );
            }
        }
    }
    assert!(checked >= 2 * 10, "only {checked} torn headers");
}

/// A rewrite that never says closed (an older WAL's seal, unsynced to
/// synced) torn at any byte promises no marker: its end cut at a record
/// boundary is no cut.
#[test]
fn a_sealing_rewrite_torn_at_any_byte_reports_no_lost_end() {
    let old = header::encode(false, SALT);
    let new = header::encode(true, SALT);
    let records = body(SALT, 1..=4);
    for j in 1..HEADER_LEN {
        for range in [0..j, j..HEADER_LEN] {
            let mut h = old.to_vec();
            h[range.clone()].copy_from_slice(&new[range.clone()]);
            if header::decode(&h) != WalFormat::DamagedHeader {
                continue;
            }
            let image = [&h[..], &records[..]].concat();
            let got = replay_logs(&logs(vec![image]), PIT, SALTED, &MemTable::new(0)).unwrap();
            assert_eq!((got.last, got.cut), (Some(4), None), "{range:?}");
        }
    }
}

/// What claims "closed" besides a closing rewrite (review rev29b): no
/// torn unsynced-to-synced seal rewrite, for any salt, and of the one-bit
/// flips of an open header outside its salt (a flipped salt bit replays
/// nothing; a flipped magic bit matches neither header) exactly two, both of a synced header: its flags read closed
/// (bit 81), or its checksum's last byte the closed one's (bit 186, a
/// byte tear's match). CRC-32 is affine, so which bytes of the open and
/// closed headers' checksums agree is the same for every salt; such a
/// claim costs a reported lost end of 0 bytes where none was lost, never
/// a write (`Closed` changes only the newest WAL's cut at a point in
/// time, `replay_logs`).
#[test]
fn only_a_closing_rewrite_or_two_bit_flips_claim_closed_for_any_salt() {
    for s in 0..256u64 {
        let salt = s.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ SALT;
        let (unsynced, synced) = (header::encode(false, salt), header::encode(true, salt));
        for j in 1..HEADER_LEN {
            for range in [0..j, j..HEADER_LEN] {
                let mut h = unsynced.to_vec();
                h[range.clone()].copy_from_slice(&synced[range.clone()]);
                assert!(
                    !header::torn_from_closed(&h, salt),
                    "salt {salt:#x}, {range:?}"
                );
            }
        }
        let mut claims = Vec::new();
        for good in [unsynced, synced] {
            for bit in (0..96).chain(160..HEADER_LEN * 8) {
                let mut h = good.to_vec();
                h[bit / 8] ^= 1 << (bit % 8);
                if header::torn_from_closed(&h, salt) {
                    claims.push((good == synced, bit));
                }
            }
        }
        assert_eq!(claims, [(true, 81), (true, 186)], "salt {salt:#x}");
    }
}
