//! The power-loss model itself: what comes back of an unlink, and what
//! stays of a rename, that no directory fsync made durable; and what stays
//! of the bytes written after a file's last fsync.
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
    let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
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
    let dir = crate::scratch_dirs::scratch_dir();
    let (a, b) = (dir.path().join("MANIFEST.tmp"), dir.path().join("MANIFEST"));
    fs::write(&b, b"old").unwrap();
    let fs = FaultFs::new();
    fs.set_revival(Revival::Nothing);
    fs.set_rename_fate(RenameFate::Undone);
    file(&fs, &a, b"new", b"", true);
    fs.rename(&a, &b).unwrap();
    fs.remove(&b).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"new");
    assert_eq!(fs::read(&b).unwrap(), b"old");
}

#[test]
fn revival_nothing_is_the_unlink_durable_at_once() {
    let dir = crate::scratch_dirs::scratch_dir();
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
        let dir = crate::scratch_dirs::scratch_dir();
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
    let base = crate::scratch_dirs::scratch_dir();
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

/// The manifest switch of `ManifestState::write_staged` up to the rename:
/// `MANIFEST` holds `old` (durable, from before this file system),
/// `MANIFEST.tmp` gets `new` fsynced and `unsynced` after, with its entry
/// synced when `tmp_entry_synced`; then the rename, never made durable.
fn manifest_switch(
    fs: &FaultFs,
    dir: &Path,
    unsynced: &[u8],
    tmp_entry_synced: bool,
) -> (PathBuf, PathBuf) {
    let (tmp, manifest) = (dir.join("MANIFEST.tmp"), dir.join("MANIFEST"));
    fs::write(&manifest, b"old").unwrap();
    file(fs, &tmp, b"new", unsynced, tmp_entry_synced);
    fs.rename(&tmp, &manifest).unwrap();
    (tmp, manifest)
}

#[test]
fn a_kept_rename_keeps_only_the_synced_bytes_and_the_replaced_file_is_gone() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Kept);
    let (tmp, manifest) = manifest_switch(&fs, dir.path(), b"+lost", true);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&manifest).unwrap(), b"new");
    assert!(!tmp.exists());
    assert_eq!(listing(dir.path()), vec!["MANIFEST".to_string()]);
}

#[test]
fn an_undone_rename_brings_back_both_files() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Undone);
    let (tmp, manifest) = manifest_switch(&fs, dir.path(), b"+lost", true);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&manifest).unwrap(), b"old");
    assert_eq!(fs::read(&tmp).unwrap(), b"new");
}

#[test]
fn an_undone_rename_brings_back_the_replaced_file_with_its_synced_bytes() {
    let dir = crate::scratch_dirs::scratch_dir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Undone);
    file(&fs, &b, b"b synced", b"+lost", true);
    file(&fs, &a, b"a synced", b"+lost", true);
    fs.rename(&a, &b).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"a synced");
    assert_eq!(fs::read(&b).unwrap(), b"b synced");
}

#[test]
fn a_kept_rename_keeps_the_create_before_it() {
    // `MANIFEST.tmp`'s entry was never synced, but its create comes
    // before the kept rename in the directory's journal.
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Kept);
    let table = dir.path().join("000005.sst");
    file(&fs, &table, b"table", b"", false);
    let (_, manifest) = manifest_switch(&fs, dir.path(), b"", false);
    let later = dir.path().join("000006.sst");
    file(&fs, &later, b"later", b"", false);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&manifest).unwrap(), b"new");
    assert_eq!(fs::read(&table).unwrap(), b"table");
    assert!(
        !later.exists(),
        "created after the last rename, never synced"
    );
}

#[test]
fn an_undone_rename_drops_an_unsynced_source() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Undone);
    let (_, manifest) = manifest_switch(&fs, dir.path(), b"", false);
    fs.simulate_power_loss().unwrap();
    assert_eq!(listing(dir.path()), vec!["MANIFEST".to_string()]);
    assert_eq!(fs::read(&manifest).unwrap(), b"old");
}

#[test]
fn an_unlink_before_a_kept_rename_stays_done() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    fs.set_rename_fate(RenameFate::Kept);
    let wal = dir.path().join("000004.wal");
    file(&fs, &wal, b"wal", b"", true);
    fs.remove(&wal).unwrap();
    let (_, manifest) = manifest_switch(&fs, dir.path(), b"", true);
    fs.simulate_power_loss().unwrap();
    assert!(
        !wal.exists(),
        "the journal committed the unlink before the rename"
    );
    assert_eq!(fs::read(&manifest).unwrap(), b"new");
}

#[test]
fn an_unlink_before_a_rename_in_another_directory_is_free_to_come_back() {
    let base = crate::scratch_dirs::scratch_dir();
    let (one, two) = (base.path().join("one"), base.path().join("two"));
    let fs = FaultFs::new();
    fs.create_dir_all(&one).unwrap();
    fs.create_dir_all(&two).unwrap();
    // The directories themselves durable.
    fs.sync_dir(base.path()).unwrap();
    fs.set_revival(Revival::All);
    fs.set_rename_fate(RenameFate::Kept);
    let wal = one.join("000004.wal");
    file(&fs, &wal, b"wal", b"", true);
    fs.remove(&wal).unwrap();
    manifest_switch(&fs, &two, b"", true);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&wal).unwrap(), b"wal");
}

#[test]
fn an_unlink_after_a_kept_rename_comes_back_under_the_new_name() {
    // Revived, the renamed file's entry is as durable as the kept rename
    // made it.
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_revival(Revival::All);
    fs.set_rename_fate(RenameFate::Kept);
    let (tmp, manifest) = manifest_switch(&fs, dir.path(), b"+lost", false);
    fs.remove(&manifest).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&manifest).unwrap(), b"new");
    assert!(!tmp.exists());
}

#[test]
fn an_unlink_after_an_undone_rename_comes_back_whatever_the_revival() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_revival(Revival::Nothing);
    fs.set_rename_fate(RenameFate::Undone);
    let wal = dir.path().join("000004.wal");
    file(&fs, &wal, b"wal", b"", true);
    manifest_switch(&fs, dir.path(), b"", true);
    fs.remove(&wal).unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&wal).unwrap(), b"wal");
}

#[test]
fn the_kept_renames_of_a_directory_are_its_oldest() {
    for seed in 0..8 {
        let dir = crate::scratch_dirs::scratch_dir();
        let fs = FaultFs::new();
        fs.set_rename_fate(RenameFate::Seeded(seed));
        for n in 0..8 {
            let from = dir.path().join(format!("{n}.tmp"));
            file(&fs, &from, b"x", b"", true);
            fs.rename(&from, &dir.path().join(format!("{n}.new")))
                .unwrap();
        }
        fs.simulate_power_loss().unwrap();
        let kept: Vec<bool> = (0..8)
            .map(|n| dir.path().join(format!("{n}.new")).exists())
            .collect();
        let first_undone = kept.iter().position(|k| !k).unwrap_or(8);
        assert!(
            kept[first_undone..].iter().all(|k| !k),
            "seed {seed}: kept {kept:?}, not a prefix"
        );
        for n in first_undone..8 {
            assert!(dir.path().join(format!("{n}.tmp")).exists());
        }
    }
}

#[test]
fn a_seeded_rename_fate_varies_with_the_crash_point_and_repeats() {
    // The rename is the same operation each time; the power loss comes
    // after `extra` more operations in another directory.
    let kept = |extra: u64| {
        let base = crate::scratch_dirs::scratch_dir();
        let (dir, other) = (base.path().join("store"), base.path().join("other"));
        let fs = FaultFs::new();
        fs.create_dir_all(&dir).unwrap();
        fs.create_dir_all(&other).unwrap();
        // The directories themselves durable.
        fs.sync_dir(base.path()).unwrap();
        fs.set_rename_fate(RenameFate::Seeded(7));
        let (_, manifest) = manifest_switch(&fs, &dir, b"", true);
        let mut f = fs.create(&other.join("log")).unwrap();
        for _ in 0..extra {
            f.write_all(b".").unwrap();
        }
        drop(f);
        fs.simulate_power_loss().unwrap();
        fs::read(&manifest).unwrap() == b"new"
    };
    let fates: Vec<bool> = (0..32).map(kept).collect();
    let n = fates.iter().filter(|k| **k).count();
    assert!((4..28).contains(&n), "a coin flip each: {n} of 32 kept");
    let again: Vec<bool> = (0..32).map(kept).collect();
    assert_eq!(again, fates, "the same crash point, the same choice");
}

#[test]
fn the_default_rename_fate_is_seeded() {
    assert_eq!(
        FaultFs::new().state.lock().rename_fate,
        RenameFate::Seeded(0)
    );
}

#[test]
fn a_directory_fsync_makes_the_rename_durable() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Undone);
    let (tmp, manifest) = manifest_switch(&fs, dir.path(), b"", true);
    assert_eq!(fs.pending_renames(), 1);
    fs.sync_dir(dir.path()).unwrap();
    assert_eq!(fs.pending_renames(), 0);
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&manifest).unwrap(), b"new");
    assert!(!tmp.exists());
}

/// Bytes no zero-filled page can hold: byte `i` of a file is `i % 251 + 1`.
fn nonzero_bytes(from: usize, to: usize) -> Vec<u8> {
    (from..to).map(|i| (i % 251 + 1) as u8).collect()
}

/// A WAL-like file with `synced` bytes fsynced and `written` in all,
/// after a power loss under `fate`: its bytes.
fn after_power_loss(fate: UnsyncedFate, synced: usize, written: usize) -> Vec<u8> {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_unsynced_fate(fate);
    let path = dir.path().join("000007.wal");
    let (head, tail) = (nonzero_bytes(0, synced), nonzero_bytes(synced, written));
    file(&fs, &path, &head, &tail, true);
    fs.simulate_power_loss().unwrap();
    fs::read(&path).unwrap()
}

#[test]
fn unsynced_pages_each_keep_their_bytes_or_read_as_zeros() {
    units_each_keep_their_bytes_or_read_as_zeros(UnsyncedFate::Pages, 4096);
}

#[test]
fn unsynced_sectors_each_keep_their_bytes_or_read_as_zeros() {
    let torn_pages = units_each_keep_their_bytes_or_read_as_zeros(UnsyncedFate::Sectors, 512);
    assert!(torn_pages > 0, "no page was torn between its sectors");
}

/// Checks a power loss under `fate(seed)` for 64 seeds: each `unit` of
/// the unsynced bytes keeps its bytes or reads as zeros, both occur, the
/// length is cut or not, a kept unit is never cut, the same seed makes the
/// same choices. Returns how many 4 KiB pages held both kept and zeroed
/// bytes (a page torn inside).
fn units_each_keep_their_bytes_or_read_as_zeros(
    fate: fn(u64) -> UnsyncedFate,
    unit: usize,
) -> usize {
    // Unsynced from mid-unit: the first unit counts from 5,000 on, the
    // last is cut at 23,000.
    let (synced, written) = (5_000, 23_000);
    let whole = nonzero_bytes(0, written);
    let (mut kept, mut zeroed, mut cut, mut uncut) = (0, 0, 0, 0);
    let mut torn_pages = 0;
    for seed in 0..64 {
        let got = after_power_loss(fate(seed), synced, written);
        assert!(
            (synced..=written).contains(&got.len()),
            "seed {seed}: {} bytes",
            got.len()
        );
        assert_eq!(
            got[..synced],
            whole[..synced],
            "seed {seed}: synced bytes touched"
        );
        let mut start = synced;
        let mut last_kept = false;
        while start < got.len() {
            let end = ((start / unit + 1) * unit).min(got.len());
            let page = &got[start..end];
            last_kept = page == &whole[start..end];
            assert!(
                last_kept || page.iter().all(|&b| b == 0),
                "seed {seed}: bytes {start}..{end} neither written nor zeros"
            );
            if last_kept {
                kept += 1
            } else {
                zeroed += 1
            }
            start = end;
        }
        // Past the last persisted unit the file may run on in zeros, but
        // it ends where it was written when its last unit persisted.
        if got.len() == written {
            uncut += 1;
        } else {
            cut += 1;
            assert!(
                !last_kept || got.len().is_multiple_of(unit),
                "seed {seed}: cut at {} inside a persisted unit",
                got.len()
            );
        }
        for page in synced / 4096..got.len().div_ceil(4096) {
            let bytes = &got[(page * 4096).max(synced)..((page + 1) * 4096).min(got.len())];
            let zeros = bytes.contains(&0);
            torn_pages += usize::from(zeros && bytes.iter().any(|&b| b != 0));
        }
    }
    assert!(
        kept > 0 && zeroed > 0,
        "both fates occur: {kept} units kept, {zeroed} zeroed"
    );
    assert!(
        cut > 0 && uncut > 0,
        "both lengths occur: {cut} cut, {uncut} at the written length"
    );
    assert_eq!(
        after_power_loss(fate(3), synced, written),
        after_power_loss(fate(3), synced, written),
        "the same seed, the same units"
    );
    torn_pages
}

#[test]
fn a_fully_synced_file_is_unchanged_whatever_the_pages() {
    for seed in 0..16 {
        let got = after_power_loss(UnsyncedFate::Pages(seed), 9_000, 9_000);
        assert_eq!(got, nonzero_bytes(0, 9_000), "seed {seed}");
    }
}

#[test]
fn truncated_cuts_back_to_the_synced_bytes_and_is_the_default() {
    assert_eq!(
        FaultFs::new().state.lock().unsynced_fate,
        UnsyncedFate::Truncated
    );
    let got = after_power_loss(UnsyncedFate::Truncated, 5_000, 23_000);
    assert_eq!(got, nonzero_bytes(0, 5_000));
}
