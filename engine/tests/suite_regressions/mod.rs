//! The check each crate's test suite with proptest tests runs on itself:
//! every regression file of its tests is where proptest reads it, so the
//! failures kept in it are replayed first. A suite's directory holds
//! `main.rs`, and proptest's default persistence (`SourceParallel`) then
//! reads the seeds of `tests/SUITE/NAME.rs` from
//! `tests/proptest-regressions/NAME.txt`, not from
//! `NAME.proptest-regressions` beside it (where a test of its own binary,
//! `tests/NAME.rs`, had them): a file left there is never read, and its
//! shrunk failures stop being tried.

use std::path::{Path, PathBuf};

use proptest::test_runner::{Config, FailurePersistence, FileFailurePersistence};

/// Panics naming each regression file of the suite in `suite` (beside a
/// test, or in `../proptest-regressions`) whose seeds the persistence of
/// its test does not load, all of them: a test that names
/// `FileFailurePersistence::WithSource` in its text reads
/// `NAME.proptest-regressions` beside it, any other proptest's default.
pub fn assert_every_regression_file_is_read(suite: &Path) {
    let mut kept: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (dir, extension) in [
        (suite.to_path_buf(), "proptest-regressions"),
        (suite.join("../proptest-regressions"), "txt"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let file = entry.unwrap().path();
            if file.extension().is_some_and(|x| x == extension) {
                let source = suite.join(file.file_stem().unwrap()).with_extension("rs");
                kept.push((file, source));
            }
        }
    }
    let mut unread = Vec::new();
    for (file, source) in &kept {
        let text = std::fs::read_to_string(file).unwrap();
        let seeds = text.lines().filter(|l| l.starts_with("cc ")).count();
        let test = std::fs::read_to_string(source).unwrap_or_default();
        let persistence: Box<dyn FailurePersistence> =
            if test.contains("FileFailurePersistence::WithSource(") {
                Box::new(FileFailurePersistence::WithSource("proptest-regressions"))
            } else {
                Config::default().failure_persistence.unwrap()
            };
        let source: &'static str = source.to_str().unwrap().to_owned().leak();
        let read = persistence.load_persisted_failures2(Some(source)).len();
        if read != seeds {
            unread.push(format!(
                "{}: {read} of its {seeds} seeds read for {source}",
                file.display()
            ));
        }
    }
    assert!(
        unread.is_empty(),
        "regression files proptest does not read: {unread:#?}"
    );
}
