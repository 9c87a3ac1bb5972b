//! The device's own read latency when a read phase starts: random aligned
//! 4 KiB `O_DIRECT` reads of the store's table files, one at a time, timed
//! around the system call alone.
//!
//! With direct I/O a get that reads a block waits for about one such read,
//! and the engine adds the rest (index search, checksum, decode, cache).
//! Measured for each engine just before its reads and again after them, so
//! a device that is slower at one moment (still writing back a fill, a
//! neighbour on the host) shows here, and not as a difference between the
//! engines. The probe's own reads happen outside every measured phase.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};

/// Bytes of one probe read, at an offset that is a multiple of it: a page,
/// the size of one of the benchmark's data blocks.
pub const PROBE_BYTES: usize = 4096;

/// Latency of the probe's reads.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceLatency {
    /// Reads timed.
    pub reads: u64,
    /// Median, microseconds.
    pub p50_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Mean, microseconds.
    pub mean_us: f64,
}

/// Table files (`.sst`) under `dir`, with their lengths, of at least one
/// probe read.
fn table_files(dir: &Path) -> Result<Vec<(PathBuf, u64)>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry?;
            let meta = entry.metadata()?;
            let path = entry.path();
            if meta.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "sst")
                && meta.len() >= PROBE_BYTES as u64
            {
                files.push((path, meta.len()));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Times `reads` random probe reads of the table files under `dir`, each
/// file chosen with a probability proportional to its length (as a get's
/// block is). `None` when the directory holds no table file, or where the
/// file system refuses `O_DIRECT` (then there is no device latency to
/// separate: reads may come from the page cache).
pub fn probe(dir: &Path, reads: usize, seed: u64) -> Result<Option<DeviceLatency>> {
    let files = table_files(dir)?;
    let total: u64 = files.iter().map(|(_, len)| len).sum();
    if total == 0 || reads == 0 {
        return Ok(None);
    }
    // Cumulative lengths: a byte position picks its file.
    let ends: Vec<u64> = files
        .iter()
        .scan(0u64, |end, (_, len)| {
            *end += len;
            Some(*end)
        })
        .collect();
    let mut storage = vec![0u8; 2 * PROBE_BYTES];
    let start = storage.as_ptr().align_offset(PROBE_BYTES);
    let Some(buf) = storage.get_mut(start..start.saturating_add(PROBE_BYTES)) else {
        anyhow::bail!("no {PROBE_BYTES}-byte aligned window in the probe's buffer");
    };
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).context("creating a histogram")?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut sum_ns = 0u128;
    let mut timed = 0u64;
    for _ in 0..reads {
        let at = rng.random_range(0..total);
        let i = ends.partition_point(|&e| e <= at);
        let (path, len) = &files[i];
        let pages = len / PROBE_BYTES as u64;
        let offset = rng.random_range(0..pages) * PROBE_BYTES as u64;
        // A table the engine deleted since the listing (an obsolete input
        // removed late) is skipped: a probe must not end a long run.
        let file = match open_direct(path) {
            Ok(Some(file)) => file,
            Ok(None) => return Ok(None),
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(e),
        };
        let t = Instant::now();
        let read = std::os::unix::fs::FileExt::read_exact_at(&file, buf, offset);
        let ns = t.elapsed().as_nanos();
        match read {
            Ok(()) => {}
            // Truncated or replaced since the listing: not a device figure.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("probe read of {} at {offset}", path.display()));
            }
        }
        timed += 1;
        sum_ns += ns;
        histogram.saturating_record(u64::try_from(ns).unwrap_or(u64::MAX));
    }
    if timed == 0 {
        return Ok(None);
    }
    let us = |ns: u64| ns as f64 / 1e3;
    Ok(Some(DeviceLatency {
        reads: timed,
        p50_us: us(histogram.value_at_quantile(0.50)),
        p99_us: us(histogram.value_at_quantile(0.99)),
        mean_us: sum_ns as f64 / timed as f64 / 1e3,
    }))
}

/// Whether `e` (from [`open_direct`]) says the file is gone.
fn is_not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
}

/// `path` opened with `O_DIRECT`, or `None` where the file system refuses
/// it. Opened per read, outside the timed call: a store of a thousand
/// tables beside an engine holding its own descriptors must not run out.
#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("opening {} with O_DIRECT", path.display())),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> Result<Option<std::fs::File>> {
    Ok(None)
}

/// Reads the probe makes at one moment of a run.
pub const PROBE_READS: usize = 2000;

/// [`probe`] of [`PROBE_READS`] reads when the engine's reads are direct
/// (`direct_io`), where a get's block read is a device read; else `None`.
pub fn when_direct(direct_io: bool, dir: &Path, seed: u64) -> Result<Option<DeviceLatency>> {
    if !direct_io {
        return Ok(None);
    }
    probe(dir, PROBE_READS, seed)
}

/// Records `latency` in `notes` under `device_{p50,p99,mean}_us_{when}`.
pub fn note(notes: &mut Vec<(String, f64)>, when: &str, latency: Option<DeviceLatency>) {
    if let Some(l) = latency {
        notes.push((format!("device_p50_us_{when}"), l.p50_us));
        notes.push((format!("device_p99_us_{when}"), l.p99_us));
        notes.push((format!("device_mean_us_{when}"), l.mean_us));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn probes_only_table_files_and_reports_nothing_without_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("MANIFEST"), vec![1u8; 3 * PROBE_BYTES]).unwrap();
        std::fs::write(dir.path().join("small.sst"), vec![1u8; 100]).unwrap();
        assert_eq!(probe(dir.path(), 10, 1).unwrap(), None);
    }

    #[test]
    fn times_every_read_of_a_store_in_subdirectories() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("engine");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("000001.sst"), vec![7u8; 5 * PROBE_BYTES + 17]).unwrap();
        std::fs::write(sub.join("000002.sst"), vec![9u8; PROBE_BYTES]).unwrap();
        let result = probe(dir.path(), PROBE_READS, 2).unwrap();
        // tmpfs and some others refuse O_DIRECT: there `None` is the
        // answer; where the file system takes it, a latency must come back.
        let accepts_direct = open_direct(&sub.join("000001.sst")).unwrap().is_some();
        assert_eq!(result.is_some(), accepts_direct);
        if let Some(l) = result {
            assert_eq!(l.reads, PROBE_READS as u64);
            // A direct read waits for the device: never under a
            // microsecond (a histogram that clamped its values would say
            // nanoseconds).
            assert!(l.p50_us >= 1.0 && l.p50_us <= l.p99_us, "{l:?}");
            assert!(l.mean_us > 0.0);
        }
    }
}
