//! Writes `tests/fixtures/golden-vN.sst`, the checked-in table of format
//! version N whose bytes must keep decoding (`tests/golden.rs`). Run only
//! for a deliberate new format version, never to paper over an accidental
//! change: `cargo run -p bloomlsm-sstable --example write_golden_table --
//! N` (N = 2 by default, the version this build writes).

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::{EntryKind, TableBuilder, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let version: u32 = match std::env::args().nth(1) {
        Some(v) => v.parse()?,
        None => bloomlsm_sstable::format::FORMAT_VERSION,
    };
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/golden-v{version}.sst"));
    let file = std::fs::File::create(&path)?;
    let options = TableOptions {
        block_size: 256,
        filter_kind: FilterKind::Blocked,
        format_version: version,
        ..TableOptions::default()
    };
    let mut b = TableBuilder::new(file, &path, options);
    for (key, seq, kind, value) in golden_entries() {
        b.add(&key, seq, kind, &value)?;
    }
    let summary = b.finish()?;
    println!("wrote {} ({} bytes)", path.display(), summary.file_size);
    Ok(())
}

/// The entries of the golden table (also in `tests/golden.rs`).
fn golden_entries() -> Vec<(Vec<u8>, u64, EntryKind, Vec<u8>)> {
    let mut v = Vec::new();
    for i in 0..100u64 {
        let key = format!("golden{i:04}").into_bytes();
        if i % 10 == 3 {
            v.push((key.clone(), 1000 + i, EntryKind::Delete, Vec::new()));
        }
        v.push((
            key,
            i + 1,
            EntryKind::Put,
            format!("value-{i}").into_bytes(),
        ));
    }
    v
}
