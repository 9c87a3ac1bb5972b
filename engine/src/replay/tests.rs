//! Recovery's decisions across WALs: torn tails tolerated, holes refused,
//! on hand-made logs shaped as crashes and power cuts leave them.

use proptest::prelude::*;

use super::*;
use crate::damage::Damage;

pub(super) fn batch(seq: u64, ops: usize, value_len: usize) -> Vec<u8> {
    let mut b = WriteBatch::new();
    for i in 0..ops {
        b.put(
            &[b'k', i as u8, seq as u8],
            &random_bytes(value_len, seq + i as u64),
        );
    }
    b.encode(seq).to_vec()
}

/// A record of `payload` as versions 1 and 2 write it (no salt).
pub(super) fn record(payload: &[u8]) -> Vec<u8> {
    salted(None, payload)
}

/// A record of `payload` checksummed under `salt` (`None`: versions 1
/// and 2).
pub(super) fn salted(salt: Option<u64>, payload: &[u8]) -> Vec<u8> {
    crate::wal::record_bytes(salt, payload)
}

/// A WAL of one-op batches at sequences `seqs`.
pub(super) fn wal_of(seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
    seqs.into_iter()
        .flat_map(|s| record(&batch(s, 1, 5)))
        .collect()
}

fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub(super) fn logs(wals: Vec<Vec<u8>>) -> Vec<WalBytes> {
    wals.into_iter()
        .enumerate()
        .map(|(i, bytes)| WalBytes {
            path: PathBuf::from(format!("{:06}.wal", i + 1)),
            bytes,
        })
        .collect()
}

pub(super) const FRESH: LogStart = LogStart {
    lowest: 1,
    highest: 1,
    acknowledged: 0,
    salted: false,
};

/// `FRESH` in a store whose WALs are all of version 3 (a new store, or
/// one of store format version 6 or more).
pub(super) const SALTED: LogStart = LogStart {
    salted: true,
    ..FRESH
};

/// What replay makes of `wals`: the last sequence, or the WAL damage.
pub(super) fn replay(
    wals: Vec<Vec<u8>>,
    mode: WalRecovery,
    start: LogStart,
) -> Result<Option<u64>> {
    replay_logs(&logs(wals), mode, start, &MemTable::new(0)).map(|r| r.last)
}

/// Where replay of `wals` ended before their end, and why.
pub(super) fn replay_cut(wals: Vec<Vec<u8>>, mode: WalRecovery) -> Option<WalCut> {
    replay_logs(&logs(wals), mode, FRESH, &MemTable::new(0))
        .unwrap()
        .cut
}

pub(super) fn wal_damage(r: Result<Option<u64>>) -> (String, u64, WalDamage) {
    match r {
        Err(Error::Corruption {
            path,
            offset,
            reason: Damage::Wal(reason),
        }) => (path.display().to_string(), offset, reason),
        other => panic!("expected WAL damage, got {other:?}"),
    }
}

pub(super) const TORN: WalRecovery = WalRecovery::TolerateTornTail;
pub(super) const PIT: WalRecovery = WalRecovery::PointInTime;

#[test]
fn every_cut_of_one_wal_is_a_torn_tail() {
    let bytes = wal_of(1..=3);
    let ends: Vec<usize> = (1..=3).map(|n| wal_of(1..=n).len()).collect();
    for cut in 0..bytes.len() {
        let whole = ends.iter().filter(|&&e| e <= cut).count() as u64;
        let want = (whole > 0).then_some(whole);
        assert_eq!(
            replay(vec![bytes[..cut].to_vec()], TORN, FRESH).unwrap(),
            want
        );
        assert_eq!(
            replay(vec![bytes[..cut].to_vec()], PIT, FRESH).unwrap(),
            want
        );
    }
}

#[test]
fn damage_before_a_record_of_the_log_is_corruption_in_torn_tail_mode() {
    let bytes = wal_of(1..=3);
    for flip in [2, 5, 9, 15, 20] {
        let mut damaged = bytes.clone();
        damaged[flip] ^= 1; // inside the first record
        let (_, offset, reason) = wal_damage(replay(vec![damaged.clone()], TORN, FRESH));
        assert_eq!(
            (offset, reason),
            (0, WalDamage::BeforeIntact),
            "flip {flip}"
        );
        assert_eq!(replay(vec![damaged], PIT, FRESH).unwrap(), None);
    }
}

#[test]
fn any_bit_flipped_in_a_record_before_intact_ones_is_corruption() {
    // The bytes a torn record's successor is read from (its batch header's
    // op count) are not checksummed either: a flip there must not make the
    // intact records after it look like the end of the log.
    let triple = |seq| record(&batch(seq, 3, 20));
    let middle = [triple(1), triple(4), triple(7)];
    let older_last = [wal_of([1]), wal_of([2])].concat();
    // (WALs, which WAL is damaged, the damaged record's range, whether
    // the record after it is in a newer WAL)
    let cases = [
        (vec![wal_of(1..=3)], 0, 0..wal_of([1]).len(), false),
        (
            vec![middle.concat()],
            0,
            middle[0].len()..middle[0].len() + middle[1].len(),
            false,
        ),
        (
            vec![older_last.clone(), wal_of([3])],
            0,
            wal_of([1]).len()..older_last.len(),
            true,
        ),
    ];
    let mut missed = Vec::new();
    for (case, (wals, damaged_wal, range, newer)) in cases.into_iter().enumerate() {
        for at in range.clone() {
            for bit in 0..8 {
                let mut damaged = wals.clone();
                damaged[damaged_wal][at] ^= 1 << bit;
                let got = replay(damaged, TORN, FRESH);
                let refused = match &got {
                    Err(Error::Corruption {
                        offset,
                        reason: Damage::Wal(reason),
                        ..
                    }) => {
                        *offset == range.start as u64
                            && if newer {
                                matches!(reason, WalDamage::BeforeNewerWal { .. })
                            } else {
                                *reason == WalDamage::BeforeIntact
                            }
                    }
                    _ => false,
                };
                if !refused {
                    missed.push(format!("case {case} byte {at} bit {bit}: {got:?}"));
                }
            }
        }
    }
    assert!(missed.is_empty(), "not refused:\n{}", missed.join("\n"));
}

#[test]
fn a_torn_length_field_framing_a_record_inside_its_own_value_is_a_torn_tail() {
    // The last append's header straddles a sector boundary and a power cut
    // persists the sector after it but not the one before: the length's
    // low two bytes read as zeros, while the sequence and op count (past
    // the boundary) are intact. The shortened length frames an end inside
    // the record's own value, which holds a WAL record of another log (an
    // application storing WAL bytes): a sequence the log could hold, but
    // not the torn record's successor. It is not a record of the log.
    let before = wal_of([1]);
    let payload_len = 70_000;
    let framed = payload_len & !0xffff; // 65,536: what the torn length says
    let embedded = record(&batch(1_000, 1, 5));
    // Ops of the torn batch start after its header; its value after the
    // op's kind, key length, 3-byte key and value length.
    let value_at = crate::batch::BATCH_HEADER_LEN + 1 + 4 + 3 + 4;
    let mut value = random_bytes(payload_len - value_at, 7);
    value[framed - value_at..framed - value_at + embedded.len()].copy_from_slice(&embedded);
    let mut b = WriteBatch::new();
    b.put(b"big", &value);
    let torn = record(b.encode(2));
    assert_eq!(torn.len(), wal::RECORD_HEADER_LEN + payload_len);
    let mut image = [before.clone(), torn].concat();
    image[before.len()] = 0;
    image[before.len() + 1] = 0;
    // The power cut ends the file past the framed end, inside the value.
    image.truncate(before.len() + wal::RECORD_HEADER_LEN + framed + embedded.len() + 100);
    assert_eq!(replay(vec![image.clone()], TORN, FRESH).unwrap(), Some(1));
    assert_eq!(replay(vec![image], PIT, FRESH).unwrap(), Some(1));
}

#[test]
fn a_large_record_torn_anywhere_is_a_torn_tail() {
    // Random payload bytes hold plausible record lengths at about one
    // offset in 4G/len; checksumming each would exhaust any linear budget
    // (review finding 1). The sequence filter skips them.
    let mut bytes = wal_of([1]);
    let big = record(&batch(2, 1, 4 << 20));
    let keep = bytes.len();
    bytes.extend_from_slice(&big);
    for cut in [
        keep + 3,
        keep + 20,
        keep + (1 << 20),
        keep + (2 << 20),
        bytes.len() - 1,
    ] {
        assert_eq!(
            replay(vec![bytes[..cut].to_vec()], TORN, FRESH).unwrap(),
            Some(1),
            "{cut}"
        );
    }
}

#[test]
fn a_record_inside_a_torn_value_is_not_the_log() {
    // A value holding WAL-record bytes (review finding 1b), torn after them.
    let mut value = record(&batch(7, 1, 5));
    value.extend_from_slice(&[0; 64]);
    let mut b = WriteBatch::new();
    b.put(b"log", &value);
    let mut bytes = wal_of([1]);
    bytes.extend_from_slice(&record(b.encode(2)));
    let torn = bytes[..bytes.len() - 32].to_vec();
    assert_eq!(replay(vec![torn], TORN, FRESH).unwrap(), Some(1));
    // The record that does follow a torn one (sequence 3) is found.
    let mut more = bytes[..bytes.len() - 32].to_vec();
    more.extend_from_slice(&wal_of([3]));
    let (_, _, reason) = wal_damage(replay(vec![more], TORN, FRESH));
    assert_eq!(reason, WalDamage::BeforeIntact);
}

#[test]
fn damage_in_a_newer_wal_before_an_intact_record_is_found() {
    // The older WAL's tail torn; in the newer one a damaged record, then an
    // intact one (review finding 2).
    let older = wal_of([1, 2]);
    let older = older[..older.len() - 3].to_vec();
    let mut newer = wal_of([3]);
    let last = newer.len() - 1;
    newer[last] ^= 0xff;
    newer.extend_from_slice(&wal_of([4]));
    let (path, _, reason) = wal_damage(replay(vec![older.clone(), newer.clone()], TORN, FRESH));
    assert_eq!(path, "000001.wal");
    assert!(
        matches!(reason, WalDamage::BeforeNewerWal { .. }),
        "{reason}"
    );
    assert_eq!(replay(vec![older, newer], PIT, FRESH).unwrap(), Some(1));
}

#[test]
fn an_emptied_older_wal_is_a_hole() {
    // A power cut emptied the older WAL; the newer one kept its record
    // (review finding 6). Nothing after the hole may come back.
    let wals = || vec![Vec::new(), wal_of([3])];
    let (path, offset, reason) = wal_damage(replay(wals(), TORN, FRESH));
    assert_eq!((path.as_str(), offset), ("000001.wal", 0));
    assert!(
        matches!(reason, WalDamage::BeforeNewerWal { .. }),
        "{reason}"
    );
    assert_eq!(replay(wals(), PIT, FRESH).unwrap(), None);
    // Even where the manifest would admit sequence 3 as the log's start.
    let admits = LogStart {
        lowest: 1,
        highest: 3,
        acknowledged: 2,
        salted: false,
    };
    assert!(replay(wals(), TORN, admits).is_err());
    assert_eq!(replay(wals(), PIT, admits).unwrap(), None);
    // Empty WALs with nothing after them are fine (a crash while opening).
    assert_eq!(
        replay(vec![Vec::new(), Vec::new()], TORN, FRESH).unwrap(),
        None
    );
}

#[test]
fn the_log_must_start_where_the_tables_and_manifest_say() {
    // Tables hold sequences up to 6, the manifest's last sequence is 9.
    let start = LogStart {
        lowest: 7,
        highest: 10,
        acknowledged: 9,
        salted: false,
    };
    for first in 7..=10 {
        assert_eq!(
            replay(vec![wal_of([first])], TORN, start).unwrap(),
            Some(first)
        );
    }
    for first in [1, 2, 6, 11, 50] {
        let (_, offset, reason) = wal_damage(replay(vec![wal_of([first])], TORN, start));
        assert_eq!(offset, 0);
        assert_eq!(
            reason,
            WalDamage::StartOutOfRange {
                first,
                lowest: 7,
                highest: 10
            }
        );
        assert_eq!(replay(vec![wal_of([first])], PIT, start).unwrap(), None);
    }
}

#[test]
fn crafted_sequences_are_damage() {
    let any = LogStart::ANY;
    let cases = [
        (wal_of([0]), WalDamage::ZeroSequence),
        (
            wal_of([MAX_SEQUENCE + 1]),
            WalDamage::PastLargest {
                first: MAX_SEQUENCE + 1,
                count: 1,
            },
        ),
        (
            wal_of([5, 7]),
            WalDamage::Gap {
                expected: 6,
                found: 7,
            },
        ),
    ];
    for (bytes, want) in cases {
        let (_, _, reason) = wal_damage(replay(vec![bytes.clone()], TORN, any));
        assert_eq!(reason, want);
        assert!(replay(vec![bytes], PIT, any).is_ok());
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        a in proptest::collection::vec(any::<u8>(), 0..300),
        b in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        for mode in [TORN, PIT] {
            let _ = replay(vec![a.clone()], mode, LogStart::ANY);
            let _ = replay(vec![a.clone(), b.clone()], mode, FRESH);
        }
    }
}

/// `fuzzing::resealed::reseal_wal` makes clean logs of every header
/// kind, in one WAL or several, that replay whole (so the property test
/// below checks the clean-log promise on more than empty logs).
#[test]
fn resealed_clean_logs_replay_whole() {
    use crate::fuzzing::resealed::{exercise_wal, reseal_wal};
    for ctl in [0u8, 1, 2, 3, 0x40, 0x81, 0xc2, 0xc3] {
        let mut data = vec![ctl, 9];
        for i in 0..12u8 {
            // A batch of 1 + i % 3 ops, every fourth one to the next WAL.
            data.push((1 + i % 3) | if i % 4 == 3 { 0x40 } else { 0 });
            for j in 0..1 + i % 3 {
                // A delete (kind 0) of "k" i, or a put (kind 1) of "val".
                data.extend_from_slice(&[j & 1, 2, b'k', i]);
                if j & 1 == 1 {
                    data.extend_from_slice(&[3, b'v', b'a', b'l']);
                }
            }
        }
        let (wals, clean) = reseal_wal(&data);
        assert!(
            clean || (ctl & 3 == 3 && ctl >> 6 > 0),
            "control byte {ctl:#x}"
        );
        exercise_wal(&wals, clean);
    }
}

proptest! {
    /// Random batches in intact record frames, under any WAL header, in
    /// up to four WALs (as the fuzz target `wal_resealed`): replay never
    /// panics in either mode, and a clean log (every record a batch
    /// continuing the sequence) replays whole
    /// (`fuzzing::resealed::exercise_wal`).
    #[test]
    fn resealed_random_records_replay_safely(
        ctl in any::<u8>(),
        fields in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut data = vec![ctl];
        data.extend_from_slice(&fields);
        let (wals, clean) = crate::fuzzing::resealed::reseal_wal(&data);
        crate::fuzzing::resealed::exercise_wal(&wals, clean);
    }
}

/// Any batches of puts and deletes of any keys (repeats too), in one to
/// four WALs under any header (`fuzzing::resealed::clean_wal_input`).
fn clean_log() -> impl Strategy<Value = (u8, usize, u8, Vec<Vec<crate::fuzzing::resealed::CleanOp>>)>
{
    let op = (
        proptest::collection::vec(any::<u8>(), 0..4),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
    )
        .prop_map(|(key, value)| crate::fuzzing::resealed::CleanOp { key, value });
    (
        0u8..4,
        1usize..=4,
        any::<u8>(),
        proptest::collection::vec(proptest::collection::vec(op, 1..8), 4..30),
    )
}

proptest! {
    /// Clean logs (every record a batch continuing the sequence), which
    /// random inputs of `resealed_random_records_replay_safely` form only a
    /// few times a run: each replays whole, every op at its own sequence,
    /// in both recovery modes.
    #[test]
    fn resealed_clean_logs_replay_every_op((header, wals, first, batches) in clean_log()) {
        use crate::fuzzing::resealed::{clean_wal_input, exercise_wal, reseal_wal};
        let (logs, clean) = reseal_wal(&clean_wal_input(header, wals, first, &batches));
        prop_assert_eq!(logs.len(), wals);
        prop_assert!(clean || (header == 3 && wals > 1), "not clean: header {} wals {}", header, wals);
        exercise_wal(&logs, clean);
    }
}
