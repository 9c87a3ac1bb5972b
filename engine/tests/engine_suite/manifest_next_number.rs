//! A manifest's next file number lies above every table it names: the
//! store numbers its next file with it, so a manifest (checksummed, so only
//! a bug or a hand edit makes one) whose next number is a live table's own
//! is refused at open with the table named, as one past it would be.
#![allow(clippy::unwrap_used)] // Test support: a panic is the failure report.

use crate::common;

use bloomlsm::{Damage, Db, Error, ManifestDamage, Options};
use common::{fill, read_manifest, write_manifest};

#[test]
fn a_next_file_number_equal_to_a_live_tables_number_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    fill(&db, 200);
    db.flush().unwrap();
    db.close().unwrap();
    let mut m = read_manifest(dir.path());
    let newest = m.tables.iter().map(|t| t.numbers[0]).max().unwrap();
    assert!(m.counters[0] > newest);
    // The next file would take the newest table's number.
    m.counters[0] = newest;
    write_manifest(dir.path(), &m);
    match Db::open(dir.path(), Options::default()).unwrap_err() {
        Error::Corruption {
            reason: Damage::Manifest(ManifestDamage::Table { number, .. }),
            ..
        } => assert_eq!(number, newest),
        other => panic!("expected the table refused, got {other}"),
    }
}
