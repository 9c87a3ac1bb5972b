//! A torn append whose value holds WAL records of another log (an
//! application storing WAL bytes, say a replica's copy of a primary's
//! log, whose sequences run near this store's). Under `SyncMode::Always`
//! a crash mid-append may keep the record's pages in any order
//! (`UnsyncedFate::Pages`): its header page lost, or a middle page, while
//! a later page holding the embedded records is kept.
//!
//! What recovery makes of it today, pinned: the search for a record of
//! the log after damage (`check_torn_tail`) takes an embedded record for
//! one when its sequence is the torn record's exact successor (header
//! kept) or any sequence from the torn one on (header lost), so
//! `TolerateTornTail` refuses the open as `BeforeIntact`, though the
//! write was never acknowledged; `PointInTime` opens it with every
//! acknowledged write. The same bytes are what a device that lost a
//! durable page (or a range of bytes) in front of real records leaves,
//! which the refusal is there to catch (`header_tests`,
//! `tests::a_record_inside_a_torn_value_is_not_the_log`): telling the two
//! apart needs more than the sequence filter (a policy choice, left
//! open). A value whose embedded sequences the log could not hold there
//! is a torn tail (`tests::a_torn_length_field_framing_a_record_inside_its_own_value_is_a_torn_tail`).

use super::tests::{PIT, TORN, batch, logs, record, wal_damage, wal_of};
use super::*;
use crate::wal::header;

/// 4 KiB: the page a power loss keeps or loses whole.
const PAGE: usize = 4096;

/// A synced WAL holding writes 1..=5, then the torn append of write 6:
/// one put whose value holds a run of another log's records at sequences
/// `embedded`, from about 9 KB into it (its third page on). Returns the
/// image and where the torn record starts.
fn torn_image(embedded: std::ops::RangeInclusive<u64>) -> (Vec<u8>, usize) {
    let mut image = header::encode(true).to_vec();
    image.extend(wal_of(1..=5));
    let at = image.len();
    let run: Vec<u8> = embedded.flat_map(|s| record(&batch(s, 1, 40))).collect();
    let mut value = vec![0x5a; 9000];
    value.extend_from_slice(&run);
    value.resize(value.len().max(16_000), 0xa5);
    let mut b = WriteBatch::new();
    b.put(b"wal-copy", &value);
    image.extend(record(b.encode(6)));
    (image, at)
}

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

#[test]
fn a_torn_append_whose_header_page_was_lost_before_embedded_records_is_refused() {
    // Another log's records at sequences from the torn write's on.
    let (mut image, at) = torn_image(6..=40);
    // The page holding the torn record's header never reached the disk;
    // the later pages, the embedded run among them, did.
    lose_pages(&mut image, at, at + 1);
    refused_at_the_torn_record(image, at);
}

#[test]
fn a_torn_append_whose_middle_page_was_lost_before_its_successor_embedded_is_refused() {
    // Its header survived and names successor 7, which the run holds.
    let (mut image, at) = torn_image(3..=40);
    // A page of the value before the run never reached the disk.
    lose_pages(&mut image, at + 4200, at + 4201);
    refused_at_the_torn_record(image, at);
    // Without the successor in the run, the same loss is a torn tail.
    let (mut image, at) = torn_image(8..=40);
    lose_pages(&mut image, at + 4200, at + 4201);
    assert_eq!(replayed(image, TORN).unwrap(), Some(5));
}

/// The same through the store: under `SyncMode::Always` a put whose
/// value holds another log's records at the sequences this log goes on
/// at is appended, its fsync fails (never acknowledged), and a power loss
/// keeps its pages in any order (`UnsyncedFate::Pages`, 24 seeds). Every
/// store `PointInTime` opens holds the five acknowledged writes; where
/// the kept pages hold the embedded run but lost the torn record's header
/// or a page before the run, `TolerateTornTail` refuses it.
#[test]
fn a_store_crashed_mid_append_of_such_a_value_is_refused_in_torn_tail_mode() {
    use std::sync::Arc;

    use crate::fs::fault::{FaultFs, UnsyncedFate};
    use crate::{Db, Error, Options, SyncMode};

    let (mut refused, mut opened) = (0, 0);
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
        let run: Vec<u8> = (next..=next + 34)
            .flat_map(|s| record(&batch(s, 1, 40)))
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
        match Db::open(dir.path(), opts(TORN)) {
            Err(Error::Corruption {
                reason: crate::damage::Damage::Wal(WalDamage::BeforeIntact),
                ..
            }) => refused += 1,
            Err(e) => panic!("seed {seed}: {e}"),
            Ok(db) => {
                opened += 1;
                db.close().unwrap();
            }
        }
        let db = Db::open(copy.path(), opts(PIT)).unwrap();
        for i in 0..5u8 {
            assert_eq!(
                db.get(&[b'k', i]).unwrap().as_deref(),
                Some(&b"acknowledged"[..]),
                "seed {seed}"
            );
        }
        db.close().unwrap();
    }
    println!("{refused} refused, {opened} opened");
    assert!(refused > 0, "no seed kept the run without the torn header");
}
