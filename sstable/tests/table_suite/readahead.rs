//! A pass that does not fill the cache (compaction, filter rebuilds) reads
//! tables ahead, many blocks per read: it must give exactly what a cached
//! pass gives, across window boundaries, and a damaged block far into the
//! table must still be named by its own offset, after every entry before it.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{BlockKind, Error, TableIter};
use common::{open, options, simple_model, write_table};

#[test]
fn a_pass_reading_ahead_matches_the_cached_pass_and_names_a_damaged_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    // About 1 MB of data blocks: several 256 KiB windows, and blocks that
    // straddle window ends.
    let model = simple_model(40_000);
    let summary = write_table(&path, &model, options(Some(FilterKind::Blocked), 4096));
    assert!(summary.properties.data_bytes > 900_000);
    let ahead: Vec<_> = TableIter::new(open(&path, false), false)
        .map(Result::unwrap)
        .collect();
    let cached: Vec<_> = TableIter::new(open(&path, true), true)
        .map(Result::unwrap)
        .collect();
    assert_eq!(ahead.len(), model.len());
    assert!(ahead == cached, "the passes differ");
    for (e, ((key, seq), (_, value))) in ahead.iter().zip(&model) {
        assert_eq!((&e.user_key, e.seq, &e.value), (key, seq.0, value));
    }

    // Damage one byte in the fourth window.
    let flip = 3 * (256 << 10) + 1000;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[flip] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let mut good = 0;
    let mut failure = None;
    for entry in TableIter::new(open(&path, false), false) {
        match entry {
            Ok(e) => {
                assert_eq!(e, ahead[good], "wrong entry before the damage");
                good += 1;
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    match failure {
        Some(Error::Corruption {
            kind: BlockKind::Data,
            offset,
            ..
        }) => {
            assert!(
                offset <= flip as u64 && flip as u64 - offset < 4096 + 128,
                "offset {offset}"
            );
        }
        other => panic!("expected a data block corruption, got {other:?}"),
    }
    // Every entry of the blocks before the damaged one came out.
    assert!(good > 0 && good < ahead.len());
}
