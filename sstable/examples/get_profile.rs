//! A fixed workload for profiling table gets (`valgrind --tool=callgrind`):
//! builds a table of 200k entries, then runs cached present-key gets and
//! filter-negative absent-key gets.

use std::sync::Arc;

use bloomlsm_filter::{FilterKind, KeyHash};
use bloomlsm_sstable::{BlockCache, EntryKind, Table, TableBuilder, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("bloomlsm-get-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("t.sst");
    let file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let mut b = TableBuilder::new(
        file,
        &path,
        TableOptions {
            filter_kind: FilterKind::Blocked,
            ..TableOptions::default()
        },
    );
    for i in 0..200_000u64 {
        b.add(
            format!("key{i:012}").as_bytes(),
            i + 1,
            EntryKind::Put,
            &[7u8; 100],
        )?;
    }
    b.finish()?;
    let table = Table::open_path(&path, 1, Some(Arc::new(BlockCache::new(64 << 20))))?;
    let keys: Vec<(Vec<u8>, KeyHash)> = (0..2000u64)
        .map(|i| {
            let k = format!("key{:012}", i * 97).into_bytes();
            let h = KeyHash::of(&k);
            (k, h)
        })
        .collect();
    let mut found = 0;
    for _ in 0..20 {
        for (k, h) in &keys {
            if matches!(
                table.get(k, *h, u64::MAX >> 8)?.outcome,
                bloomlsm_sstable::Outcome::Found { .. }
            ) {
                found += 1;
            }
        }
    }
    println!("{found} found");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
