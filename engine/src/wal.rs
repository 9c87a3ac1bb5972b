//! The write-ahead log: one record per write batch, appended before the
//! memtable is touched.
//!
//! Record: `length: u32 LE | crc32 of payload: u32 LE | payload`.
//! A record that runs past the end of the file, or a damaged record after
//! which no intact record follows, is a torn tail (a crash mid-append).
//! A damaged record followed by intact ones is corruption. What recovery
//! does across several WALs is in `replay.rs`.

use std::path::{Path, PathBuf};

use bloomlsm_sstable::WritableFile;

use crate::damage::WalDamage;
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
    /// REQUIRES: `payload.len() <= u32::MAX` (`WriteBatch` checks it).
    pub(crate) fn append(&mut self, payload: &[u8], sync: bool) -> Result<()> {
        let len = u32::try_from(payload.len()).map_err(|_| Error::BatchTooLarge {
            bytes: payload.len(),
            max: u32::MAX as usize,
        })?;
        self.buf.clear();
        self.buf.extend_from_slice(&len.to_le_bytes());
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

/// One intact record and where it starts in its file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) offset: u64,
    pub(crate) payload: Vec<u8>,
}

/// What replaying one WAL found.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// Intact records, in order, up to the first damage.
    pub(crate) records: Vec<Record>,
    /// Offset of the first byte that is not an intact record (a torn tail,
    /// or in point-in-time mode any damage), if any.
    pub(crate) damage: Option<u64>,
}

/// Parses one record at `at`: `Some((payload end, payload))` when intact.
fn record_at(bytes: &[u8], at: usize) -> Option<(usize, &[u8])> {
    let (len, start) = plausible_header(bytes, at)?;
    let header = &bytes[at..start];
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let payload = &bytes[start..start + len];
    (crc32fast::hash(payload) == crc).then_some((start + len, payload))
}

/// The payload length and start of a record header at `at` that fits in
/// `bytes` and could frame a batch. Checks nothing that costs more than
/// reading the header.
fn plausible_header(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let header = bytes.get(at..at.checked_add(RECORD_HEADER_LEN)?)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let start = at + RECORD_HEADER_LEN;
    // A batch is never empty; zeros (len 0) are a preallocated tail.
    (len >= crate::batch::BATCH_HEADER_LEN && len <= bytes.len() - start).then_some((len, start))
}

/// Whether an intact record starts anywhere in `bytes[from..]`: `Some(true)`
/// or `Some(false)`, or `None` when deciding would cost more than
/// `budget` bytes of checksumming (damage crafted to make the search
/// quadratic; the caller treats it as corruption, never as a torn tail).
fn intact_record_follows(bytes: &[u8], from: usize, mut budget: usize) -> Option<bool> {
    for at in from..bytes.len().saturating_sub(RECORD_HEADER_LEN - 1) {
        if let Some((len, _)) = plausible_header(bytes, at) {
            budget = budget.checked_sub(len)?;
            if record_at(bytes, at).is_some() {
                return Some(true);
            }
        }
    }
    Some(false)
}

/// Splits one WAL's bytes into records. Never panics on any bytes; work is
/// linear in the file's size.
pub(crate) fn replay(path: &Path, bytes: &[u8], mode: WalRecovery) -> Result<Replay> {
    let mut out = Replay::default();
    let mut at = 0usize;
    while at < bytes.len() {
        if let Some((end, payload)) = record_at(bytes, at) {
            out.records.push(Record {
                offset: at as u64,
                payload: payload.to_vec(),
            });
            at = end;
            continue;
        }
        if mode == WalRecovery::TolerateTornTail {
            let budget = 4 * bytes.len() + (1 << 20);
            let reason = match intact_record_follows(bytes, at + 1, budget) {
                Some(false) => None,
                Some(true) => Some(WalDamage::BeforeIntact),
                None => Some(WalDamage::Undecidable),
            };
            if let Some(reason) = reason {
                return Err(Error::corruption(path, at as u64, reason));
            }
        }
        out.damage = Some(at as u64);
        break;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch(n: u8) -> Vec<u8> {
        let mut b = crate::WriteBatch::new();
        b.put(&[n], &[n; 5]);
        b.encode(u64::from(n) + 1).to_vec()
    }

    fn encode(records: &[Vec<u8>]) -> Vec<u8> {
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
        let records = [batch(1), batch(2), batch(3)];
        let bytes = encode(&records);
        for cut in 0..bytes.len() {
            let r = replay(p, &bytes[..cut], WalRecovery::TolerateTornTail).unwrap();
            let covered: usize = r.records.iter().map(|x| x.payload.len() + 8).sum();
            assert_eq!(
                r.damage,
                (covered < cut).then_some(covered as u64),
                "cut {cut}"
            );
        }
        let mut damaged = bytes.clone();
        damaged[9] ^= 1; // inside the first record
        let err = replay(p, &damaged, WalRecovery::TolerateTornTail).unwrap_err();
        assert!(matches!(err, Error::Corruption { offset: 0, .. }), "{err}");
        let pit = replay(p, &damaged, WalRecovery::PointInTime).unwrap();
        assert_eq!((pit.records.len(), pit.damage), (0, Some(0)));
        let mut tail = bytes.clone();
        let last = tail.len() - 1;
        tail[last] ^= 1;
        let r = replay(p, &tail, WalRecovery::TolerateTornTail).unwrap();
        let payloads: Vec<_> = r.records.iter().map(|x| x.payload.clone()).collect();
        assert_eq!(payloads, records[..2].to_vec());
        assert_eq!(r.records[1].offset, (records[0].len() + 8) as u64);
        assert_eq!(
            r.damage,
            Some((records[0].len() + records[1].len() + 16) as u64)
        );
    }

    #[test]
    fn crafted_damage_cannot_make_the_torn_tail_search_quadratic() {
        // After one damaged header, every 4th offset holds a length that
        // reaches to the end of the file: a naive search checksums about
        // n^2/8 bytes. The budget ends it, as corruption.
        let n = 1 << 20;
        let mut bytes = vec![0xffu8; 8];
        while bytes.len() < n {
            let rest = n.saturating_sub(bytes.len() + 8) as u32;
            bytes.extend_from_slice(&rest.to_le_bytes());
        }
        let err = replay(Path::new("x.wal"), &bytes, WalRecovery::TolerateTornTail).unwrap_err();
        assert!(err.to_string().contains("too much damage"), "{err}");
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = replay(Path::new("x"), &bytes, WalRecovery::TolerateTornTail);
            let _ = replay(Path::new("x"), &bytes, WalRecovery::PointInTime);
        }
    }
}
