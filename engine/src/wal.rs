//! The write-ahead log: one record per write batch, appended before the
//! memtable is touched.
//!
//! File: a 24-byte header (`header.rs`: format version 3, whether the
//! writer fsynced each record before the next, or a clean close fsynced
//! them all, `seal.rs`, and a random salt drawn when the file was
//! created), then records. Record: `length: u32 LE | crc32: u32 LE |
//! payload`, the crc32 over the salt's 8 bytes (LE) then the payload, the
//! payload a batch (`first sequence: u64 LE | op count: u32 LE | ops`).
//! Older builds wrote version 2 (a 16-byte header, no salt, the crc32
//! over the payload alone) and version 1 (no header, records from byte
//! 0, as version 2's); both are still read so.
//!
//! The salt makes "an intact record" mean a record of this file: bytes
//! of another log (another store's WAL, or another WAL file of this
//! store, stored inside a value, say) never verify under this file's
//! salt, but by a 2^-32 chance per record, so the torn-tail search below
//! never takes them for the log's (`replay/embedded_tests.rs`). Every
//! function here that checksums records reads the salt from the header
//! of the whole file it is given.
//! This module splits a WAL into its intact records up to the first damage
//! and can look for a record of the log after it; whether damage is a torn
//! tail (a crash mid-append) or corruption is decided across all WALs in
//! `replay.rs`, which knows the sequence numbers the log must continue with.

use std::path::PathBuf;

use bloomlsm_sstable::WritableFile;

use crate::error::{Error, Result};

pub(crate) mod header;
pub(crate) use header::WalFormat;
mod seal;

/// How `bytes`, a whole WAL file, begin (`header::decode`), in a store
/// whose live WALs are all of version 3 (`salted`: store format 6 or
/// more, `replay::LogStart::salted`) or not. In a salted store a file
/// that does not begin with the magic and is not empty is no version 1
/// WAL but a version 3 one whose header was damaged (zeros, say a
/// durable page the device lost, or any other bytes over it): a
/// `DamagedHeader`, whose records cannot be read without their salt. In
/// an older store it is a version 1 WAL (`Unheaded`), read from byte 0.
/// An empty file is a WAL created and never written in either. Where
/// the difference matters: whether damage at byte 0 is refused as a
/// damaged header (`replay::check_torn_tail`) and whether a point-in-time
/// replay reads the file under bytes 12..20 (`salvaged_records`).
/// [`records`] reads such a file from byte 0 in any store (intact
/// version 1 records there are replayed, their sequences checked).
pub(crate) fn format_of(bytes: &[u8], salted: bool) -> WalFormat {
    match header::decode(bytes) {
        WalFormat::Unheaded if salted && !bytes.is_empty() => WalFormat::DamagedHeader,
        format => format,
    }
}

/// Where the records of WAL bytes `bytes` start: past a header, if any
/// (at most the file's length, for a file cut inside its header). The
/// same in a salted store or not: a damaged header's and a version 1
/// file's both start at 0.
pub(crate) fn records_start(bytes: &[u8]) -> usize {
    header::decode(bytes).records_start().min(bytes.len())
}

/// Bytes of a record header.
pub(crate) const RECORD_HEADER_LEN: usize = 8;

/// The largest record buffer a [`WalWriter`] keeps between appends: the
/// records of usual batches reuse it; a larger one is freed after its
/// write.
const KEPT_BUFFER_BYTES: usize = 1 << 20;

/// Appends records to one WAL file.
#[derive(Debug)]
pub(crate) struct WalWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// What the file's header says: every record is fsynced before the
    /// next (`SyncMode::Always`), or, once `seal` has run, every record
    /// was fsynced at a clean close.
    synced: bool,
    /// A record was appended (so a close has a write to mark).
    holds_records: bool,
    /// The salt of this file's header, in every record's checksum; the
    /// seal's header rewrite keeps it.
    salt: u64,
    buf: Vec<u8>,
}

impl WalWriter {
    /// Starts a new, empty WAL in `file`: writes its header and fsyncs it,
    /// so that any record appended later follows a durable header.
    /// `synced`: every record will be appended with `sync` (the header says
    /// so, and recovery reads damage in this WAL strictly).
    pub(crate) fn create(
        mut file: Box<dyn WritableFile>,
        path: PathBuf,
        synced: bool,
    ) -> Result<Self> {
        let salt = header::new_salt(&path);
        file.write_all(&header::encode(synced, salt))
            .and_then(|()| file.sync())
            .map_err(|e| Error::io(&path, e))?;
        Ok(Self {
            file,
            path,
            synced,
            holds_records: false,
            salt,
            buf: Vec::new(),
        })
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
        frame_record(&mut self.buf, len, Some(self.salt), payload);
        let written = self.file.write_all(&self.buf);
        if self.buf.capacity() > KEPT_BUFFER_BYTES {
            // One batch of up to 4 GiB must not hold its size in memory
            // for the rest of the WAL's life.
            self.buf = Vec::new();
        }
        written.map_err(|e| Error::io(&self.path, e))?;
        self.holds_records = true;
        if sync {
            self.file.sync().map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        self.file.sync().map_err(|e| Error::io(&self.path, e))
    }
}

/// Appends to `out` the record of `payload` (`len` its length) in a WAL
/// whose header holds `salt` (`None`: versions 1 and 2).
fn frame_record(out: &mut Vec<u8>, len: u32, salt: Option<u64>, payload: &[u8]) {
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&header::record_crc(salt, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The record of `payload` as a WAL whose header holds `salt` (`None`:
/// versions 1 and 2) frames it: for tests that build WALs by hand.
#[cfg(test)]
pub(crate) fn record_bytes(salt: Option<u64>, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEADER_LEN + payload.len());
    let len = u32::try_from(payload.len()).expect("a test record under 4 GiB");
    frame_record(&mut out, len, salt, payload);
    out
}

/// One intact record and where it starts in its file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) offset: u64,
    pub(crate) payload: Vec<u8>,
}

/// The intact records of one WAL up to its first damage.
#[derive(Debug)]
pub(crate) struct Replay {
    /// How the file begins: where its records start, and what its writer
    /// promised about them.
    pub(crate) format: WalFormat,
    /// Intact records, in order, up to the first damage.
    pub(crate) records: Vec<Record>,
    /// Offset of the first byte that is not an intact record, if any.
    pub(crate) damage: Option<u64>,
}

/// Which first sequence numbers a record must carry to be a record of the
/// log (rather than bytes that happen to checksum, such as a WAL record
/// stored inside a value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeqFilter {
    /// Exactly this sequence: the successor of a torn record whose
    /// header and batch header survived.
    Exactly(u64),
    /// Any sequence from this one on (within 2^32 of it: a store does not
    /// lose four billion writes at once).
    From(u64),
}

impl SeqFilter {
    fn admits(self, seq: u64) -> bool {
        match self {
            Self::Exactly(s) => seq == s,
            Self::From(s) => seq >= s && seq - s < 1 << 32,
        }
    }
}

/// Bytes of a close marker (`wal/seal.rs`): a record of a bare batch
/// header.
const MARKER_LEN: usize = RECORD_HEADER_LEN + crate::batch::BATCH_HEADER_LEN;

/// A batch header's first sequence and op count, when `payload` (intact
/// or not) begins with one.
fn batch_header(payload: &[u8]) -> Option<(u64, u32)> {
    let first = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    let count = u32::from_le_bytes(payload.get(8..12)?.try_into().ok()?);
    Some((first, count))
}

/// The first sequence of a record's payload, when its header and the
/// payload's first 8 bytes are in `bytes`.
fn first_seq_at(bytes: &[u8], at: usize) -> Option<u64> {
    let start = at.checked_add(RECORD_HEADER_LEN)?;
    let seq = bytes.get(start..start.checked_add(8)?)?;
    Some(u64::from_le_bytes(seq.try_into().ok()?))
}

/// For damage at `at` that begins as a record of sequence `expected` (its
/// header and batch header intact, as a torn append leaves them): the
/// first sequence of the record that would follow it. `None` when the
/// bytes at `at` do not begin that way.
pub(crate) fn successor_of_torn(bytes: &[u8], at: usize, expected: u64) -> Option<u64> {
    let (first, count) = batch_header(bytes.get(at.checked_add(RECORD_HEADER_LEN)?..)?)?;
    if first != expected {
        return None;
    }
    (count > 0).then(|| expected.checked_add(u64::from(count)))?
}

/// Whether the damaged record at `at` frames a payload that ends inside
/// `bytes`, holds a first sequence `filter` admits followed by `n` whole
/// ops (its op count not read), and an intact record of exactly the
/// sequence `n` past it starts right where it ends. The successor
/// [`successor_of_torn`] reads comes from the damaged record's
/// unchecksummed op count; this one from its ops, so a record of the log
/// right after it is found even when damage changed the count. A torn
/// append ends the file inside its payload, so it frames no end there;
/// a torn length may frame an end inside the record's own value, where
/// bytes of another log are not taken for its successor (the sequence
/// must be exactly the one its ops lead to).
pub(crate) fn record_at_framed_end(bytes: &[u8], at: usize, filter: SeqFilter) -> bool {
    let Some((len, start)) = plausible_header(bytes, at) else {
        return false;
    };
    let end = start + len;
    let Some(first) = first_seq_at(bytes, at).filter(|&seq| filter.admits(seq)) else {
        return false;
    };
    let Some(successor) =
        crate::batch::ops_filling(&bytes[start..end]).and_then(|n| first.checked_add(n))
    else {
        return false;
    };
    first_seq_at(bytes, end) == Some(successor)
        && record_at(bytes, end, search_salts(bytes)).is_some()
}

/// Bytes a device writes whole: a power cut tears a write only at a
/// multiple of them (a page of `UnsyncedFate::Pages` is eight).
pub(crate) const SECTOR: usize = 512;

/// Where the record whose header is at `at` ends by its length field, when
/// that header could frame a batch inside `bytes` and its length field
/// cannot be torn. A length field straddling a sector boundary whose bytes
/// before the boundary are zeros may be torn (a power cut persisted the
/// sector after the boundary, not the one before, and its low bytes read
/// as zeros): it frames an end inside the record's own value, so no end is
/// read from it.
pub(crate) fn framed_end(bytes: &[u8], at: usize) -> Option<usize> {
    let (len, start) = plausible_header(bytes, at)?;
    let boundary = (at / SECTOR + 1) * SECTOR;
    let torn_low_bytes = boundary < at + 4
        && bytes
            .get(at..boundary)
            .is_some_and(|low| low.iter().all(|&b| b == 0));
    (!torn_low_bytes).then_some(start + len)
}

/// Whether `bytes[at..]`, the rest of a WAL, is a close marker torn or
/// damaged (`wal/seal.rs`): its length field, whole and inside one sector
/// (a power loss leaves it as written or zeros), frames a bare batch
/// header, a record that holds no op, and no more bytes than that record
/// follow. A write never logs an empty batch, so these bytes held none.
pub(crate) fn is_damaged_marker(bytes: &[u8], at: usize) -> bool {
    let Some(len) = at.checked_add(4).and_then(|end| bytes.get(at..end)) else {
        return false;
    };
    let one_sector = at / SECTOR == (at + 3) / SECTOR;
    one_sector
        && bytes.len() - at <= MARKER_LEN
        && u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize
            == crate::batch::BATCH_HEADER_LEN
}

/// Whether `bytes`, a whole WAL file, end with an intact close marker
/// (`wal/seal.rs`): a checksummed record of a bare batch header with op
/// count 0, its last 20 bytes. A clean close writes one only after
/// fsyncing every live WAL, so every byte before it was durable first.
///
/// The last 20 bytes of a write can look the same: a value ending with a
/// closed WAL's last bytes (a backup of a WAL stored in the store), in
/// the last write logged. Taken for a marker, they would make a WAL
/// written without fsync read strictly, and a power loss that lost a page
/// of it refused as corruption. So they are a marker only at a record
/// boundary: where the WAL's intact records end, when it has no damage;
/// past damage, only when no record (the damaged one whose header frames
/// it, or an intact one after it) ends at the file's end with them inside
/// it, and their sequence could follow every write before the damage and
/// the write at it (at `lowest` or later: where the store's log may
/// start, `replay::LogStart::lowest`). A value holding the same store's
/// earlier marker fails that (the log has since moved past it, and in a
/// version 3 WAL it was another file's, another salt); another store's
/// marker at a sequence this log could reach, in a write whose header the
/// damage took, remains indistinguishable from a marker only in a
/// version 2 WAL: in version 3 it fails the checksum under this file's
/// salt.
pub(crate) fn ends_with_close_marker(bytes: &[u8], lowest: u64) -> bool {
    let Some(at) = bytes.len().checked_sub(MARKER_LEN) else {
        return false;
    };
    let intact_marker = at >= records_start(bytes)
        && record_at(bytes, at, search_salts(bytes)).is_some_and(|(end, payload)| {
            end == bytes.len() && batch_header(payload).is_some_and(|(_, count)| count == 0)
        });
    let Some(seq) = first_seq_at(bytes, at).filter(|_| intact_marker) else {
        return false;
    };
    let parsed = records(bytes);
    let Some(damage) = parsed.damage else {
        return parsed.records.last().is_some_and(|r| r.offset == at as u64);
    };
    // A close marks the log's end: past the writes before the damage, and
    // past the write at the damage (in a closed WAL the records between
    // the damage and the marker are writes), which is at `lowest` or later.
    let floor = parsed
        .records
        .last()
        .and_then(|r| batch_header(&r.payload))
        .and_then(|(first, count)| first.checked_add(u64::from(count)))
        .unwrap_or(0)
        .max(lowest)
        .saturating_add(1);
    let damage = damage as usize;
    damage < at
        && SeqFilter::From(floor).admits(seq)
        && plausible_header(bytes, damage).is_none_or(|(len, start)| start + len != bytes.len())
        && intact_record_ending_at_end(bytes, damage + 1, at) == Some(false)
}

/// Whether an intact record starting in `bytes[from..to]` ends exactly at
/// the end of `bytes`; `None` when deciding would cost more checksumming
/// than [`search_budget`] (one checksum per offset whose length field
/// frames exactly the rest of the file).
fn intact_record_ending_at_end(bytes: &[u8], from: usize, to: usize) -> Option<bool> {
    let mut budget = search_budget(bytes);
    let salt = search_salts(bytes);
    for at in from..to {
        let Some((len, start)) = plausible_header(bytes, at) else {
            continue;
        };
        if start + len != bytes.len() {
            continue;
        }
        budget = budget.checked_sub(len)?;
        if record_at(bytes, at, salt).is_some() {
            return Some(true);
        }
    }
    Some(false)
}

/// The salts a record of a WAL may be checksummed under: one, or two
/// when the header cannot say which.
type Salts = [Option<u64>; 2];

/// Parses one record at `at` of a WAL whose header holds one of `salts`:
/// `Some((payload end, payload))` when intact, its checksum verifying
/// under one of them (so a record of another WAL, another salt, is no
/// record of this one: `header.rs`).
fn record_at(bytes: &[u8], at: usize, salts: Salts) -> Option<(usize, &[u8])> {
    let (len, start) = plausible_header(bytes, at)?;
    let header = &bytes[at..start];
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let payload = &bytes[start..start + len];
    let verifies = |salt| header::record_crc(salt, payload) == crc;
    (verifies(salts[0]) || (salts[1] != salts[0] && verifies(salts[1])))
        .then_some((start + len, payload))
}

/// The salts the records of the WAL whose whole bytes are `bytes` may be
/// checksummed under, for the search for a record of the log past
/// damage: the header's (none for version 2) when it is intact. When it
/// is damaged, or its magic is (the file then reads as version 1), the
/// records may be of any version: none, or the salt where a version 3
/// header keeps it (bytes 12..20), so that damage to a header's magic,
/// version, flags or checksum does not hide the records after it and
/// make them a torn tail (damage to its salt is refused by replay: a
/// damaged header longer than a header held records). The same in a
/// salted store or not (`format_of`): a file without the magic is read
/// as a damaged header would be.
fn search_salts(bytes: &[u8]) -> Salts {
    match header::decode(bytes) {
        WalFormat::Headed { salt, .. } | WalFormat::Closed { salt } => [salt, salt],
        WalFormat::Unheaded | WalFormat::DamagedHeader => [
            None,
            bytes
                .get(12..20)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes),
        ],
    }
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

/// Whether an intact record whose first sequence `filter` admits starts
/// anywhere in `bytes[from..]`: `Some(true)` or `Some(false)`, or `None`
/// when deciding would cost more than `budget` bytes of checksumming
/// (damage crafted to defeat the filter; the caller treats it as
/// corruption, never as a torn tail). The filter is read before any
/// checksum, so random bytes (a torn value) cost one comparison per offset.
pub(crate) fn record_follows(
    bytes: &[u8],
    from: usize,
    filter: SeqFilter,
    mut budget: usize,
) -> Option<bool> {
    let salt = search_salts(bytes);
    for at in from..bytes.len().saturating_sub(RECORD_HEADER_LEN - 1) {
        let Some((len, _)) = plausible_header(bytes, at) else {
            continue;
        };
        if !first_seq_at(bytes, at).is_some_and(|seq| filter.admits(seq)) {
            continue;
        }
        budget = budget.checked_sub(len)?;
        if record_at(bytes, at, salt).is_some() {
            return Some(true);
        }
    }
    Some(false)
}

/// The checksumming budget of [`record_follows`] over `bytes`: linear in
/// the file's size.
pub(crate) fn search_budget(bytes: &[u8]) -> usize {
    4 * bytes.len() + (1 << 20)
}

/// Splits one WAL's bytes into its header and its intact records up to the
/// first damage (a damaged header is damage at byte 0). A file without the
/// magic is read as version 1, from byte 0, in any store: whether its
/// damage there is a damaged header is for `format_of` to say. Never
/// panics on any bytes; work is linear in the file's size.
pub(crate) fn records(bytes: &[u8]) -> Replay {
    let format = header::decode(bytes);
    if format == WalFormat::DamagedHeader {
        return Replay {
            format,
            records: Vec::new(),
            damage: Some(0),
        };
    }
    let salt = format.salt();
    records_from(bytes, format, format.records_start(), [salt, salt])
}

/// The intact records of `bytes` from `at` on, checksummed under one of
/// `salts`, up to the first damage, as a [`Replay`] of `format`.
fn records_from(bytes: &[u8], format: WalFormat, mut at: usize, salts: Salts) -> Replay {
    let mut out = Replay {
        format,
        records: Vec::new(),
        damage: None,
    };
    while at < bytes.len() {
        let Some((end, payload)) = record_at(bytes, at, salts) else {
            out.damage = Some(at as u64);
            break;
        };
        out.records.push(Record {
            offset: at as u64,
            payload: payload.to_vec(),
        });
        at = end;
    }
    out
}

/// The records of a WAL whose header is damaged (`WalFormat::DamagedHeader`)
/// read as those of a version 3 WAL whose salt is bytes 12..20, when its
/// first record (at byte 24) verifies under them: up to the first damage,
/// `format` still `DamagedHeader` (the header's promise is unknown), but
/// `Closed` when half the header is the closed one
/// (`header::torn_from_closed`: the WAL ended in a close marker, so a
/// replay that finds none at its end reports the end lost, as it does
/// for the intact closed header; before, that end was dropped silently).
/// `None` when no record verifies there, so the salt is not the file's.
///
/// What it is for: a clean close's header rewrite (`seal.rs`) torn inside
/// its sector leaves the old header's bytes and the new one's mixed, and
/// both hold the file's salt at 12..20; every record was fsynced before.
/// The salt is 64 bits and every record's crc32 covers it, so records of
/// another WAL (another salt, or a flipped bit of this one's) or of a
/// version 2 WAL (none) verify only by a 2^-32 chance per record. Only a
/// point-in-time replay reads them: it needs no promise from the header.
/// `salted`: as in [`format_of`] (in a salted store a file whose magic
/// was damaged is read so too).
pub(crate) fn salvaged_records(bytes: &[u8], salted: bool) -> Option<Replay> {
    if format_of(bytes, salted) != WalFormat::DamagedHeader {
        return None;
    }
    let salt = bytes
        .get(12..20)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)?;
    let salts = [Some(salt), Some(salt)];
    record_at(bytes, header::HEADER_LEN, salts)?;
    // Half the closed header: the WAL ended in a close marker, whose loss
    // (with writes before it, cut at a record boundary) is a lost end.
    let format = if header::torn_from_closed(bytes, salt) {
        WalFormat::Closed { salt: Some(salt) }
    } else {
        WalFormat::DamagedHeader
    };
    Some(records_from(bytes, format, header::HEADER_LEN, salts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch(seq: u64) -> Vec<u8> {
        let mut b = crate::WriteBatch::new();
        b.put(&[seq as u8], &[seq as u8; 5]);
        b.encode(seq).to_vec()
    }

    /// A version 1 WAL of `records` (no salt).
    fn encode(records: &[Vec<u8>]) -> Vec<u8> {
        records.iter().flat_map(|r| record_bytes(None, r)).collect()
    }

    #[test]
    fn a_large_record_s_buffer_is_not_kept_and_a_usual_one_is() {
        let fs = crate::fs::fault::FaultFs::new();
        let path = std::path::Path::new("/wal");
        let file = crate::fs::FileSystem::create(&fs, path).unwrap();
        let mut wal = WalWriter::create(file, path.to_owned(), false).unwrap();
        wal.append(&[7; 1000], false).unwrap();
        let usual = wal.buf.capacity();
        assert!(usual >= 1008);
        wal.append(&[7; 900], false).unwrap();
        assert_eq!(
            wal.buf.capacity(),
            usual,
            "a usual record reuses the buffer"
        );
        wal.append(&vec![7; 8 << 20], false).unwrap();
        assert!(
            wal.buf.capacity() <= KEPT_BUFFER_BYTES,
            "an 8 MiB record's buffer is kept: {} bytes",
            wal.buf.capacity()
        );
        wal.append(&[7; 100], true).unwrap();
        let r = records(&crate::fs::FileSystem::read_all(&fs, path).unwrap());
        assert_eq!(r.damage, None);
        let lens: Vec<usize> = r.records.iter().map(|x| x.payload.len()).collect();
        assert_eq!(lens, [1000, 900, 8 << 20, 100]);
    }

    #[test]
    fn a_record_counts_only_under_its_file_s_salt() {
        let salted = record_bytes;
        let head = header::encode(true, 7);
        let own = [&head[..], &salted(Some(7), &batch(1))].concat();
        assert_eq!(records(&own).records.len(), 1);
        // Another WAL's record (another salt) or a version 2 one (none).
        for other in [None, Some(8)] {
            let foreign = [&head[..], &salted(other, &batch(1))].concat();
            let r = records(&foreign);
            assert_eq!(
                (r.records.len(), r.damage),
                (0, Some(header::HEADER_LEN as u64))
            );
            let budget = search_budget(&foreign);
            assert_eq!(
                record_follows(&foreign, 1, SeqFilter::From(1), budget),
                Some(false)
            );
        }
        // A version 2 file's records are checksummed without a salt.
        let v2 = [&header::encode_v2(true)[..], &salted(None, &batch(1))].concat();
        assert_eq!(records(&v2).records.len(), 1);
    }

    #[test]
    fn records_end_at_the_first_damage() {
        let batches = [batch(1), batch(2), batch(3)];
        let bytes = encode(&batches);
        for cut in 0..bytes.len() {
            let r = records(&bytes[..cut]);
            let covered: usize = r.records.iter().map(|x| x.payload.len() + 8).sum();
            assert_eq!(
                r.damage,
                (covered < cut).then_some(covered as u64),
                "cut {cut}"
            );
        }
        let mut damaged = bytes.clone();
        damaged[9] ^= 1; // inside the first record
        let r = records(&damaged);
        assert_eq!((r.records.len(), r.damage), (0, Some(0)));
        assert_eq!(
            records(&bytes).records[1].offset,
            (batches[0].len() + 8) as u64
        );
    }

    #[test]
    fn a_record_follows_only_with_a_sequence_the_filter_admits() {
        let bytes = encode(&[batch(1), batch(2), batch(9)]);
        let budget = search_budget(&bytes);
        let follows = |from, filter| record_follows(&bytes, from, filter, budget);
        assert_eq!(follows(1, SeqFilter::From(2)), Some(true));
        assert_eq!(follows(1, SeqFilter::Exactly(9)), Some(true));
        assert_eq!(follows(1, SeqFilter::Exactly(3)), Some(false));
        assert_eq!(follows(1, SeqFilter::From(10)), Some(false));
        // Four billion writes past the filter's start is not the same log.
        assert_eq!(follows(1, SeqFilter::From(2 + (1 << 32))), Some(false));
    }

    #[test]
    fn the_successor_of_a_torn_record_comes_from_its_batch_header() {
        let mut b = crate::WriteBatch::new();
        b.put(b"a", b"1").put(b"b", b"2").delete(b"c");
        let bytes = encode(&[b.encode(40).to_vec()]);
        for cut in [RECORD_HEADER_LEN + 12, bytes.len() - 1] {
            assert_eq!(
                successor_of_torn(&bytes[..cut], 0, 40),
                Some(43),
                "cut {cut}"
            );
        }
        // Too short to hold the count, or not the expected sequence.
        assert_eq!(
            successor_of_torn(&bytes[..RECORD_HEADER_LEN + 11], 0, 40),
            None
        );
        assert_eq!(successor_of_torn(&bytes, 0, 41), None);
    }

    #[test]
    fn crafted_damage_cannot_make_the_search_quadratic() {
        // Every 16th offset holds a length reaching to the end of the file
        // and a sequence the filter admits: a naive search checksums about
        // n^2/32 bytes. The budget ends it, as "undecidable".
        let n = 1 << 20;
        let mut bytes = vec![0xffu8; 8];
        while bytes.len() < n {
            let rest = n.saturating_sub(bytes.len() + 8) as u32;
            bytes.extend_from_slice(&rest.to_le_bytes());
            bytes.extend_from_slice(&[0xee; 4]);
            bytes.extend_from_slice(&7u64.to_le_bytes());
        }
        let budget = search_budget(&bytes);
        assert_eq!(record_follows(&bytes, 1, SeqFilter::From(7), budget), None);
        // Random bytes under a filter cost one comparison per offset.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let random: Vec<u8> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let tiny_budget = 1 << 16;
        assert_eq!(
            record_follows(&random, 0, SeqFilter::Exactly(12), tiny_budget),
            Some(false)
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            seq in any::<u64>(),
            headed in 0..3u8,
        ) {
            // As they are (version 1), or after a version 2 or 3 header,
            // so that the salted checksum is reached too.
            let bytes = match headed {
                0 => body,
                1 => [&header::encode_v2(true)[..], &body].concat(),
                _ => [&header::encode(true, seq)[..], &body].concat(),
            };
            let r = records(&bytes);
            if let Some(at) = r.damage {
                let _ = successor_of_torn(&bytes, at as usize, seq);
                let _ = record_at_framed_end(&bytes, at as usize, SeqFilter::From(seq));
            }
            let budget = search_budget(&bytes);
            let _ = record_follows(&bytes, 0, SeqFilter::From(seq), budget);
            let _ = record_follows(&bytes, 1, SeqFilter::Exactly(seq), budget);
            let _ = ends_with_close_marker(&bytes, seq);
        }
    }
}
