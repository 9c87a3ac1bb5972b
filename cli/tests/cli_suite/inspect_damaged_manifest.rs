//! `inspect` reads a table at the size its store's manifest records; when
//! that manifest is damaged it reads the whole file instead and says why,
//! rather than refusing to show any table of a store being diagnosed.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use std::process::Command;

#[test]
fn a_table_beside_a_damaged_manifest_is_inspected_whole() {
    let (dir, table) =
        bloomlsm_tests::store_with_one_table((0..1000).map(|i| format!("key{i:04}")));
    let manifest = dir.path().join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&manifest, bytes).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_bloomlsm"))
        .args([
            "--json",
            "inspect",
            table.to_str().unwrap(),
            "--probes",
            "10",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["filter"]["items"], 1000);
    let why = v["size_from"].as_str().unwrap();
    assert!(
        why.contains("MANIFEST") && why.contains("checksum"),
        "{why}"
    );
}
