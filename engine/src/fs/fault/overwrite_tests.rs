//! The power-loss model of an overwrite in place: durable once its fsync
//! returns; before that, each sector (each page under
//! `UnsyncedFate::Pages`) old or new, never a mix inside one.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

/// Bytes `from..to` of a file whose byte `i` is `i % 251 + 1`, xored with
/// `salt` (so the old and the new bytes differ in every position).
fn pattern(from: usize, to: usize, salt: u8) -> Vec<u8> {
    (from..to).map(|i| (i % 251 + 1) as u8 ^ salt).collect()
}

/// A file of `len` bytes, all fsynced and its entry durable.
fn synced_file(fs: &FaultFs, path: &Path, len: usize) {
    let mut f = fs.create(path).unwrap();
    f.write_all(&pattern(0, len, 0)).unwrap();
    f.sync().unwrap();
    fs.sync_dir(path.parent().unwrap()).unwrap();
}

/// A synced file of `len` bytes, `new` written over it at `offset` with
/// the overwrite's fsync failing (a crash between them), then a power
/// loss under `fate` and `unsynced`: the file's bytes.
fn torn_overwrite(
    fate: OverwriteFate,
    unsynced: UnsyncedFate,
    len: usize,
    offset: usize,
    new: &[u8],
) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_overwrite_fate(fate);
    fs.set_unsynced_fate(unsynced);
    let path = dir.path().join("000007.wal");
    synced_file(&fs, &path, len);
    // The overwrite's write is the next operation, its fsync the one after.
    fs.fail_only_op(fs.ops() + 1);
    assert!(fs.overwrite(&path, offset as u64, new).is_err());
    assert_eq!(fs::read(&path).unwrap()[offset..offset + new.len()], *new);
    fs.simulate_power_loss().unwrap();
    fs::read(&path).unwrap()
}

/// Which `unit`-sized pieces of `new` at `offset` a file ended with:
/// `Some(true)` new, `Some(false)` old, `None` a mix inside the unit.
fn units(bytes: &[u8], offset: usize, new: &[u8], unit: usize) -> Vec<Option<bool>> {
    let mut out = Vec::new();
    let mut at = offset;
    while at < offset + new.len() {
        let end = ((at / unit + 1) * unit).min(offset + new.len());
        let got = &bytes[at..end];
        let is_new = got == &new[at - offset..end - offset];
        let is_old = got == pattern(at, end, 0);
        out.push(match (is_new, is_old) {
            (true, false) => Some(true),
            (false, true) => Some(false),
            _ => None,
        });
        at = end;
    }
    out
}

#[test]
fn an_overwrite_whose_fsync_returned_survives_the_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_overwrite_fate(OverwriteFate::Lost);
    let path = dir.path().join("000007.wal");
    synced_file(&fs, &path, 3000);
    let before = fs.ops();
    fs.overwrite(&path, 100, b"header").unwrap();
    assert_eq!(
        fs.ops(),
        before + 2,
        "a write and a fsync: two crash points"
    );
    fs.simulate_power_loss().unwrap();
    let mut want = pattern(0, 3000, 0);
    want[100..106].copy_from_slice(b"header");
    assert_eq!(fs::read(&path).unwrap(), want);
}

#[test]
fn an_overwrite_never_fsynced_is_lost_or_applied_whole_by_the_fate() {
    let new = pattern(0, 16, 0x5a);
    let lost = torn_overwrite(OverwriteFate::Lost, UnsyncedFate::Truncated, 2000, 0, &new);
    assert_eq!(lost, pattern(0, 2000, 0));
    let applied = torn_overwrite(
        OverwriteFate::Applied,
        UnsyncedFate::Truncated,
        2000,
        0,
        &new,
    );
    assert_eq!(applied[..16], new);
    assert_eq!(applied[16..], pattern(16, 2000, 0));
}

#[test]
fn a_seeded_fate_tears_an_overwrite_only_at_sector_boundaries() {
    // 3000 bytes from offset 300: sectors 0 to 6, the first and last partly.
    let (offset, new) = (300, pattern(300, 3300, 0x5a));
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let fate = OverwriteFate::Seeded(seed);
        let bytes = torn_overwrite(fate, UnsyncedFate::Truncated, 4000, offset, &new);
        assert_eq!(bytes.len(), 4000, "the file's length never changes");
        assert_eq!(bytes[..offset], pattern(0, offset, 0), "seed {seed}");
        assert_eq!(bytes[offset + new.len()..], pattern(3300, 4000, 0));
        let got = units(&bytes, offset, &new, 512);
        assert_eq!(got.len(), 7);
        assert!(got.iter().all(Option::is_some), "seed {seed}: {got:?}");
        let again = torn_overwrite(fate, UnsyncedFate::Truncated, 4000, offset, &new);
        assert_eq!(bytes, again, "seed {seed}: the same run, the same choice");
        seen.insert(got);
    }
    // Torn overwrites occur, each in its own mix.
    assert!(seen.len() > 8, "{seen:?}");
    assert!(
        seen.iter()
            .any(|u| u.contains(&Some(true)) && u.contains(&Some(false)))
    );
}

#[test]
fn under_pages_an_overwrite_tears_only_at_page_boundaries() {
    let (offset, new) = (1000, pattern(1000, 9000, 0x5a));
    let mut mixed = false;
    for seed in 0..16 {
        let fate = OverwriteFate::Seeded(seed);
        let bytes = torn_overwrite(fate, UnsyncedFate::Pages(seed), 10_000, offset, &new);
        let got = units(&bytes, offset, &new, 4096);
        assert!(got.iter().all(Option::is_some), "seed {seed}: {got:?}");
        mixed |= got.contains(&Some(true)) && got.contains(&Some(false));
    }
    assert!(
        mixed,
        "some seed keeps one page of the overwrite and loses another"
    );
}

#[test]
fn an_overwrite_past_the_synced_length_is_unsynced_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_overwrite_fate(OverwriteFate::Applied);
    let path = dir.path().join("000007.wal");
    let mut f = fs.create(&path).unwrap();
    f.write_all(&pattern(0, 100, 0)).unwrap();
    f.sync().unwrap();
    f.write_all(&pattern(100, 200, 0)).unwrap();
    fs.sync_dir(dir.path()).unwrap();
    // Over the last synced bytes and the unsynced ones, crash before fsync.
    fs.fail_only_op(fs.ops() + 1);
    assert!(fs.overwrite(&path, 90, &[0xee; 20]).is_err());
    fs.simulate_power_loss().unwrap();
    // Applied below the synced length; past it the default fate cuts.
    let mut want = pattern(0, 100, 0);
    want[90..].fill(0xee);
    assert_eq!(fs::read(&path).unwrap(), want);
}

#[test]
fn a_later_fsync_of_the_file_makes_a_pending_overwrite_durable() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_overwrite_fate(OverwriteFate::Lost);
    let path = dir.path().join("000007.wal");
    let mut f = fs.create(&path).unwrap();
    f.write_all(&pattern(0, 100, 0)).unwrap();
    f.sync().unwrap();
    fs.sync_dir(dir.path()).unwrap();
    fs.fail_only_op(fs.ops() + 1);
    assert!(fs.overwrite(&path, 0, b"new").is_err());
    f.sync().unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap()[..3], *b"new");
}

#[test]
fn of_two_pending_overwrites_a_sector_holds_one_version_whole() {
    let versions = [
        pattern(0, 16, 0),
        pattern(0, 16, 0x11),
        pattern(0, 16, 0x22),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new();
        fs.set_overwrite_fate(OverwriteFate::Seeded(seed));
        let path = dir.path().join("000007.wal");
        synced_file(&fs, &path, 600);
        // Both writes land, neither fsync returns.
        fs.fail_only_op(fs.ops() + 1);
        assert!(fs.overwrite(&path, 0, &versions[1]).is_err());
        fs.fail_only_op(fs.ops() + 1);
        assert!(fs.overwrite(&path, 0, &versions[2]).is_err());
        fs.simulate_power_loss().unwrap();
        let bytes = fs::read(&path).unwrap();
        let which = versions.iter().position(|v| bytes[..16] == **v);
        assert!(which.is_some(), "seed {seed}: a mix of versions");
        assert_eq!(bytes[16..], pattern(16, 600, 0));
        seen.insert(which);
    }
    assert_eq!(seen.len(), 3, "each version can be the one left: {seen:?}");
}

#[test]
fn an_undone_unlink_brings_back_the_bytes_before_a_pending_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    fs.set_overwrite_fate(OverwriteFate::Applied);
    let path = dir.path().join("000007.wal");
    synced_file(&fs, &path, 100);
    fs.fail_only_op(fs.ops() + 1);
    assert!(fs.overwrite(&path, 0, b"new").is_err());
    fs.remove(&path).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), pattern(0, 100, 0));
}

#[test]
fn an_overwrite_follows_its_file_through_a_rename() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    fs.set_overwrite_fate(OverwriteFate::Lost);
    fs.set_rename_fate(RenameFate::Kept);
    let (from, to) = (dir.path().join("a"), dir.path().join("b"));
    synced_file(&fs, &from, 100);
    fs.fail_only_op(fs.ops() + 1);
    assert!(fs.overwrite(&from, 0, b"new").is_err());
    fs.rename(&from, &to).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&to).unwrap(), pattern(0, 100, 0));
}

#[test]
fn an_overwrite_is_refused_on_a_missing_file_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new();
    let path = dir.path().join("000007.wal");
    let err = fs.overwrite(&path, 0, b"x").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(err.path, path);
    assert!(!path.exists());
    let err = RealFs.overwrite(&path, 0, b"x").unwrap_err();
    assert_eq!(
        (err.kind(), err.path),
        (io::ErrorKind::NotFound, path.clone())
    );
    assert!(!path.exists());
}

#[test]
fn the_real_file_system_overwrites_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    fs::write(&path, b"0123456789").unwrap();
    RealFs.overwrite(&path, 2, b"ab").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"01ab456789");
}
