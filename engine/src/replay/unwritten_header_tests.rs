//! A WAL whose header never became durable (its creation interrupted by a
//! power loss, or its header's fsync failed): a power loss leaves a prefix
//! of the header or, when the file's length was durable but its page never
//! written back, up to 16 zeros. No record was ever appended to it
//! (`WalWriter::create` fsyncs the header first), so it reads as an empty
//! file: no cut when nothing else was dropped, in either recovery mode.
//! Zeros longer than a header are not that: a device that lost a durable
//! page keeps the file's length, and the writes it held are a cut.

use super::tests::{FRESH, PIT, TORN, logs, replay_cut, wal_of};
use super::*;
use crate::wal::header::{self, V2_HEADER_LEN};

/// A version 2 WAL of one-op batches at `seqs`.
fn headed(synced: bool, seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let mut out = header::encode_v2(synced).to_vec();
    out.extend(wal_of(seqs));
    out
}

/// What a power loss leaves of a header never fsynced: each prefix of a
/// version 2 or version 3 header, and 1 to 24 zeros.
fn never_durable_headers() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (1..=header::HEADER_LEN).map(|n| vec![0; n]).collect();
    for synced in [false, true] {
        out.extend((1..V2_HEADER_LEN).map(|n| header::encode_v2(synced)[..n].to_vec()));
        let v3 = header::encode(synced, 0x5a17_0000_dead_beef);
        out.extend((1..header::HEADER_LEN).map(|n| v3[..n].to_vec()));
    }
    out
}

fn outcome(wals: Vec<Vec<u8>>, mode: WalRecovery) -> String {
    format!(
        "{:?}",
        replay_logs(&logs(wals), mode, FRESH, &MemTable::new(0))
    )
}

#[test]
fn a_header_never_made_durable_is_no_cut() {
    for synced in [false, true] {
        for unwritten in never_durable_headers() {
            let empty = || headed(synced, 1..1);
            // The newest WAL alone or after one replayed whole; and behind
            // a WAL of only a header, as an open that crashed before its
            // manifest leaves it.
            let shapes = [
                (vec![unwritten.clone()], None),
                (vec![headed(synced, 1..=3), unwritten.clone()], Some(3)),
                (vec![unwritten.clone(), empty()], None),
                (
                    vec![headed(synced, 1..=3), unwritten.clone(), empty()],
                    Some(3),
                ),
            ];
            for (wals, last) in shapes {
                for mode in [TORN, PIT] {
                    let what = format!("synced {synced}, {unwritten:?}, {mode:?}");
                    let got = replay_logs(&logs(wals.clone()), mode, FRESH, &MemTable::new(0));
                    assert_eq!(
                        got.unwrap(),
                        Replayed {
                            last,
                            cut: None,
                            salvaged: Vec::new()
                        },
                        "{what}"
                    );
                }
            }
        }
    }
}

/// In every position, before newer records too (which only damage can
/// put there: a newer WAL's records follow a manifest naming it, which
/// drops the older WAL from the log), such a WAL is read as an empty file
/// is: refused or cut the same way, never replayed differently.
#[test]
fn a_header_never_made_durable_reads_as_an_empty_file() {
    for synced in [false, true] {
        for unwritten in never_durable_headers() {
            let shapes = |slot: Vec<u8>| {
                [
                    vec![slot.clone(), headed(synced, 1..=3)],
                    vec![headed(synced, 1..=3), slot.clone(), headed(synced, 4..=5)],
                    vec![headed(synced, 1..=3), slot.clone(), headed(synced, 9..=9)],
                    vec![headed(synced, 1..=3), slot],
                ]
            };
            for (as_is, as_empty) in shapes(unwritten.clone())
                .into_iter()
                .zip(shapes(Vec::new()))
            {
                for mode in [TORN, PIT] {
                    assert_eq!(
                        outcome(as_is.clone(), mode),
                        outcome(as_empty.clone(), mode),
                        "synced {synced}, {unwritten:?}, {mode:?}"
                    );
                }
            }
        }
    }
}

/// A WAL that held writes and lost its only page, header and all (a
/// device losing fsynced bytes; no power loss does that), reads as more
/// zeros than a header: its writes may have been acknowledged, and the
/// cut is reported, whole, in both modes.
#[test]
fn zeros_longer_than_a_header_are_still_a_cut() {
    let mut closed = header::encode_closed_v2().to_vec();
    closed.extend(wal_of(1..=3));
    let mut marker = WriteBatch::new();
    let marker = marker.encode(4).to_vec();
    closed.extend((marker.len() as u32).to_le_bytes());
    closed.extend(crc32fast::hash(&marker).to_le_bytes());
    closed.extend(marker);
    let held_writes = [headed(true, 1..=3), headed(false, 1..=3), closed];
    for whole in held_writes {
        let lost = vec![0; whole.len()];
        for (mode, cause) in [
            (TORN, WalCutCause::TornTail),
            (PIT, WalCutCause::PointInTime),
        ] {
            let cut = replay_cut(vec![lost.clone()], mode).unwrap();
            assert_eq!(
                (cut.offset, cut.bytes_not_replayed, cut.cause),
                (0, whole.len() as u64, cause),
                "{mode:?}"
            );
        }
    }
    // The shortest such file: one byte past a version 3 header (the
    // longest this build writes).
    let cut = replay_cut(vec![vec![0; header::HEADER_LEN + 1]], TORN).unwrap();
    assert_eq!(cut.bytes_not_replayed, header::HEADER_LEN as u64 + 1);
}
