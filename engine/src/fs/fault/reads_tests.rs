//! Injected read faults: which opens and reads fail, and that a failed
//! one fails as the OS's `EIO`, naming the path at the open.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use super::*;

fn store_file(dir: &Path) -> PathBuf {
    let path = dir.join("000007.sst");
    fs::write(&path, b"0123456789").unwrap();
    path
}

#[test]
fn only_the_nth_read_fails_and_the_next_try_works() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = store_file(dir.path());
    let fs = FaultFs::new();
    let file = fs.open_read(&path).unwrap();
    let mut buf = [0u8; 4];
    file.read_exact_at(&mut buf, 0).unwrap();
    fs.fail_reads(ReadFault::Only(fs.reads() + 1));
    file.read_exact_at(&mut buf, 2).unwrap();
    assert_eq!(&buf, b"2345");
    let e = file.read_exact_at_bulk(&mut buf, 4).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    file.read_exact_at_bulk(&mut buf, 4).unwrap();
    assert_eq!(&buf, b"4567");
    assert_eq!((fs.reads(), fs.faults_injected()), (4, 1));
}

#[test]
fn reads_fail_from_the_nth_on_until_healed() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = store_file(dir.path());
    let fs = FaultFs::new();
    let file = fs.open_read(&path).unwrap();
    let mut buf = [0u8; 2];
    fs.fail_reads(ReadFault::From(1));
    file.read_exact_at(&mut buf, 0).unwrap();
    for _ in 0..3 {
        assert!(file.read_exact_at(&mut buf, 0).is_err());
    }
    fs.heal();
    file.read_exact_at(&mut buf, 8).unwrap();
    assert_eq!((&buf, fs.faults_injected()), (b"89", 3));
}

#[test]
fn a_failed_read_open_names_the_path_and_counts_every_kind_of_open() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = store_file(dir.path());
    let fs = FaultFs::new();
    fs.fail_read_opens(ReadFault::Only(1));
    fs.open_read(&path).unwrap();
    let e = fs.read_all(&path).unwrap_err();
    assert_eq!(
        (e.path.as_path(), e.source.raw_os_error()),
        (path.as_path(), Some(libc::EIO))
    );
    assert_eq!(fs.read_all(&path).unwrap(), b"0123456789");
    fs.fail_read_opens(ReadFault::From(0));
    assert!(fs.open_read_direct(&path).is_err());
    assert!(fs.open_read(&path).is_err());
    assert_eq!((fs.read_opens(), fs.faults_injected()), (5, 3));
}

#[test]
fn a_seeded_fault_fails_some_reads_and_the_same_ones_each_time() {
    let dir = crate::scratch_dirs::scratch_dir();
    let path = store_file(dir.path());
    let failed = |seed| {
        let fs = FaultFs::new();
        let file = fs.open_read(&path).unwrap();
        fs.fail_reads(ReadFault::Seeded { seed, one_in: 4 });
        let mut buf = [0u8; 1];
        (0..200)
            .map(|_| file.read_exact_at(&mut buf, 0).is_err())
            .collect::<Vec<_>>()
    };
    let a = failed(1);
    let n = a.iter().filter(|&&f| f).count();
    assert!((20..80).contains(&n), "{n} of 200");
    assert_eq!(a, failed(1));
    assert_ne!(a, failed(2));
}
