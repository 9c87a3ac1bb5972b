//! Damage at the end of the log where the manifest's last sequence says
//! the write there was acknowledged (`WalDamage::AcknowledgedLost`): in a
//! WAL whose header says each record was fsynced before it was visible,
//! a crash tears only a write past that sequence, so anything else is
//! corruption in torn-tail mode. Where the header promises no fsync, or
//! says nothing (version 1), or no record came before the damage, it is
//! read as before.

use super::tests::{PIT, TORN, logs, wal_damage, wal_of};
use super::*;
use crate::wal::header;

/// A version 2 WAL of one-op batches at `seqs`.
fn headed(synced: bool, seqs: impl IntoIterator<Item = u64>) -> Vec<u8> {
    let mut out = header::encode_v2(synced).to_vec();
    out.extend(wal_of(seqs));
    out
}

/// Where the store's tables end at sequence 0 and its manifest's last
/// sequence is `acknowledged`.
fn start(acknowledged: u64) -> LogStart {
    LogStart {
        lowest: 1,
        highest: acknowledged + 1,
        acknowledged,
        salted: false,
    }
}

/// `wals` with the last one cut 3 bytes into its last record.
fn torn_last(mut wals: Vec<Vec<u8>>, last_record_len: usize) -> Vec<Vec<u8>> {
    let last = wals.last_mut().unwrap();
    let at = last.len() - last_record_len + 3;
    last.truncate(at);
    wals
}

fn replayed(wals: Vec<Vec<u8>>, mode: WalRecovery, start: LogStart) -> Result<Option<u64>> {
    replay_logs(&logs(wals), mode, start, &MemTable::new(0)).map(|r| r.last)
}

#[test]
fn a_synced_wal_torn_at_an_acknowledged_write_is_refused() {
    let record_len = wal_of(5..=5).len();
    let torn = || torn_last(vec![headed(true, 1..=5)], record_len);
    // Write 5 was never visible: a crash mid-append tore it.
    for acknowledged in [0, 3, 4] {
        assert_eq!(
            replayed(torn(), TORN, start(acknowledged)).unwrap(),
            Some(4)
        );
    }
    // Write 5 (or a later one) was visible when the manifest was written.
    for acknowledged in [5, 9] {
        let (_, _, reason) = wal_damage(replayed(torn(), TORN, start(acknowledged)));
        assert_eq!(
            reason,
            WalDamage::AcknowledgedLost {
                expected: 5,
                last: acknowledged
            }
        );
        // Point in time recovers the writes before it, as it always did.
        assert_eq!(replayed(torn(), PIT, start(acknowledged)).unwrap(), Some(4));
    }
}

#[test]
fn an_older_synced_wal_torn_before_an_empty_newer_one_is_refused_when_acknowledged() {
    let record_len = wal_of(5..=5).len();
    let wals = || {
        let mut w = torn_last(vec![headed(true, 1..=5)], record_len);
        w.push(headed(true, 1..1));
        w
    };
    assert_eq!(replayed(wals(), TORN, start(4)).unwrap(), Some(4));
    let (path, _, reason) = wal_damage(replayed(wals(), TORN, start(5)));
    assert_eq!(path, "000001.wal");
    assert_eq!(
        reason,
        WalDamage::AcknowledgedLost {
            expected: 5,
            last: 5
        }
    );
}

#[test]
fn damage_is_read_as_before_where_the_header_promises_no_fsync_or_nothing_came_before() {
    let record_len = wal_of(5..=5).len();
    // Never fsynced while the store ran: the manifest's last sequence
    // counts writes a power loss may take.
    let unsynced = torn_last(vec![headed(false, 1..=5)], record_len);
    assert_eq!(replayed(unsynced, TORN, start(9)).unwrap(), Some(4));
    // Version 1 says nothing about fsyncs.
    let unheaded = torn_last(vec![wal_of(1..=5)], record_len);
    assert_eq!(replayed(unheaded, TORN, start(9)).unwrap(), Some(4));
    // The first record torn: where the log starts is not known exactly
    // (the tables may have dropped their newest entries), so neither is
    // whether it was acknowledged.
    let first = torn_last(vec![headed(true, 1..=1)], record_len);
    assert_eq!(replayed(first, TORN, start(9)).unwrap(), None);
}
