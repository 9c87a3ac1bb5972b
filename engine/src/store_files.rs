//! What a test sees of a store directory: its files by extension.

use std::path::Path;

/// The names of the files in `dir` whose extension is `ext` (`"sst"`,
/// `"wal"`), sorted.
pub(crate) fn files_named(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}
