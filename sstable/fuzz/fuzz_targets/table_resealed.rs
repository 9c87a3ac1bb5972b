#![no_main]
//! A valid table with the fuzzer's edits inside its blocks and footer and
//! every checksum recomputed (`bloomlsm_sstable::fuzzing::reseal`), so the
//! index, data, properties and filter decoders see the edited bytes: open,
//! get and scan return values or errors, never panic.
//!
//! Input: a one-byte table choice (filter kind and block size), then
//! edits of three bytes each (a little-endian u16 position, scaled over the
//! table, and a byte to xor there).

use std::sync::OnceLock;

use bloomlsm_filter::FilterKind;
use bloomlsm_sstable::fuzzing::{blocks, exercise, reseal};
use bloomlsm_sstable::{BlockHandle, BlockKind, EntryKind, TableBuilder, TableOptions};
use libfuzzer_sys::fuzz_target;

struct Sample {
    bytes: Vec<u8>,
    blocks: Vec<(BlockKind, BlockHandle)>,
    keys: Vec<Vec<u8>>,
}

/// Four tables of 120 entries (a few keys with several versions, some
/// tombstones), built once: blocked and Ribbon filters, 64- and 512-byte
/// blocks.
fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut out = Vec::new();
        for (kind, block_size) in [
            (FilterKind::Blocked, 64),
            (FilterKind::Ribbon, 64),
            (FilterKind::Blocked, 512),
            (FilterKind::Standard, 512),
        ] {
            let dir =
                std::env::temp_dir().join(format!("bloomlsm-resealed-{}", std::process::id()));
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join("t.sst");
            let file = std::fs::File::create(&path).expect("create sample table");
            let options = TableOptions {
                block_size,
                filter_kind: kind,
                bits_per_key: 10.0,
                ..TableOptions::default()
            };
            let mut b = TableBuilder::new(std::io::BufWriter::new(file), &path, options);
            let mut keys = Vec::new();
            let mut seq = 1000u64;
            for i in 0..40u32 {
                let key = format!("key{:04}", i * 7).into_bytes();
                let versions = if i % 9 == 0 { 6 } else { 2 };
                for v in 0..versions {
                    let kind = if v % 3 == 1 {
                        EntryKind::Delete
                    } else {
                        EntryKind::Put
                    };
                    let value = if kind == EntryKind::Put {
                        vec![b'v'; (i % 23) as usize]
                    } else {
                        Vec::new()
                    };
                    b.add(&key, seq, kind, &value).expect("add");
                    seq -= 1;
                }
                keys.push(key);
            }
            b.finish().expect("finish");
            let bytes = std::fs::read(&path).expect("read sample table");
            // The sample lives in memory from here: no directory is left
            // behind per fuzzing process.
            let _ = std::fs::remove_dir_all(&dir);
            let blocks = blocks(&bytes);
            out.push(Sample {
                bytes,
                blocks,
                keys,
            });
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let samples = samples();
    let sample = &samples[usize::from(choice) % samples.len()];
    let len = sample.bytes.len();
    let edits: Vec<(usize, u8)> = rest
        .chunks_exact(3)
        .map(|c| {
            (
                usize::from(u16::from_le_bytes([c[0], c[1]])) * len / 65_536,
                c[2],
            )
        })
        .collect();
    let mut table = sample.bytes.clone();
    reseal(&mut table, &sample.blocks, &edits);
    let mut probes: Vec<&[u8]> = sample.keys.iter().map(Vec::as_slice).step_by(5).collect();
    probes.push(b"key");
    probes.push(b"zzz");
    exercise(table, &probes, 5_000);
});
