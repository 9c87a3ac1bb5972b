//! What a test sees of the descriptors this process holds on a store's
//! files (Linux: `/proc/self/fd`). Only descriptors on files of `dir` are
//! counted, so tests running beside each other do not disturb the count.

use std::path::Path;

/// The files of `dir` this process holds open, sorted; an unlinked one
/// ends with `" (deleted)"`. Empty where `/proc/self/fd` is missing.
pub fn descriptors_in(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut open: Vec<String> = fds
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.starts_with(&dir))
        .filter_map(|t| Some(t.file_name()?.to_string_lossy().into_owned()))
        .collect();
    open.sort();
    open
}

/// Those of [`descriptors_in`] that name an unlinked file.
pub fn deleted_in(dir: &Path) -> Vec<String> {
    descriptors_in(dir)
        .into_iter()
        .filter(|n| n.ends_with(" (deleted)"))
        .collect()
}
