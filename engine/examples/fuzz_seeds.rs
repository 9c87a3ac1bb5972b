//! Seeds for the fuzz targets, made by the code that writes the formats
//! (no bytes by hand): `make fuzz` runs this before fuzzing, so each
//! decoder target starts from valid encodings instead of nothing.
//!
//! A small store of each table filter kind (a few hundred keys and
//! deletes, small blocks, flushed into tables, some writes left in its
//! WAL) gives its `MANIFEST`, WAL and tables; filters of every kind
//! are built directly. Written under ROOT (the repository), as
//! `{filter,sstable,engine}/fuzz/corpus/TARGET/NAME`, for the targets
//! that read those bytes as they are (`filter_from_bytes`,
//! `ribbon_from_bytes` without its crc32, `table_open`, `table_open_at`,
//! `block_decode` from a table's blocks, `wal_replay`, `manifest_decode`)
//! and as the resealing targets' inputs that rebuild the same bytes
//! (`filter_resealed`, `manifest_resealed`), and clean logs built by
//! `clean_wal_input` for `wal_resealed`; and long inputs of seeded random
//! bytes for `db_model`, which decodes any bytes into a store's shape and
//! operations.
//!
//! `cargo run -p bloomlsm --example fuzz_seeds -- ROOT`

use std::path::{Path, PathBuf};

use bloomlsm::fuzzing::db_model::Case;
use bloomlsm::fuzzing::resealed::{CleanOp, clean_wal_input, reseal_wal};
use bloomlsm::{Db, Options};
use bloomlsm_filter::{AnyFilter, CountingBloomFilter, FilterKind, InsertFilter, KeyHash};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::args().nth(1).ok_or("usage: fuzz_seeds ROOT")?);
    let seed = |krate: &str, target: &str, name: &str, bytes: &[u8]| {
        let dir = root.join(krate).join("fuzz/corpus").join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(name), bytes)
    };
    let mut written = 0;
    // Filters of every kind and both versions' reseal inputs.
    let hashes: Vec<KeyHash> = (0..40u32).map(|i| KeyHash::of(&i.to_le_bytes())).collect();
    let mut filters = Vec::new();
    for (i, kind) in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ]
    .into_iter()
    .enumerate()
    {
        for bits in [2.0, 10.0] {
            let f = AnyFilter::build(kind, &hashes, bits)?;
            filters.push((i as u8, f.to_bytes()));
        }
    }
    let mut counting = CountingBloomFilter::with_bits_per_key(40, 10.0);
    hashes.iter().for_each(|&h| counting.insert_hash(h));
    filters.push((3, counting.to_bytes()));
    for (n, (kind, bytes)) in filters.iter().enumerate() {
        let name = format!("filter-{n}");
        seed("filter", "filter_from_bytes", &name, bytes)?;
        if *kind == 2 {
            seed(
                "filter",
                "ribbon_from_bytes",
                &name,
                &bytes[..bytes.len() - 4],
            )?;
        }
        // `fuzzing::reseal`: the kind, the version, k, m and the item
        // count as given; then those fields and the payload.
        let version_bit = if bytes[4] == 2 { 4 } else { 0 };
        let mut data = vec![kind | version_bit | 8 | 16 | 32];
        data.extend_from_slice(&bytes[16..bytes.len() - 4]);
        if *kind != 2 {
            // Only a Ribbon payload begins with parameters.
            data.splice(21..21, [0u8; 8]);
        }
        assert_eq!(bloomlsm_filter::fuzzing::reseal(&data), *bytes);
        seed("filter", "filter_resealed", &name, &data)?;
        written += 1;
    }
    // Stores: their manifests, WALs and tables.
    for kind in [
        FilterKind::Standard,
        FilterKind::Blocked,
        FilterKind::Ribbon,
    ] {
        let dir = tempfile_dir(kind)?;
        let options = Options {
            filter_kind: kind,
            block_size: 128,
            memtable_bytes: 4096,
            ..Options::default()
        };
        let db = Db::open(&dir, options)?;
        for i in 0..300u32 {
            let key = format!("key{:05}", i * 7 % 1000);
            if i % 6 == 5 {
                db.delete(key.as_bytes())?;
            } else {
                db.put(key.as_bytes(), &vec![b'v'; (i % 37) as usize])?;
            }
        }
        db.flush()?;
        for i in 0..20u32 {
            db.put(format!("late{i}").as_bytes(), b"in the WAL")?;
        }
        // Dropped, not closed: the last writes stay in the WAL.
        drop(db);
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let bytes = std::fs::read(&path)?;
            let name = format!("{}-{name}", kind.name());
            if name.ends_with("MANIFEST") {
                seed("engine", "manifest_decode", &name, &bytes)?;
                // `reseal_manifest`: the version, the payload as given.
                let mut data = vec![bytes[8] | 8];
                data.extend_from_slice(&bytes[20..]);
                assert_eq!(bloomlsm::fuzzing::resealed::reseal_manifest(&data), bytes);
                seed("engine", "manifest_resealed", &name, &data)?;
            } else if name.ends_with(".wal") || name.ends_with(".log") {
                seed("engine", "wal_replay", &name, &bytes)?;
            } else if name.ends_with(".sst") {
                seed("sstable", "table_open", &name, &bytes)?;
                let mut at = vec![0u8, 0];
                at.extend_from_slice(&bytes);
                seed("sstable", "table_open_at", &name, &at)?;
                for (b, (_, handle)) in bloomlsm_sstable::fuzzing::blocks(&bytes)
                    .iter()
                    .enumerate()
                    .take(4)
                {
                    let start = handle.offset as usize;
                    let end = start + handle.size as usize + bloomlsm_sstable::format::TRAILER_LEN;
                    if let Some(block) = bytes.get(start..end) {
                        seed("sstable", "block_decode", &format!("{name}-{b}"), block)?;
                    }
                }
            } else {
                continue;
            }
            written += 1;
        }
        std::fs::remove_dir_all(&dir)?;
    }
    // Clean logs for `wal_resealed`: every header, one WAL and three,
    // puts and deletes of repeated keys.
    for header in 0..4u8 {
        for wals in [1usize, 3] {
            let batches: Vec<Vec<CleanOp>> = (0..9u8)
                .map(|b| {
                    (0..1 + b % 4)
                        .map(|o| CleanOp {
                            key: format!("k{}", (b + o) % 5).into_bytes(),
                            value: (o % 3 != 2).then(|| vec![b'v'; usize::from(b * 3 + o)]),
                        })
                        .collect()
                })
                .collect();
            let data = clean_wal_input(header, wals, 41, &batches);
            let (_, clean) = reseal_wal(&data);
            assert!(clean || (header == 3 && wals > 1));
            seed(
                "engine",
                "wal_resealed",
                &format!("clean-{header}-{wals}"),
                &data,
            )?;
            written += 1;
        }
    }
    // db_model decodes any bytes; libFuzzer grows inputs slowly from a
    // corpus of short ones, which build no deep tree (fuzz28: 970 bytes at
    // most after 12 minutes). Long random inputs, one per layout and
    // first byte's flags, start it at hundreds of operations. The 16
    // seeds cover every layout (bits 0-1), open-file limit (bit 2) and
    // deletion-triggered compaction (bit 4, from the seed's bit 3; the
    // layout's bit 3 picks nothing).
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for layout in 0..16u8 {
        let mut bytes = vec![0u8; 4096];
        rng.fill_bytes(&mut bytes);
        bytes[0] = (layout & 0x07) | (layout & 0x08) << 1;
        let ops = Case::from_bytes(&bytes).ops.len();
        assert!(
            ops >= 100,
            "a 4096-byte db_model seed decodes to {ops} operations"
        );
        seed("engine", "db_model", &format!("long-{layout}"), &bytes)?;
        written += 1;
    }
    println!("{written} seeds under {}", root.display());
    Ok(())
}

/// A fresh directory for one store.
fn tempfile_dir(kind: FilterKind) -> std::io::Result<PathBuf> {
    let dir = Path::new(&std::env::temp_dir()).join(format!(
        "bloomlsm-fuzz-seeds-{}-{}",
        std::process::id(),
        kind.name()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
