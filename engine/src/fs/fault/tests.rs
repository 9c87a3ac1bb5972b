//! The power-loss model itself: what comes back of an unlink that no
//! directory fsync made durable.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

/// A file at `path` with `synced` written and fsynced, then `unsynced`
/// written after the fsync; its entry made durable when `entry_synced`.
fn file(fs: &FaultFs, path: &Path, synced: &[u8], unsynced: &[u8], entry_synced: bool) {
    let mut f = fs.create(path).unwrap();
    f.write_all(synced).unwrap();
    f.sync().unwrap();
    f.write_all(unsynced).unwrap();
    if entry_synced {
        fs.sync_dir(path.parent().unwrap()).unwrap();
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v = RealFs.list(dir).unwrap();
    v.sort();
    v
}

#[test]
fn an_unlink_never_made_durable_comes_back_with_the_synced_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    let path = dir.path().join("000007.wal");
    file(&fs, &path, b"synced", b"+lost", true);
    fs.remove(&path).unwrap();
    assert!(!path.exists());
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"synced");
}

#[test]
fn a_directory_fsync_makes_the_unlink_durable() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    let path = dir.path().join("000007.wal");
    file(&fs, &path, b"synced", b"", true);
    fs.remove(&path).unwrap();
    fs.sync_dir(dir.path()).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

#[test]
fn a_file_whose_entry_was_never_durable_stays_gone() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    let path = dir.path().join("000007.sst");
    file(&fs, &path, b"synced", b"", false);
    fs.remove(&path).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

#[test]
fn a_file_that_was_there_before_comes_back_whole() {
    // Created outside this file system (or before a power loss it
    // survived): all of it is durable.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("MANIFEST");
    fs::write(&path, b"old manifest").unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    fs.remove(&path).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"old manifest");
    // And again after that power loss: the survivor is durable as it is.
    fs.remove(&path).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"old manifest");
}

#[test]
fn an_unlinked_name_created_again_holds_the_old_file_after_the_loss() {
    // The new file's entry is newer than the unlink: neither is durable.
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    let path = dir.path().join("000009.sst");
    file(&fs, &path, b"old table", b"", true);
    fs.remove(&path).unwrap();
    file(&fs, &path, b"new table", b"", false);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"old table");
}

#[test]
fn an_unlink_after_an_undone_rename_is_undone_with_it() {
    // `a` renamed over `b`, then `b` removed, no directory fsync: the
    // power loss leaves `a` and the old `b`, as if nothing happened.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("MANIFEST.tmp"), dir.path().join("MANIFEST"));
    fs::write(&b, b"old").unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::Nothing);
    file(&fs, &a, b"new", b"", true);
    fs.rename(&a, &b).unwrap();
    fs.remove(&b).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"new");
    assert_eq!(fs::read(&b).unwrap(), b"old");
}

#[test]
fn revival_nothing_is_the_unlink_durable_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::Nothing);
    let path = dir.path().join("000007.wal");
    file(&fs, &path, b"synced", b"", true);
    fs.remove(&path).unwrap();
    fs.simulate_power_loss().unwrap();
    assert!(!path.exists());
}

#[test]
fn a_seeded_revival_brings_back_some_unlinks_and_the_same_ones_each_time() {
    let back = |seed: u64| {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.set_revival(Revival::Seeded(seed));
        for n in 0..64 {
            file(
                &fs,
                &dir.path().join(format!("{n:06}.sst")),
                b"t",
                b"",
                true,
            );
        }
        for n in 0..64 {
            fs.remove(&dir.path().join(format!("{n:06}.sst"))).unwrap();
        }
        fs.simulate_power_loss().unwrap();
        listing(dir.path())
    };
    let first = back(1);
    assert!(
        (8..56).contains(&first.len()),
        "a coin flip each: {} of 64 came back",
        first.len()
    );
    assert_eq!(back(1), first, "the same seed, the same choice");
    assert_ne!(back(2), first, "another seed, another choice");
}

#[test]
fn the_default_revival_is_seeded() {
    assert_eq!(FaultFs::new().state.lock().revival, Revival::Seeded(0));
}

#[test]
fn a_removed_directory_takes_its_unlinked_entries_with_it() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("store");
    let fs = FaultFs::new();
    fs.create_dir_all(&dir).unwrap();
    fs.set_revival(Revival::All);
    let path = dir.join("MANIFEST");
    file(&fs, &path, b"m", b"", true);
    fs.remove(&path).unwrap();
    fs.remove_dir(&dir).unwrap();
    fs.simulate_power_loss().unwrap();
    assert!(!dir.exists());
}
