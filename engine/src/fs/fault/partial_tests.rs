//! A failing write that applies a prefix of its bytes first
//! ([`PartialWrite`]): what the file holds after it, what a power loss
//! leaves of it, and that every other failure still changes nothing.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

/// A file at `path` holding `synced` (fsynced, entry durable), its
/// writer, and the number of the next operation.
fn synced_file(fs: &FaultFs, path: &Path, synced: &[u8]) -> (Box<dyn WritableFile>, u64) {
    let mut f = fs.create(path).unwrap();
    f.write_all(synced).unwrap();
    f.sync().unwrap();
    fs.sync_dir(path.parent().unwrap()).unwrap();
    (f, fs.ops())
}

#[test]
fn prefixes_are_never_the_whole_write() {
    for len in [0usize, 1, 2, 7, 4096, 4097, 10_000] {
        for offset in [0u64, 1, 4095, 4096, 8000] {
            for op in 0..50 {
                for mode in [
                    PartialWrite::Nothing,
                    PartialWrite::Half,
                    PartialWrite::ToPage,
                    PartialWrite::Seeded(op ^ 0x55),
                ] {
                    let n = mode.prefix(offset, len, op);
                    assert!(n < len.max(1), "{mode:?}: {n} of {len}");
                }
            }
        }
    }
    assert_eq!(PartialWrite::Half.prefix(0, 9, 0), 4);
    // From 4000, 200 bytes cross the boundary at 4096: 96 bytes reach it.
    assert_eq!(PartialWrite::ToPage.prefix(4000, 200, 0), 96);
    // Ending exactly at a page boundary: the one before the end counts.
    assert_eq!(PartialWrite::ToPage.prefix(0, 8192, 0), 4096);
    assert_eq!(PartialWrite::ToPage.prefix(10, 100, 0), 0);
    // The seeded draws take many lengths, not one.
    let lens: std::collections::HashSet<usize> = (0..64)
        .map(|op| PartialWrite::Seeded(3).prefix(0, 1000, op))
        .collect();
    assert!(lens.len() > 32, "{lens:?}");
}

#[test]
fn a_failed_write_leaves_its_prefix_and_the_next_write_lands_after_it() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_partial_writes(PartialWrite::Half);
    let path = dir.path().join("000007.wal");
    let (mut f, next) = synced_file(&fs, &path, b"synced");
    fs.fail_only_op(next);
    let err = f.write_all(b"0123456789").unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), b"synced01234");
    // The descriptor's position is past the prefix, as after a short
    // write: the next write follows it.
    f.write_all(b"next").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"synced01234next");
    f.sync().unwrap();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"synced01234next");
}

#[test]
fn a_power_loss_cuts_an_unsynced_prefix_under_truncation() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_partial_writes(PartialWrite::Seeded(9));
    let path = dir.path().join("000007.sst");
    let (mut f, next) = synced_file(&fs, &path, b"synced");
    fs.fail_from_op(next);
    assert!(f.write_all(&[7u8; 5000]).is_err());
    let len = fs::metadata(&path).unwrap().len();
    let want = 6 + PartialWrite::Seeded(9).prefix(6, 5000, next) as u64;
    assert_eq!(len, want);
    assert!(len > 6, "the seed was chosen to apply a prefix");
    fs.heal();
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"synced");
}

#[test]
fn a_power_loss_settles_the_prefix_as_unsynced_pages() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = dir.path().join("000007.wal");
    let mut kept_some = false;
    let mut lost_some = false;
    for seed in 0..16 {
        let fs = FaultFs::new();
        fs.set_partial_writes(PartialWrite::ToPage);
        fs.set_unsynced_fate(UnsyncedFate::Pages(seed));
        let (mut f, next) = synced_file(&fs, &path, &[1u8; 100]);
        fs.fail_only_op(next);
        assert!(f.write_all(&[2u8; 3 * 4096]).is_err());
        // Up to the last page boundary inside the write: 12,288 bytes.
        assert_eq!(fs::metadata(&path).unwrap().len(), 3 * 4096);
        drop(f);
        fs.simulate_power_loss().unwrap();
        let bytes = fs::read(&path).unwrap();
        assert!(bytes.len() >= 100 && bytes.len() <= 3 * 4096);
        assert_eq!(&bytes[..100], &[1u8; 100], "synced bytes touched");
        assert!(bytes[100..].iter().all(|&b| b == 0 || b == 2));
        kept_some |= bytes[100..].contains(&2);
        lost_some |= bytes.len() < 3 * 4096 || bytes[100..].contains(&0);
    }
    assert!(kept_some && lost_some);
}

#[test]
fn other_failures_still_change_nothing() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_partial_writes(PartialWrite::Half);
    let path = dir.path().join("000007.wal");
    let (mut f, next) = synced_file(&fs, &path, b"synced");
    // A failed overwrite in place writes nothing.
    fs.fail_only_op(next);
    assert!(fs.overwrite(&path, 0, b"SYNCED").is_err());
    assert_eq!(fs::read(&path).unwrap(), b"synced");
    // A failed sync does not make the bytes before it durable.
    f.write_all(b"more").unwrap();
    fs.fail_only_op(fs.ops());
    assert!(f.sync().is_err());
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"synced");
    // A failed create makes no file.
    let other = dir.path().join("000008.sst");
    fs.fail_only_op(fs.ops());
    assert!(fs.create(&other).is_err());
    assert!(!other.exists());
}
