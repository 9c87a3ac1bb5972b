//! A torn append whose value holds WAL records of another log (an
//! application storing WAL bytes, say a replica's copy of a primary's
//! log, whose sequences run near this store's). Under `SyncMode::Always`
//! a crash mid-append may keep the record's pages in any order
//! (`UnsyncedFate::Pages`): its header page lost, or a middle page, while
//! a later page holding the embedded records is kept.
//!
//! The search for a record of the log after damage (`check_torn_tail`)
//! would take an embedded record for one when its sequence is the torn
//! record's exact successor (header kept) or any sequence from the torn
//! one on (header lost), and refuse the open as `BeforeIntact`, though
//! the write was never acknowledged. In a version 3 WAL (`wal/header.rs`)
//! every record's checksum covers the file's random salt, so records of
//! another log (another salt, or none) never verify as this WAL's: the
//! damage is a torn tail, and `TolerateTornTail` opens the store with
//! every acknowledged write. A version 2 WAL (older builds) has no salt:
//! there the refusal stays (pinned below), since the same bytes are what
//! a device that lost a durable page in front of real records leaves
//! (`header_tests`, `tests::a_record_inside_a_torn_value_is_not_the_log`).

use super::tests::{PIT, TORN, batch, logs, salted, wal_damage};
use super::*;
use crate::wal::header;

/// 4 KiB: the page a power loss keeps or loses whole.
const PAGE: usize = 4096;

/// The salt of the store's own WAL in the images below.
const SALT: u64 = 0x5a17_5a17_0000_0026;

/// A synced WAL holding writes 1..=5, then the torn append of write 6:
/// one put whose value holds a run of another log's records at sequences
/// `embedded`, from about 9 KB into it (its third page on), checksummed
/// under `other` (another WAL's salt, or none). `own`: the salt of this
/// WAL (version 3), or `None` (a version 2 WAL of an older build).
/// Returns the image and where the torn record starts.
fn torn_image(
    own: Option<u64>,
    other: Option<u64>,
    embedded: std::ops::RangeInclusive<u64>,
) -> (Vec<u8>, usize) {
    let mut image = match own {
        Some(salt) => header::encode(true, salt).to_vec(),
        None => header::encode_v2(true).to_vec(),
    };
    for s in 1..=5 {
        image.extend(salted(own, &batch(s, 1, 5)));
    }
    let at = image.len();
    let run: Vec<u8> = embedded
        .flat_map(|s| salted(other, &batch(s, 1, 40)))
        .collect();
    let mut value = vec![0x5a; 9000];
    value.extend_from_slice(&run);
    value.resize(value.len().max(16_000), 0xa5);
    let mut b = WriteBatch::new();
    b.put(b"wal-copy", &value);
    image.extend(salted(own, b.encode(6)));
    (image, at)
}

/// Salts of logs other than the one under test: none (a version 2 log),
/// and another version 3 file's.
const OTHERS: [Option<u64>; 2] = [None, Some(SALT ^ 1)];

/// Zeros over `[from, to)` of `image`, on to the end of `to`'s page (the
/// first page only from `from`: bytes before it were fsynced).
fn lose_pages(image: &mut [u8], from: usize, to: usize) {
    let end = (to.div_ceil(PAGE) * PAGE).min(image.len());
    image[from..end].fill(0);
}

fn replayed(image: Vec<u8>, mode: WalRecovery) -> Result<Option<u64>> {
    // The manifest's last sequence is 5: write 6 was never acknowledged.
    let start = LogStart {
        lowest: 1,
        highest: 6,
        acknowledged: 5,
        salted: false,
    };
    replay_logs(&logs(vec![image]), mode, start, &MemTable::new(0)).map(|r| r.last)
}

/// `image` is refused in torn-tail mode as damage before an intact record,
/// at the torn record, and point in time recovers writes 1..=5.
fn refused_at_the_torn_record(image: Vec<u8>, at: usize) {
    assert_eq!(replayed(image.clone(), PIT).unwrap(), Some(5));
    let (path, offset, reason) = wal_damage(replayed(image, TORN));
    assert_eq!(
        (path.as_str(), offset, reason),
        ("000001.wal", at as u64, WalDamage::BeforeIntact)
    );
}

/// `image` opens in both modes with writes 1..=5 and without the torn 6.
fn opened_without_the_torn_write(image: Vec<u8>) {
    for mode in [TORN, PIT] {
        assert_eq!(replayed(image.clone(), mode).unwrap(), Some(5), "{mode:?}");
    }
}

#[test]
fn a_torn_append_whose_header_page_was_lost_before_embedded_records_is_a_torn_tail() {
    for other in OTHERS {
        // Another log's records at sequences from the torn write's on.
        let (mut image, at) = torn_image(Some(SALT), other, 6..=40);
        // The page holding the torn record's header never reached the
        // disk; the later pages, the embedded run among them, did.
        lose_pages(&mut image, at, at + 1);
        opened_without_the_torn_write(image);
    }
}

#[test]
fn a_torn_append_whose_middle_page_was_lost_before_its_successor_embedded_is_a_torn_tail() {
    for other in OTHERS {
        // Its header survived and names successor 7, which the run holds.
        let (mut image, at) = torn_image(Some(SALT), other, 3..=40);
        // A page of the value before the run never reached the disk.
        lose_pages(&mut image, at + 4200, at + 4201);
        opened_without_the_torn_write(image);
    }
}

#[test]
fn the_same_run_under_this_wal_s_own_salt_is_still_the_log() {
    // What a device that lost a durable page in front of real records
    // leaves: records after the damage that verify under this file's
    // salt are the log's, and the damage before them is refused.
    let (mut image, at) = torn_image(Some(SALT), Some(SALT), 6..=40);
    lose_pages(&mut image, at, at + 1);
    refused_at_the_torn_record(image, at);
}

#[test]
fn in_a_version_2_wal_embedded_records_are_still_refused() {
    // No salt in an older build's WAL: another log's records verify as
    // its own, and the refusal of the unfixed format stays (Known gaps).
    let (mut image, at) = torn_image(None, None, 6..=40);
    lose_pages(&mut image, at, at + 1);
    refused_at_the_torn_record(image, at);
    let (mut image, at) = torn_image(None, None, 3..=40);
    lose_pages(&mut image, at + 4200, at + 4201);
    refused_at_the_torn_record(image, at);
    // Without the successor in the run, the same loss is a torn tail.
    let (mut image, at) = torn_image(None, None, 8..=40);
    lose_pages(&mut image, at + 4200, at + 4201);
    assert_eq!(replayed(image, TORN).unwrap(), Some(5));
}

/// The same through the store: under `SyncMode::Always` a put whose
/// value holds another log's records at the sequences this log goes on
/// at is appended, its fsync fails (never acknowledged), and a power loss
/// keeps its pages in any order (`UnsyncedFate::Pages`, 24 seeds). Every
/// seed opens in both modes with the five acknowledged writes, the torn
/// one gone or (where every page of it survived) whole (before the salt, 15 of the 24 were refused by
/// `TolerateTornTail` as `BeforeIntact`). The embedded records are of a
/// version 2 log (no salt) at even seeds, of another version 3 WAL at odd.
#[test]
fn a_store_crashed_mid_append_of_such_a_value_opens_in_torn_tail_mode() {
    use std::sync::Arc;

    use crate::fs::fault::{FaultFs, UnsyncedFate};
    use crate::{Db, Options, SyncMode};

    for seed in 0..24 {
        let dir = crate::scratch_dirs::scratch_dir();
        let fs = FaultFs::new();
        fs.set_unsynced_fate(UnsyncedFate::Pages(seed));
        let opts = |wal_recovery| Options {
            sync: SyncMode::Always,
            background_work: false,
            wal_recovery,
            ..Options::default()
        };
        let db = Db::open_with_fs(dir.path(), opts(TORN), Arc::new(fs.clone())).unwrap();
        for i in 0..5u8 {
            db.put(&[b'k', i], b"acknowledged").unwrap();
        }
        let next = db.last_sequence() + 1;
        let other = OTHERS[seed as usize % 2];
        let run: Vec<u8> = (next..=next + 34)
            .flat_map(|s| salted(other, &batch(s, 1, 40)))
            .collect();
        let mut value = vec![0x5a; 9000];
        value.extend_from_slice(&run);
        value.resize(16_000, 0xa5);
        // The append goes through; its fsync fails.
        fs.fail_from_op(fs.ops() + 1);
        assert!(db.put(b"wal-copy", &value).is_err());
        drop(db);
        fs.heal();
        fs.simulate_power_loss().unwrap();
        let copy = crate::scratch_dirs::scratch_dir();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
        for (path, mode) in [(dir.path(), TORN), (copy.path(), PIT)] {
            let db =
                Db::open(path, opts(mode)).unwrap_or_else(|e| panic!("seed {seed}, {mode:?}: {e}"));
            for i in 0..5u8 {
                assert_eq!(
                    db.get(&[b'k', i]).unwrap().as_deref(),
                    Some(&b"acknowledged"[..]),
                    "seed {seed}, {mode:?}"
                );
            }
            // Never acknowledged: gone, or whole where every page of it
            // survived the power loss.
            let torn = db.get(b"wal-copy").unwrap();
            assert!(
                torn.as_ref().is_none_or(|v| *v == value),
                "seed {seed}, {mode:?}: a torn write replayed in part"
            );
            db.close().unwrap();
        }
    }
}
