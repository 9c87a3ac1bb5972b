//! Opens that must be refused: options `Options::validate` rejects, fewer
//! levels than the store's deepest table needs, a file system that
//! refuses `O_DIRECT` under `use_direct_reads`. Each refusal must be
//! typed (never a panic, never a message to parse but the level count's)
//! and must leave the store exactly as it was: the same files with the
//! same bytes, so the next open with good options finds every write.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::Rng;

use bloomlsm::fs::fault::FaultFs;
use bloomlsm::{Db, Error, FilterKind, FilterPolicy, Options};

/// What a refused open must return.
#[derive(Debug)]
pub enum Expect {
    InvalidOptions,
    /// `InvalidOptions` naming `num_levels`.
    TooFewLevels,
    /// An I/O error of kind `Unsupported`: the file system refuses
    /// direct I/O.
    DirectRefused,
}

/// A bad variation of `good` for a store whose deepest table is at level
/// `depth - 1`, with what its open must return.
pub fn bad_options(rng: &mut Rng, good: &Options, depth: usize) -> (Options, Expect, String) {
    use Expect::*;
    let mut o = good.clone();
    let (expect, what) = match rng.below(24) {
        0 | 20..=23 if depth > 2 => {
            o.num_levels = 2 + rng.below(depth as u64 - 2) as usize;
            (
                TooFewLevels,
                format!("num_levels {} < {depth}", o.num_levels),
            )
        }
        0 | 1 => {
            o.num_levels = *rng.pick(&[0, 1, 65, 1000]);
            (InvalidOptions, format!("num_levels {}", o.num_levels))
        }
        2 => {
            o.block_size = *rng.pick(&[0, 1, 63, (64 << 20) + 1]);
            (InvalidOptions, format!("block_size {}", o.block_size))
        }
        3 => {
            o.memtable_bytes = 0;
            (InvalidOptions, "memtable_bytes 0".into())
        }
        4 => {
            o.max_immutable_memtables = 0;
            (InvalidOptions, "max_immutable_memtables 0".into())
        }
        5 => {
            o.l0_compaction_trigger = 3;
            o.l0_slowdown_trigger = 2;
            (InvalidOptions, "l0 triggers out of order".into())
        }
        6 => {
            o.l0_stop_trigger = o.l0_slowdown_trigger - 1;
            (InvalidOptions, "l0 stop below slowdown".into())
        }
        7 => {
            o.l1_bytes = 0;
            (InvalidOptions, "l1_bytes 0".into())
        }
        8 => {
            o.level_size_ratio = *rng.pick(&[0, 1]);
            (
                InvalidOptions,
                format!("level_size_ratio {}", o.level_size_ratio),
            )
        }
        9 => {
            o.target_file_bytes = 0;
            (InvalidOptions, "target_file_bytes 0".into())
        }
        10 => {
            o.max_key_bytes = *rng.pick(&[0, 65537]);
            (InvalidOptions, format!("max_key_bytes {}", o.max_key_bytes))
        }
        11 => {
            o.max_value_bytes = (64 << 20) + 1;
            (InvalidOptions, "max_value_bytes past 64 MiB".into())
        }
        12 => {
            o.deletion_compaction_ratio = Some(*rng.pick(&[0.0, -0.5, 1.01, f64::NAN]));
            (InvalidOptions, format!("{:?}", o.deletion_compaction_ratio))
        }
        13 => {
            o.max_open_files = Some(0);
            (InvalidOptions, "max_open_files Some(0)".into())
        }
        14 => {
            o.filter_kind = FilterKind::Counting;
            (InvalidOptions, "a counting filter".into())
        }
        15 | 16 => {
            let b = *rng.pick(&[f64::NAN, f64::INFINITY, -1.0, 100.5, -0.0001]);
            o.filter_policy = match rng.below(3) {
                0 => FilterPolicy::Uniform { bits_per_key: b },
                1 => FilterPolicy::Optimized { bits_per_key: b },
                _ => FilterPolicy::PerLevel(vec![10.0, b, 4.0]),
            };
            (InvalidOptions, format!("policy {:?}", o.filter_policy))
        }
        17 => {
            o.filter_policy = FilterPolicy::PerLevel(Vec::new());
            (InvalidOptions, "an empty per-level policy".into())
        }
        18 | 19 => {
            o.use_direct_reads = true;
            (
                DirectRefused,
                "direct reads on a file system refusing them".into(),
            )
        }
        _ => {
            o.num_levels = 0;
            (InvalidOptions, "num_levels 0".into())
        }
    };
    (o, expect, what)
}

/// Every file of `dir` but `LOCK` (a read-only open may create and unlink
/// it) with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name() != "LOCK")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Opens `dir` (read-only when `read_only`) with `bad`: the open must be
/// refused as `expect` says, and change no file.
pub fn attempt(dir: &Path, bad: Options, expect: &Expect, read_only: bool, what: &str) {
    let before = files(dir);
    let fs = FaultFs::new();
    if matches!(expect, Expect::DirectRefused) {
        fs.set_refuse_direct_io(true);
    }
    let fs = Arc::new(fs);
    let opened = if read_only {
        Db::open_read_only_with_fs(dir, bad, fs)
    } else {
        Db::open_with_fs(dir, bad, fs)
    };
    let err = match opened {
        Ok(_) => panic!("an open with {what} (read-only {read_only}) was not refused"),
        Err(e) => e,
    };
    let ok = match (expect, &err) {
        (Expect::InvalidOptions, Error::InvalidOptions(_)) => true,
        (Expect::TooFewLevels, Error::InvalidOptions(m)) => m.contains("num_levels"),
        (Expect::DirectRefused, e) => e.io_kind() == Some(std::io::ErrorKind::Unsupported),
        _ => false,
    };
    assert!(
        ok,
        "an open with {what} (read-only {read_only}) was refused with {err:?}, not {expect:?}"
    );
    let after = files(dir);
    assert!(
        before == after,
        "an open refused for {what} (read-only {read_only}) changed the store: {:?} -> {:?}",
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
}
