//! Which operations a sweep can fail, and directories made through the
//! fault file system: one operation per directory, gone at a power loss
//! with all they hold unless their parent was fsynced.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

/// Every kind of mutating operation counts as one operation (an
/// overwrite as two), and `fail_only_op` at its number fails it with
/// nothing changed: a crash sweep over `0..ops()` visits each.
#[test]
fn every_mutating_operation_counts_and_fails_changing_nothing() {
    let dir = crate::scratch_dirs::scratch_dir();
    let d = dir.path();
    let (a, b, sub) = (d.join("a"), d.join("b"), d.join("x/y"));
    // (what, the operations it counts (an `append_at` opening the file
    // first for a write or a sync), the operation itself, what is true
    // after it succeeded and false after it failed).
    type Step<'a> = (
        &'a str,
        u64,
        Box<dyn Fn(&FaultFs) -> bool + 'a>,
        Box<dyn Fn() -> bool + 'a>,
    );
    let steps: Vec<Step> = vec![
        (
            "create",
            1,
            Box::new(|fs| fs.create(&a).is_ok()),
            Box::new(|| a.exists()),
        ),
        (
            "write",
            2,
            Box::new(|fs| fs.append_at(&a, 0).unwrap().write_all(b"1").is_ok()),
            Box::new(|| fs::read(&a).unwrap() == b"1"),
        ),
        (
            "sync",
            2,
            Box::new(|fs| fs.append_at(&a, 1).unwrap().sync().is_ok()),
            Box::new(|| true),
        ),
        (
            "append_at",
            1,
            Box::new(|fs| fs.append_at(&a, 0).is_ok()),
            Box::new(|| fs::read(&a).unwrap().is_empty()),
        ),
        (
            "overwrite",
            2,
            Box::new(|fs| fs.overwrite(&a, 0, b"2").is_ok()),
            Box::new(|| fs::read(&a).unwrap() == b"2"),
        ),
        (
            "rename",
            1,
            Box::new(|fs| fs.rename(&a, &b).is_ok()),
            Box::new(|| b.exists() && !a.exists()),
        ),
        (
            "remove",
            1,
            Box::new(|fs| fs.remove(&b).is_ok()),
            Box::new(|| !b.exists()),
        ),
        (
            "sync_dir",
            1,
            Box::new(|fs| fs.sync_dir(d).is_ok()),
            Box::new(|| true),
        ),
        (
            "create_dir_all",
            2,
            Box::new(|fs| fs.create_dir_all(&sub).is_ok()),
            Box::new(|| sub.is_dir()),
        ),
        (
            "remove_dir",
            1,
            Box::new(|fs| fs.remove_dir(&sub).is_ok()),
            Box::new(|| !sub.exists()),
        ),
    ];
    // The appends and overwrites above need `a` as the last step left it.
    let setup = |upto: usize, fs: &FaultFs| {
        for (_, _, step, _) in &steps[..upto] {
            assert!(step(fs));
        }
    };
    for (i, (what, count, step, done)) in steps.iter().enumerate() {
        let _ = fs::remove_dir_all(d.join("x"));
        for f in [&a, &b] {
            let _ = fs::remove_file(f);
        }
        let fs = FaultFs::new();
        setup(i, &fs);
        let before = fs.ops();
        // Its first operation fails (a write's or a sync's, after the
        // `append_at` opening the file): nothing done.
        let opens = u64::from(matches!(*what, "write" | "sync"));
        fs.fail_only_op(before + opens);
        assert!(!step(&fs), "{what}: not failed");
        assert_eq!(fs.ops(), before + opens + 1, "{what}");
        if *what != "sync" && *what != "sync_dir" {
            assert!(!done(), "{what}: failed, but done");
        }
        let before = fs.ops();
        assert!(step(&fs), "{what}: failed again");
        assert!(done(), "{what}");
        assert_eq!(fs.ops() - before, *count, "{what}: operations counted");
    }
}

#[test]
fn a_directory_made_part_way_keeps_its_shallower_ones() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let deep = dir.path().join("a/b/c");
    fs.fail_from_op(fs.ops() + 2);
    assert!(fs.create_dir_all(&deep).is_err());
    assert!(dir.path().join("a/b").is_dir());
    assert!(!dir.path().join("a/b/c").exists());
}

#[test]
fn a_directory_whose_parent_was_never_fsynced_is_gone_with_its_files() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let store = dir.path().join("a/store");
    fs.create_dir_all(&store).unwrap();
    // `a/store`'s entry is made durable, `a`'s is not: both go.
    fs.sync_dir(&dir.path().join("a")).unwrap();
    file_in(&fs, &store.join("MANIFEST"));
    fs.simulate_power_loss().unwrap();
    assert!(!dir.path().join("a").exists());
}

#[test]
fn a_directory_whose_parents_were_fsynced_stays_with_its_durable_files() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    let store = dir.path().join("a/store");
    fs.create_dir_all(&store).unwrap();
    fs.sync_dir(dir.path()).unwrap();
    fs.sync_dir(&dir.path().join("a")).unwrap();
    file_in(&fs, &store.join("MANIFEST"));
    fs.simulate_power_loss().unwrap();
    assert_eq!(fs::read(store.join("MANIFEST")).unwrap(), b"m");
}

#[test]
fn a_kept_rename_in_the_parent_keeps_a_directory_made_before_it() {
    let dir = crate::scratch_dirs::scratch_dir();
    let fs = FaultFs::new();
    fs.set_rename_fate(RenameFate::Kept);
    let sub = dir.path().join("sub");
    fs.create_dir_all(&sub).unwrap();
    let tmp = dir.path().join("t");
    let mut f = fs.create(&tmp).unwrap();
    f.sync().unwrap();
    fs.rename(&tmp, &dir.path().join("u")).unwrap();
    fs.simulate_power_loss().unwrap();
    assert!(sub.is_dir());
}

/// A file in `path` holding "m", fsynced, its entry durable.
fn file_in(fs: &FaultFs, path: &Path) {
    let mut f = fs.create(path).unwrap();
    f.write_all(b"m").unwrap();
    f.sync().unwrap();
    fs.sync_dir(path.parent().unwrap()).unwrap();
}

/// `create_dir` is one operation; a directory it finds there (another
/// caller's) is an `AlreadyExists` error and is not this file system's to
/// lose at a power loss, where one it made, its parent never fsynced, is.
#[test]
fn a_directory_found_there_is_not_made_and_survives_a_power_loss() {
    let dir = crate::scratch_dirs::scratch_dir();
    let (theirs, mine) = (dir.path().join("theirs"), dir.path().join("mine"));
    fs::create_dir(&theirs).unwrap();
    let fs = FaultFs::new();
    let before = fs.ops();
    let e = fs.create_dir(&theirs).unwrap_err();
    assert_eq!(e.source.kind(), io::ErrorKind::AlreadyExists);
    fs.create_dir(&mine).unwrap();
    assert_eq!(fs.ops(), before + 2);
    fs.simulate_power_loss().unwrap();
    assert!(theirs.is_dir());
    assert!(!mine.exists());
}
