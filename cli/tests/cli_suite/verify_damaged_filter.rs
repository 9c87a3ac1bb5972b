//! `inspect --verify` on a table whose filter block is damaged (a flipped
//! byte, so the block's checksum fails) refuses the table: exit status 2
//! and one line naming the file, the filter block and its offset. Before,
//! it printed `status ok` and exited 0 (the 429 flips of a filter block and
//! its trailer were the only single-byte flips of a table it passed), as
//! the filter section's `status unusable` was the only sign of the damage.
//! Plain `inspect` still exits 0 and shows the filter `unusable` with its
//! reason (it reports what the filter is; the store reads around such a
//! filter). Neither command changes the file.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::path::Path;
use std::process::{Command, Output};

fn inspect(table: &Path, verify: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bloomlsm"));
    command
        .args(["--json", "inspect", "--probes", "10"])
        .arg(table);
    if verify {
        command.arg("--verify");
    }
    command.output().unwrap()
}

/// A store of one table of 2,000 keys; the filter block's offset and size.
fn table() -> (tempfile::TempDir, std::path::PathBuf, usize, usize) {
    let (dir, table) = bloomlsm_tests::store_with_one_table((0..2000).map(|i| format!("k{i:05}")));
    let v: serde_json::Value = serde_json::from_slice(&inspect(&table, false).stdout).unwrap();
    let f = &v["footer"]["filter"];
    let offset = f["offset"].as_u64().unwrap() as usize;
    let size = f["size"].as_u64().unwrap() as usize;
    assert!(size > 0, "{v}");
    (dir, table, offset, size)
}

/// Every tenth byte of the filter block, and each of its 5-byte trailer.
#[test]
fn verify_refuses_a_damaged_filter_block_naming_it() {
    let (_dir, table, offset, size) = table();
    let sound = std::fs::read(&table).unwrap();
    let name = table.file_name().unwrap().to_str().unwrap().to_string();
    let flips = (offset..offset + size)
        .step_by(10)
        .chain(offset + size..offset + size + 5);
    for at in flips {
        let mut bytes = sound.clone();
        bytes[at] ^= 0x10;
        std::fs::write(&table, &bytes).unwrap();

        let out = inspect(&table, true);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "flip at {at}: {out:?}");
        assert!(out.stdout.is_empty(), "flip at {at}: {out:?}");
        assert!(
            err.starts_with("error: corrupt table "),
            "flip at {at}: {err}"
        );
        assert!(err.contains(&name), "flip at {at}: {err}");
        assert!(
            err.contains(&format!("filter block at offset {offset}")),
            "flip at {at}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "flip at {at}: {err}");

        // Plain inspect reports the filter unusable, with the same reason.
        let out = inspect(&table, false);
        assert!(out.status.success(), "flip at {at}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["filter"]["status"], "unusable", "flip at {at}: {v}");
        let reason = v["filter"]["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("filter block at offset {offset}")),
            "flip at {at}: {v}"
        );

        assert_eq!(
            std::fs::read(&table).unwrap(),
            bytes,
            "flip at {at}: file changed"
        );
    }
}

/// The sound table still verifies.
#[test]
fn a_sound_filter_verifies() {
    let (_dir, table, _, _) = table();
    let out = inspect(&table, true);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verify"]["status"], "ok", "{v}");
    assert_eq!(v["verify"]["keys_checked_against_filter"], 2000, "{v}");
    assert_eq!(v["verify"]["filter_false_negatives"], 0, "{v}");
}
