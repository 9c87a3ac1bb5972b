//! The check every crate's test suite runs on itself: each test file of
//! the suite's directory is a module of its `main.rs`. A file left out
//! would compile into nothing, and its tests would pass by never running.

use std::collections::BTreeSet;
use std::path::Path;

/// Panics naming each test file (`NAME.rs`) or test directory
/// (`NAME/mod.rs`) in `dir` that `main_rs`, the text of the suite's
/// `main.rs`, does not declare as `mod NAME;`.
pub fn assert_every_file_is_a_module(dir: &Path, main_rs: &str) {
    let declared: BTreeSet<&str> = main_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut files = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let module = if path.is_dir() && path.join("mod.rs").exists() {
            name.to_owned()
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem.to_owned()
        } else {
            continue;
        };
        if module == "main" {
            continue;
        }
        files += 1;
        if !declared.contains(module.as_str()) {
            missing.push(module);
        }
    }
    missing.sort();
    assert!(files > 0, "no test file in {}", dir.display());
    assert!(
        missing.is_empty(),
        "test files in {} that its main.rs does not declare (add `mod NAME;`): {missing:?}",
        dir.display()
    );
}
