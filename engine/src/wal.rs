//! The write-ahead log: one record per write batch, appended before the
//! memtable is touched.
//!
//! Record: `length: u32 LE | crc32 of payload: u32 LE | payload`.
//! A record that runs past the end of the file, or a damaged record after
//! which no intact record follows, is a torn tail (a crash mid-append): it
//! is dropped. A damaged record followed by intact ones is corruption.

use std::path::{Path, PathBuf};

use bloomlsm_sstable::WritableFile;

use crate::error::{Error, Result};
use crate::options::WalRecovery;

/// Bytes of a record header.
pub(crate) const RECORD_HEADER_LEN: usize = 8;

/// Appends records to one WAL file.
#[derive(Debug)]
pub(crate) struct WalWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    buf: Vec<u8>,
}

impl WalWriter {
    pub(crate) fn new(file: Box<dyn WritableFile>, path: PathBuf) -> Self {
        Self {
            file,
            path,
            buf: Vec::new(),
        }
    }

    /// Appends one record in a single write (so it reaches the OS whole or
    /// torn, never interleaved), then fsyncs when `sync`.
    pub(crate) fn append(&mut self, payload: &[u8], sync: bool) -> Result<()> {
        self.buf.clear();
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
        self.buf
            .extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.buf.extend_from_slice(payload);
        self.file
            .write_all(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        if sync {
            self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io(&self.path, e))
    }
}

/// What replaying a WAL found.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Intact records, in order.
    pub(crate) records: Vec<Vec<u8>>,
    /// Bytes dropped as a torn tail (or after a damaged record in
    /// point-in-time mode).
    pub(crate) dropped_bytes: u64,
}

/// Parses one record at `at`: `Some((payload range end, payload))` when intact.
fn record_at(bytes: &[u8], at: usize) -> Option<(usize, &[u8])> {
    let header = bytes.get(at..at.checked_add(RECORD_HEADER_LEN)?)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let start = at + RECORD_HEADER_LEN;
    let payload = bytes.get(start..start.checked_add(len)?)?;
    // A batch is never empty; zeros (len 0, crc 0) are a preallocated tail.
    (len > 0 && crc32fast::hash(payload) == crc).then_some((start + len, payload))
}

/// True when some intact record starts anywhere in `bytes[from..]`.
fn intact_record_follows(bytes: &[u8], from: usize) -> bool {
    (from..bytes.len().saturating_sub(RECORD_HEADER_LEN - 1))
        .any(|at| record_at(bytes, at).is_some())
}

/// Splits a WAL's bytes into records. Never panics on any bytes.
pub(crate) fn replay(path: &Path, bytes: &[u8], mode: WalRecovery) -> Result<Replay> {
    let mut out = Replay::default();
    let mut at = 0usize;
    while at < bytes.len() {
        match record_at(bytes, at) {
            Some((end, payload)) => {
                out.records.push(payload.to_vec());
                at = end;
            }
            None => {
                if mode == WalRecovery::TolerateTornTail && intact_record_follows(bytes, at + 1) {
                    return Err(Error::Corruption {
                        path: path.to_path_buf(),
                        offset: at as u64,
                        reason: "damaged WAL record followed by intact records".into(),
                    });
                }
                out.dropped_bytes = (bytes.len() - at) as u64;
                break;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(records: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            out.extend_from_slice(&(r.len() as u32).to_le_bytes());
            out.extend_from_slice(&crc32fast::hash(r).to_le_bytes());
            out.extend_from_slice(r);
        }
        out
    }

    #[test]
    fn torn_tail_is_dropped_mid_damage_is_an_error() {
        let p = Path::new("x.wal");
        let bytes = encode(&[b"one", b"two", b"three"]);
        for cut in 0..bytes.len() {
            let r = replay(p, &bytes[..cut], WalRecovery::TolerateTornTail).unwrap();
            assert!(r.records.len() <= 3);
        }
        let mut damaged = bytes.clone();
        damaged[9] ^= 1; // inside "one"
        assert!(replay(p, &damaged, WalRecovery::TolerateTornTail).is_err());
        let pit = replay(p, &damaged, WalRecovery::PointInTime).unwrap();
        assert_eq!(pit.records.len(), 0);
        let mut tail = bytes.clone();
        let last = tail.len() - 1;
        tail[last] ^= 1;
        let r = replay(p, &tail, WalRecovery::TolerateTornTail).unwrap();
        assert_eq!(r.records, vec![b"one".to_vec(), b"two".to_vec()]);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = replay(Path::new("x"), &bytes, WalRecovery::TolerateTornTail);
            let _ = replay(Path::new("x"), &bytes, WalRecovery::PointInTime);
        }
    }
}
