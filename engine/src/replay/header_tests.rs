//! What a WAL's header promised decides how recovery reads damage followed
//! by intact records: in a WAL whose writer fsynced each record before the
//! next it is corruption (refused, as in a version 1 WAL); in one whose
//! writer never fsynced it is what a power loss leaves when pages reach the
//! disk out of order, and the log ends at the damage.

use super::tests::{FRESH, PIT, TORN, batch, record, replay, wal_damage, wal_of};
use super::*;
use crate::wal::header::{self, V2_HEADER_LEN};
use crate::wal_cut::WalCutCause;

/// A version 2 WAL of one-op batches at `seqs`.
fn headed(synced: bool, seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let mut out = header::encode_v2(synced).to_vec();
    out.extend(wal_of(seqs));
    out
}

/// Where each record of `headed(_, 1..=n)` starts, and the end of the last.
fn record_starts(n: u64) -> Vec<usize> {
    (0..=n)
        .map(|k| V2_HEADER_LEN + wal_of(1..=k).len())
        .collect()
}

/// A page of the file: what a power loss keeps or loses whole.
const PAGE: usize = 4096;

/// A first record of a synced WAL sized so that the record after it has
/// its length field start two bytes before a page (and sector) boundary.
fn first_record_ending_two_bytes_before_a_page() -> Vec<u8> {
    (1..PAGE)
        .map(|v| record(&batch(1, 1, v)))
        .find(|r| (V2_HEADER_LEN + r.len()) % PAGE == PAGE - 2)
        .expect("a first record ending two bytes before a page")
}

/// `bytes` with `range` zeroed: a page the power loss never wrote.
fn zeroed(bytes: &[u8], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[range].fill(0);
    out
}

#[test]
fn a_lost_record_of_an_unsynced_wal_ends_the_log_there() {
    let n = 6;
    let starts = record_starts(n);
    for lost in 1..n as usize {
        let range = starts[lost - 1]..starts[lost];
        let unsynced = zeroed(&headed(false, 1..=n), range.clone());
        let kept = (lost > 1).then_some(lost as u64 - 1);
        assert_eq!(replay(vec![unsynced.clone()], TORN, FRESH).unwrap(), kept);
        assert_eq!(replay(vec![unsynced], PIT, FRESH).unwrap(), kept);
        // The same loss where each record was fsynced before the next
        // cannot come from a crash.
        let synced = zeroed(&headed(true, 1..=n), range.clone());
        let (_, offset, reason) = wal_damage(replay(vec![synced.clone()], TORN, FRESH));
        assert_eq!(
            (offset, reason),
            (range.start as u64, WalDamage::BeforeIntact),
            "lost record {lost}"
        );
        assert_eq!(replay(vec![synced], PIT, FRESH).unwrap(), kept);
    }
}

#[test]
fn in_an_unsynced_wal_any_damage_ends_the_log_at_the_damaged_record() {
    // A flipped bit cannot be told from a lost page there; the writes
    // after it were never promised to survive a power loss, and what is
    // recovered stays a prefix of the writes.
    let n = 4;
    let starts = record_starts(n);
    let bytes = headed(false, 1..=n);
    for at in starts[0]..starts[n as usize - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let record = starts.iter().rposition(|&s| s <= at).unwrap_or(0);
        let kept = (record > 0).then_some(record as u64);
        assert_eq!(
            replay(vec![damaged], TORN, FRESH).unwrap(),
            kept,
            "byte {at}"
        );
    }
}

#[test]
fn a_lost_tail_of_an_older_unsynced_wal_ends_the_log_there() {
    let older = headed(false, 1..=3);
    let starts = record_starts(3);
    let lost_last = zeroed(&older, starts[2]..starts[3]);
    let header_only = older[..V2_HEADER_LEN].to_vec();
    for (older, kept) in [(lost_last, Some(2)), (header_only, None)] {
        let newer = headed(false, 4..=5);
        assert_eq!(replay(vec![older, newer], TORN, FRESH).unwrap(), kept);
    }
    // Synced, the older WAL was fsynced before the newer one's first record.
    let older = headed(true, 1..=3);
    let lost_last = zeroed(&older, starts[2]..starts[3]);
    let header_only = older[..V2_HEADER_LEN].to_vec();
    for (older, at) in [(lost_last, starts[2]), (header_only, V2_HEADER_LEN)] {
        let newer = headed(true, 4..=5);
        let (path, offset, reason) = wal_damage(replay(vec![older, newer], TORN, FRESH));
        assert_eq!((path.as_str(), offset), ("000001.wal", at as u64));
        assert!(
            matches!(reason, WalDamage::BeforeNewerWal { .. }),
            "{reason:?}"
        );
    }
}

#[test]
fn a_damaged_header_before_intact_records_is_corruption() {
    const SALT: u64 = 0x5a17_0000_0000_0026;
    let v3 = |synced| {
        let mut out = header::encode(synced, SALT).to_vec();
        for s in 1..=3 {
            out.extend(super::tests::salted(Some(SALT), &batch(s, 1, 5)));
        }
        out
    };
    for synced in [false, true] {
        // Version 2 and version 3 (salted) WALs.
        for bytes in [headed(synced, 1..=3), v3(synced)] {
            let header_len = header::format_of_len(&bytes);
            // Any bit of the header: a flipped magic makes a version 1
            // file whose first "record" is the header, with records of
            // the log after it (under no salt or the salt where a version
            // 3 header keeps it); a flipped version, flag, salt or
            // checksum a damaged header with bytes after it. Neither
            // relaxes recovery.
            for bit in 0..header_len * 8 {
                let mut damaged = bytes.clone();
                damaged[bit / 8] ^= 1 << (bit % 8);
                let (_, offset, reason) = wal_damage(replay(vec![damaged.clone()], TORN, FRESH));
                let want = if bit < 64 {
                    WalDamage::BeforeIntact
                } else {
                    WalDamage::DamagedHeader
                };
                assert_eq!(
                    (offset, reason),
                    (0, want),
                    "synced {synced}, {header_len}-byte header, bit {bit}"
                );
                // At a point in time a version 3 file whose magic and
                // salt survived is read under that salt, every record
                // (`wal::salvaged_records`); any other damage cuts at 0.
                let salt_kept = header_len == header::HEADER_LEN
                    && !(0..64).contains(&bit)
                    && !(96..160).contains(&bit);
                assert_eq!(
                    replay(vec![damaged], PIT, FRESH).unwrap(),
                    salt_kept.then_some(3),
                    "synced {synced}, {header_len}-byte header, bit {bit}"
                );
            }
        }
    }
}

#[test]
fn every_cut_of_a_headed_wal_is_a_torn_tail() {
    for synced in [false, true] {
        let bytes = headed(synced, 1..=3);
        let starts = record_starts(3);
        for cut in 0..bytes.len() {
            let whole = starts[1..].iter().filter(|&&e| e <= cut).count() as u64;
            let want = (whole > 0).then_some(whole);
            let wals = vec![bytes[..cut].to_vec()];
            assert_eq!(
                replay(wals, TORN, FRESH).unwrap(),
                want,
                "synced {synced}, cut {cut}"
            );
        }
    }
}

#[test]
fn version_1_and_version_2_wals_replay_the_same_batches() {
    let payloads: Vec<Vec<u8>> = (1..=3).map(|s| batch(s * 2 - 1, 2, 30)).collect();
    let unheaded: Vec<u8> = payloads.iter().flat_map(|p| record(p)).collect();
    for wal in [
        unheaded.clone(),
        [&header::encode_v2(false)[..], &unheaded].concat(),
    ] {
        let mem = MemTable::new(0);
        let logs = [WalBytes {
            path: PathBuf::from("000001.wal"),
            bytes: wal,
        }];
        assert_eq!(replay_logs(&logs, TORN, FRESH, &mem).unwrap().last, Some(6));
        assert_eq!(mem.len(), 6);
    }
}

/// Zeroes each 4 KiB page of a WAL of large records in turn (a page a
/// device or file system lost): in a synced WAL that is refused whenever
/// a record of the log starts after the page, even when the page took the
/// end of a record whose header survived and its successor's header; in
/// an unsynced one the log ends at the first damaged record.
#[test]
fn a_lost_page_in_the_middle_of_a_wal_is_refused_only_when_synced() {
    let n = 12u64;
    let payloads: Vec<Vec<u8>> = (1..=n).map(|s| batch(s, 1, 1500)).collect();
    let records: Vec<u8> = payloads.iter().flat_map(|p| record(p)).collect();
    let mut starts = vec![V2_HEADER_LEN];
    for p in &payloads {
        starts.push(starts.last().unwrap() + 8 + p.len());
    }
    let mut refused = 0;
    for synced in [false, true] {
        let bytes = [&header::encode_v2(synced)[..], &records].concat();
        for page in 0..bytes.len().div_ceil(PAGE) {
            let range = (page * PAGE).max(V2_HEADER_LEN)..((page + 1) * PAGE).min(bytes.len());
            let damaged = zeroed(&bytes, range.clone());
            // Records wholly before the page survive; the first one it
            // touches is the damage.
            let kept = starts[1..]
                .iter()
                .filter(|&&end| end <= range.start)
                .count() as u64;
            let kept = (kept > 0).then_some(kept);
            let record_after = starts[..n as usize].iter().any(|&s| s >= range.end);
            let got = replay(vec![damaged], TORN, FRESH);
            if synced && record_after {
                let (_, offset, reason) = wal_damage(got);
                let damaged_record = starts[..n as usize]
                    .iter()
                    .rposition(|&s| s <= range.start)
                    .unwrap_or(0);
                assert_eq!(
                    (offset, reason),
                    (starts[damaged_record] as u64, WalDamage::BeforeIntact),
                    "page {page}"
                );
                refused += 1;
            } else {
                assert_eq!(got.unwrap(), kept, "synced {synced}, page {page}");
            }
        }
    }
    assert!(refused >= 3, "{refused}");
}

#[test]
fn a_newer_wal_skipping_sequences_ends_the_log_only_after_an_unsynced_wal() {
    // The older WAL cut at a record boundary: its write 3 lost whole.
    let newer = |synced| headed(synced, 4..=5);
    let older = |synced| headed(synced, 1..=2);
    assert_eq!(
        replay(vec![older(false), newer(false)], TORN, FRESH).unwrap(),
        Some(2)
    );
    let (path, offset, reason) = wal_damage(replay(vec![older(true), newer(true)], TORN, FRESH));
    assert_eq!(
        (path.as_str(), offset, reason),
        (
            "000002.wal",
            V2_HEADER_LEN as u64,
            WalDamage::Gap {
                expected: 3,
                found: 4
            }
        )
    );
    // Within one WAL no crash skips a record: still refused.
    let skipping = [headed(false, 1..=2), wal_of([4])].concat();
    let (_, _, reason) = wal_damage(replay(vec![skipping], TORN, FRESH));
    assert_eq!(
        reason,
        WalDamage::Gap {
            expected: 3,
            found: 4
        }
    );
}

/// A synced WAL's last append, torn by a power cut before its fsync: its
/// header straddles a page (and sector) boundary, and only the page after
/// the boundary reached the disk (`UnsyncedFate::Pages` leaves exactly
/// this), so the length's low two bytes read as zeros and its sequence and
/// op count are intact. The shortened length frames an end inside the
/// record's own value, which holds a WAL record of another log (an
/// application storing WAL bytes). That record is not the log's: the
/// torn append was the last one, and the store must open without it.
#[test]
fn a_torn_length_of_a_synced_wal_framing_a_record_inside_its_value_is_a_torn_tail() {
    let first = first_record_ending_two_bytes_before_a_page();
    let before = [&header::encode_v2(true)[..], &first].concat();
    let payload_len = 70_000;
    let framed = payload_len & !0xffff; // 65,536: what the torn length says
    let embedded = record(&batch(1_000, 1, 5));
    // Ops of the torn batch start after its header; its value after the
    // op's kind, key length, 3-byte key and value length.
    let value_at = crate::batch::BATCH_HEADER_LEN + 1 + 4 + 3 + 4;
    let mut value: Vec<u8> = (0..payload_len - value_at)
        .map(|i| (i * 131 % 251) as u8)
        .collect();
    value[framed - value_at..framed - value_at + embedded.len()].copy_from_slice(&embedded);
    let mut b = WriteBatch::new();
    b.put(b"big", &value);
    let torn = record(b.encode(2));
    assert_eq!(torn.len(), wal::RECORD_HEADER_LEN + payload_len);
    // The page holding the length's first two bytes never reached the
    // disk; every later page did.
    let at = before.len();
    let image = zeroed(&[before, torn].concat(), at..at + 2);
    assert_eq!(replay(vec![image.clone()], PIT, FRESH).unwrap(), Some(1));
    assert_eq!(replay(vec![image], TORN, FRESH).unwrap(), Some(1));
}

/// The lost-page check still holds where a record's length field straddles
/// a sector boundary intact (its bytes before the boundary not zeros): a
/// page lost in the middle of a synced WAL took that record's end and its
/// successor's header, and an fsynced record lies intact after the page.
#[test]
fn a_lost_page_after_a_straddling_intact_length_of_a_synced_wal_is_refused() {
    let first = first_record_ending_two_bytes_before_a_page();
    let second = record(&batch(2, 1, 6_000));
    let third = record(&batch(3, 1, 3_000));
    let fourth = record(&batch(4, 1, 100));
    let at = V2_HEADER_LEN + first.len();
    let third_at = at + second.len();
    let fourth_at = third_at + third.len();
    // The lost page holds the second record's end and the third's header,
    // and ends before the fourth.
    assert!(2 * PAGE < third_at && third_at + 8 <= 3 * PAGE && 3 * PAGE <= fourth_at);
    assert_ne!(&second[..2], &[0, 0]);
    let bytes = [
        &header::encode_v2(true)[..],
        &first,
        &second,
        &third,
        &fourth,
    ]
    .concat();
    let damaged = zeroed(&bytes, 2 * PAGE..3 * PAGE);
    let (_, offset, reason) = wal_damage(replay(vec![damaged.clone()], TORN, FRESH));
    assert_eq!((offset, reason), (at as u64, WalDamage::BeforeIntact));
    assert_eq!(replay(vec![damaged], PIT, FRESH).unwrap(), Some(1));
}

#[test]
fn a_replay_ending_early_says_where_and_why() {
    use super::tests::replay_cut;
    let n = 4;
    let starts = record_starts(n);
    let whole = headed(false, 1..=n);
    assert_eq!(replay_cut(vec![whole.clone()], TORN), None);
    // A lost record of an unsynced WAL: the rest of the file is dropped.
    let lost = zeroed(&whole, starts[1]..starts[2]);
    let cut = replay_cut(vec![lost.clone()], TORN).unwrap();
    assert_eq!(
        (
            cut.path.to_str(),
            cut.offset,
            cut.bytes_not_replayed,
            cut.cause
        ),
        (
            Some("000001.wal"),
            starts[1] as u64,
            (whole.len() - starts[1]) as u64,
            WalCutCause::UnsyncedWal
        )
    );
    assert_eq!(
        replay_cut(vec![lost], PIT).unwrap().cause,
        WalCutCause::PointInTime
    );
    // A torn last record of a synced WAL, and the newer WAL's records.
    let synced = headed(true, 1..=n);
    let torn = synced[..synced.len() - 3].to_vec();
    let cut = replay_cut(vec![torn], TORN).unwrap();
    assert_eq!(
        (cut.offset, cut.bytes_not_replayed, cut.cause),
        (
            starts[3] as u64,
            (starts[4] - starts[3] - 3) as u64,
            WalCutCause::TornTail
        )
    );
    // A newer WAL skipping sequences after an unsynced one: all of it.
    let newer = headed(false, 4..=5);
    let cut = replay_cut(vec![headed(false, 1..=2), newer.clone()], TORN).unwrap();
    assert_eq!(
        (
            cut.path.to_str(),
            cut.offset,
            cut.bytes_not_replayed,
            cut.cause
        ),
        (
            Some("000002.wal"),
            V2_HEADER_LEN as u64,
            (newer.len() - V2_HEADER_LEN) as u64,
            WalCutCause::UnsyncedWal
        )
    );
    // Damage in an older unsynced WAL: its rest and the newer WAL's records.
    let older = zeroed(&headed(false, 1..=3), starts[2]..starts[3]);
    let cut = replay_cut(vec![older.clone(), headed(false, 4..=5)], TORN).unwrap();
    assert_eq!(
        cut.bytes_not_replayed,
        (older.len() - starts[2] + newer.len() - V2_HEADER_LEN) as u64
    );
}

#[test]
fn empty_wals_replayed_whole_are_no_cut() {
    use super::tests::replay_cut;
    for synced in [false, true] {
        let empty = || headed(synced, 1..1);
        assert_eq!(replay_cut(vec![empty(), empty()], TORN), None);
        assert_eq!(
            replay_cut(vec![headed(synced, 1..=2), empty(), empty()], TORN),
            None
        );
        assert_eq!(replay_cut(vec![empty(), empty()], PIT), None);
        // A version 1 WAL created but never written (0 bytes).
        assert_eq!(replay_cut(vec![Vec::new(), empty()], TORN), None);
    }
}

/// A power loss while a new WAL's header was being written leaves a prefix
/// of it (the header is fsynced before any record is appended, so no
/// record can have followed): no write was lost, so there is no cut, in
/// the newest WAL alone or after an older one replayed whole.
#[test]
fn a_torn_header_of_the_newest_wal_is_no_cut() {
    use super::tests::replay_cut;
    for synced in [false, true] {
        for len in 1..V2_HEADER_LEN {
            let torn = header::encode_v2(synced)[..len].to_vec();
            for mode in [TORN, PIT] {
                assert_eq!(
                    replay_cut(vec![torn.clone()], mode),
                    None,
                    "synced {synced}, {len} bytes, {mode:?}"
                );
                assert_eq!(
                    replay_cut(vec![headed(synced, 1..=3), torn.clone()], mode),
                    None,
                    "synced {synced}, {len} bytes after a whole WAL, {mode:?}"
                );
            }
        }
    }
    // Bytes that are not a header's prefix are still what they were: a
    // torn tail of a version 1 WAL, reported.
    let cut = replay_cut(vec![b"bloomWAX".to_vec()], TORN).unwrap();
    assert_eq!((cut.offset, cut.bytes_not_replayed), (0, 8));
}
