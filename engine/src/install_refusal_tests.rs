//! An install whose version the next open would refuse is refused before
//! any manifest is written (`ManifestState::write_staged` runs the open's
//! whole `check`): the store's manifest stays the last good one, writes
//! stop, and the store opens again. Also an edit removing a table that is
//! not live (`Version::edited`), in every build.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bloomlsm_sstable::EntryKind;

use crate::install::VersionEdit;
use crate::version::TableHandle;
use crate::{Db, Error, ManifestDamage, Options, TreeOrderError};

/// One table at `level` holding `key` at `seq`, written and not installed.
fn table(db: &Db, level: usize, key: &str, seq: u64) -> Vec<Arc<TableHandle>> {
    db.inner
        .tables
        .write(
            level,
            crate::table_files::OutputCuts::one_table(),
            &crate::filter_budget::Plan::unbounded(10.0),
            &db.inner.counters,
            &mut |out| out.add(key.as_bytes(), seq, EntryKind::Put, b"v"),
        )
        .unwrap()
}

fn options() -> Options {
    Options {
        background_work: false,
        num_levels: 4,
        ..Options::default()
    }
}

#[test]
fn a_table_above_the_visible_sequence_is_never_made_durable() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"a", b"1").unwrap();
    let visible = db.inner.last_visible.load(Ordering::Acquire);
    // A bug's table: its entry is newer than any write made visible, so
    // a manifest naming it at this last sequence is one the open refuses
    // (`ManifestDamage::Table`).
    let above = table(&db, 2, "b", visible + 5);
    let number = above[0].meta.number;
    let refused = db.inner.install(VersionEdit {
        added: &above,
        ..VersionEdit::default()
    });
    match refused {
        Err(Error::ManifestRefused(ManifestDamage::Table {
            number: n, largest, ..
        })) => assert_eq!((n, largest), (number, visible + 5)),
        other => panic!("installed: {other:?}"),
    }
    assert!(
        db.inner.current.load().version.levels[2].is_empty(),
        "not in the view"
    );
    assert!(
        db.put(b"c", b"2").is_err(),
        "writes went on after a refusal"
    );
    drop(above);
    // The close reports the stop; the table's file is an orphan the next
    // open removes.
    assert!(matches!(db.close(), Err(Error::WritesStopped(_))));
    // The manifest on disk is the last good one.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
}

#[test]
fn an_edit_removing_a_table_that_is_not_live_is_refused() {
    let dir = crate::scratch_dirs::scratch_dir();
    let db = Db::open(dir.path(), options()).unwrap();
    let live = table(&db, 1, "a", 0);
    db.inner
        .install(VersionEdit {
            added: &live,
            ..VersionEdit::default()
        })
        .unwrap();
    // Replaced once: the second replacement's input is no longer live.
    let first = table(&db, 1, "a", 0);
    db.inner
        .install(VersionEdit {
            added: &first,
            removed: &live,
            ..VersionEdit::default()
        })
        .unwrap();
    // Elsewhere in the level: nothing but the liveness check refuses it.
    let second = table(&db, 1, "z", 0);
    let version = db.inner.current.load().version.clone();
    assert!(matches!(
        version.edited(&second, &live),
        Err(TreeOrderError::RemovedNotLive { number }) if number == live[0].meta.number
    ));
    assert!(matches!(
        db.inner.install(VersionEdit {
            added: &second,
            removed: &live,
            ..VersionEdit::default()
        }),
        Err(Error::Internal(_))
    ));
    let level: Vec<u64> = db.inner.current.load().version.levels[1]
        .iter()
        .map(|t| t.meta.number)
        .collect();
    assert_eq!(level, vec![first[0].meta.number]);
}
