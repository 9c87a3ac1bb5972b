//! `inspect --verify` reads every entry of a table back. Plain `inspect`
//! reads the filter, index and properties blocks only, so a damaged data
//! block passes it; `--verify` refuses it naming the file, the block and
//! its offset, and on a sound table reports every entry read and no key
//! its filter rules out (a filter that rules out stored keys is reported,
//! then refused).
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::{Command, Output};

fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["--json", "inspect"])
        .args(args)
        .output()
        .unwrap()
}

/// One table of 3,000 keys with a third deleted and a snapshot's older
/// versions kept (so keys have several entries).
fn table() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomlsm::Db::open(dir.path(), bloomlsm::Options::default()).unwrap();
    for i in 0..3000 {
        db.put(format!("key{i:05}").as_bytes(), b"first").unwrap();
    }
    let snapshot = db.snapshot();
    for i in (0..3000).step_by(3) {
        db.delete(format!("key{i:05}").as_bytes()).unwrap();
        db.put(format!("key{:05}", i + 1).as_bytes(), b"second")
            .unwrap();
    }
    db.flush().unwrap();
    drop(snapshot);
    db.close().unwrap();
    let table = bloomlsm_tests::only_table(dir.path());
    (dir, table)
}

#[test]
fn a_sound_table_reads_back_whole() {
    let (_dir, table) = table();
    let out = inspect(&[table.to_str().unwrap(), "--verify"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verify = &v["verify"];
    assert_eq!(verify["status"], "ok", "{verify}");
    assert_eq!(verify["entries_read"], v["properties"]["entries"], "{v}");
    assert_eq!(verify["entries_read"], 5000, "{v}");
    assert_eq!(verify["keys_checked_against_filter"], 3000, "{v}");
    assert_eq!(verify["filter_false_negatives"], 0, "{v}");
}

#[test]
fn a_damaged_data_block_passes_inspect_but_not_verify() {
    let (_dir, table) = table();
    let out = inspect(&[table.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // A byte inside the last data block (its 5-byte trailer ends right
    // where the filter block begins).
    let filter_offset = v["footer"]["filter"]["offset"].as_u64().unwrap() as usize;
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[filter_offset - 20] ^= 0x40;
    std::fs::write(&table, bytes).unwrap();
    assert!(inspect(&[table.to_str().unwrap()]).status.success());
    let out = inspect(&[table.to_str().unwrap(), "--verify"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("data block at offset"), "{err}");
    assert!(
        err.contains(table.file_name().unwrap().to_str().unwrap()),
        "{err}"
    );
}

/// The table's bytes with `edit` applied and every checksum made right
/// again, so the edit reaches the decoders (and `--verify`).
fn resealed(table: &std::path::Path, edit: impl Fn(&mut Vec<u8>, &serde_json::Value)) {
    use bloomlsm_sstable::fuzzing::{blocks, reseal};
    let out = inspect(&[table.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut bytes = std::fs::read(table).unwrap();
    let handles = blocks(&bytes);
    edit(&mut bytes, &v);
    reseal(&mut bytes, &handles, &[]);
    std::fs::write(table, bytes).unwrap();
}

fn verify_error(table: &std::path::Path) -> String {
    let out = inspect(&[table.to_str().unwrap(), "--verify"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn properties_that_disagree_with_the_entries_are_named() {
    let (_dir, table) = table();
    resealed(&table, |bytes, v| {
        // The properties block: format version (u32), then entries (u64).
        let at = v["footer"]["properties"]["offset"].as_u64().unwrap() as usize + 4;
        bytes[at] ^= 0x01;
    });
    let err = verify_error(&table);
    assert!(
        err.contains("entries read is 5000; the properties block says 5001"),
        "{err}"
    );
}

#[test]
fn a_filter_that_rules_out_stored_keys_is_counted() {
    let (_dir, table) = table();
    resealed(&table, |bytes, v| {
        // A filter of the same kind and size, with its own checksum right,
        // built from the table's first 1,500 keys and 1,500 keys it does
        // not hold: the other 1,500 stored keys are (almost all) ruled out.
        use bloomlsm_filter::{AnyFilter, KeyHash};
        let f = &v["footer"]["filter"];
        let offset = f["offset"].as_u64().unwrap() as usize;
        let size = f["size"].as_u64().unwrap() as usize;
        let kind = AnyFilter::from_bytes(&bytes[offset..offset + size])
            .unwrap()
            .kind();
        let hashes: Vec<KeyHash> = (0..1500)
            .map(|i| KeyHash::of(format!("key{i:05}").as_bytes()))
            .chain((0..1500).map(|i| KeyHash::of(format!("other{i}").as_bytes())))
            .collect();
        let wrong = AnyFilter::build(kind, &hashes, 10.0).unwrap().to_bytes();
        assert_eq!(wrong.len(), size);
        bytes[offset..offset + size].copy_from_slice(&wrong);
    });
    // The report is printed (the figures are seen), then the damage is
    // an error: a get of a key the filter rules out answers not found.
    // (Before, verify said status ok and exited 0.)
    let out = inspect(&[table.to_str().unwrap(), "--verify"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let misses = v["verify"]["filter_false_negatives"].as_u64().unwrap();
    assert!(misses > 1400 && misses <= 1500, "{v}");
    assert_eq!(v["verify"]["keys_checked_against_filter"], 3000, "{v}");
    assert_eq!(v["verify"]["status"], "filter false negatives", "{v}");
    let err = String::from_utf8(out.stderr).unwrap();
    let name = table.file_name().unwrap().to_str().unwrap();
    assert!(
        err.starts_with("error: corrupt table ") && err.contains(name),
        "{err}"
    );
    assert!(
        err.contains(&format!("its filter rules out {misses} of its 3000 keys")),
        "{err}"
    );
    // Every error names the file, the block and its offset: here the
    // filter block's.
    let at = v["footer"]["filter"]["offset"].as_u64().unwrap();
    assert!(
        err.contains(&format!("filter block at offset {at}")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // In text too: the report on stdout, the same line on stderr.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args(["inspect", table.to_str().unwrap(), "--verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("filter false negatives"), "{text}");
    assert_eq!(String::from_utf8(out.stderr).unwrap(), err);
}

#[test]
fn entries_out_of_order_are_named() {
    let (_dir, table) = table();
    resealed(&table, |bytes, _| {
        // The first entry of the first data block: three one-byte varints
        // (shared 0, unshared, value length), then its key "key00000...".
        assert_eq!(&bytes[3..6], b"key");
        bytes[3] = b'z';
    });
    let err = verify_error(&table);
    assert!(err.contains("is not after the one before it"), "{err}");
}
