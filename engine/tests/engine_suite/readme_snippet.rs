//! README.md's "Using it" snippet, compiled and run. `using_it` holds it
//! verbatim between the markers, but for the store's path (a temporary
//! directory here, `"/tmp/my-store"` there); `readme_holds_this_snippet`
//! fails when the README's copy and this one drift apart.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;

/// The path expression the README's copy opens the store with.
const README_PATH: &str = "\"/tmp/my-store\"";

#[allow(unused_variables)] // The snippet names what a caller would use.
#[rustfmt::skip] // Laid out as the README lays it out.
fn using_it(path: &Path) -> bloomlsm::Result<()> {
    // README SNIPPET START
    use bloomlsm::{Db, Options, WriteBatch};

    let db = Db::open(path, Options::default())?;
    db.put(b"key", b"value")?;
    assert_eq!(db.get(b"key")?, Some(b"value".to_vec()));
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1").delete(b"key");
    db.write(batch)?;                          // atomic
    for pair in db.scan(b"a".as_slice()..)? { let (k, v) = pair?; }
    let snap = db.snapshot();                  // consistent view
    let (value, trace) = db.get_traced(b"zz")?; // every table consulted, each filter's verdict
    let stats = db.stats();                    // reads saved, observed FPR, per level
    db.close()?;
    // README SNIPPET END
    Ok(())
}

#[test]
fn the_snippet_runs() {
    let dir = tempfile::tempdir().unwrap();
    using_it(dir.path()).unwrap();
    // What it wrote is there after its close.
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    assert_eq!(db.get(b"key").unwrap(), None);
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.close().unwrap();
}

#[test]
fn readme_holds_this_snippet() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme.find("\n## Using it\n").expect("a Using it section")..];
    let block = &section[section.find("```rust\n").expect("a rust block") + "```rust\n".len()..];
    let block = &block[..block.find("```").unwrap()];

    let this = include_str!("readme_snippet.rs");
    let start = this.find("// README SNIPPET START\n").unwrap() + "// README SNIPPET START\n".len();
    let end = this.find("    // README SNIPPET END").unwrap();
    let snippet: String = this[start..end]
        .lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line))
        .map(|line| line.replace("Db::open(path,", &format!("Db::open({README_PATH},")))
        .map(|line| line + "\n")
        .collect();
    assert_eq!(
        block, snippet,
        "README.md's snippet and engine/tests/engine_suite/readme_snippet.rs differ"
    );
}
