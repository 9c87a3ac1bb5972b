//! The manifest: which tables are live at which level, and the counters
//! recovery needs. Rewritten whole on every change: written to
//! `MANIFEST.tmp`, fsynced, renamed over `MANIFEST`, directory fsynced.
//!
//! ```text
//! magic u64 "bloomman" | store format version u32 | payload length u32 |
//! crc32 of version, length and payload u32 | payload
//! payload: next file number u64 | last sequence u64 | WAL number u64 |
//!          table count u32 | table*
//! table:   level u32 | file number u64 | file size u64 | entries u64 |
//!          smallest seq u64 | largest seq u64 |
//!          smallest key (u32 length, bytes) | largest key (u32 length, bytes)
//! ```

use std::path::{Path, PathBuf};

use bloomlsm_sstable::MAX_SEQUENCE;

use crate::damage::ManifestDamage;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, names};
use crate::table_files::MAX_FILE_NUMBER;

/// Manifest magic ("bloomman"). FROZEN.
pub(crate) const MANIFEST_MAGIC: u64 = 0x6e61_6d6d_6f6f_6c62;
/// Store format version this build writes; it reads every version up to
/// it. The manifest's layout is the same in both (FROZEN). 1: WALs without
/// a header. 2: WALs begin with a header (`wal/header.rs`) saying whether
/// their records were fsynced; a build that knows only version 1 would
/// read that header as damage and drop or refuse the WAL's writes, so it
/// must refuse the store instead. A version 1 store's WALs are replayed as
/// version 1 WALs, and its first read-write open writes version 2.
/// 3: a clean close appends a close marker (an empty batch,
/// `wal/seal.rs`) to the newest WAL; a build that knows only version 2
/// reads it as an intact record that is no batch of the log, corruption,
/// and would refuse the store naming a damage that is not there, so it
/// refuses the version instead. Older stores open unchanged (no WAL of
/// theirs holds a marker); a read-write open writes version 3.
/// 4: the close also sets a `CLOSED` flag in the marked WAL's header
/// (`wal/header.rs`), which a build that knows only version 3 reads as a
/// damaged header and refuses naming damage that is not there; it
/// refuses the version instead. Older stores open unchanged.
/// 5: new tables are written in table format version 2 (a delta-encoded
/// index block, `sstable/FORMAT.md`), which a build that knows only
/// version 4 reads as an unknown table version at the first table it
/// opens; it refuses the store's version instead. Older stores open
/// unchanged (their tables are version 1, which this build reads).
/// 6: new WALs are written in WAL format version 3 (a per-file salt in
/// the header and in every record's checksum, `wal/header.rs`), which a
/// build that knows only WAL version 2 reads as a damaged header: it
/// would refuse the store naming damage that is not there, or under
/// `WalRecovery::PointInTime` cut the WAL at byte 0 and drop its writes;
/// it refuses the version instead. Older stores open unchanged (their
/// WALs of version 1 and 2 are read as before).
pub const STORE_FORMAT_VERSION: u32 = 6;
/// The store format version since which every live WAL is of WAL format
/// version 3 (salted): such a store's first read-write open flushed the
/// older WALs it replayed before it wrote this version.
pub(crate) const SALTED_WALS_SINCE: u32 = 6;

/// The store format version a manifest's bytes name (after its magic), if
/// they are long enough to hold one.
pub(crate) fn store_format_version(bytes: &[u8]) -> Option<u32> {
    let v = bytes.get(8..12)?;
    Some(u32::from_le_bytes([v[0], v[1], v[2], v[3]]))
}
const HEADER_LEN: usize = 8 + 4 + 4 + 4;

/// One live table as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// Level (0 = newest, overlapping).
    pub level: usize,
    /// File number: the table is `{number:06}.sst`.
    pub number: u64,
    /// File size in bytes (checked at open).
    pub file_size: u64,
    /// Entries in the table.
    pub entries: u64,
    /// Smallest sequence number.
    pub smallest_seq: u64,
    /// Largest sequence number.
    pub largest_seq: u64,
    /// Smallest user key.
    pub smallest_key: Vec<u8>,
    /// Largest user key.
    pub largest_key: Vec<u8>,
}

impl TableMeta {
    /// The table's file in the store directory `dir`.
    pub fn file_path(&self, dir: &Path) -> PathBuf {
        crate::fs::names::table(dir, self.number)
    }
}

/// The tables the manifest of the store in `dir` names, as it records
/// them (for tools that read a table file on its own: a table's size is its
/// record's, and its file may be longer, `sstable/FORMAT.md`). Reads the
/// file only; takes no lock, so a store being written may replace the
/// manifest meanwhile.
pub fn table_records(dir: &Path) -> Result<Vec<TableMeta>> {
    let path = dir.join(crate::fs::names::MANIFEST);
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Ok(ManifestState::decode(&path, &bytes)?.tables)
}

/// The durable state of a store.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct ManifestState {
    pub(crate) next_file_number: u64,
    pub(crate) last_seq: u64,
    /// WALs numbered below this are fully flushed into tables.
    pub(crate) wal_number: u64,
    pub(crate) tables: Vec<TableMeta>,
}

impl ManifestState {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        for v in [self.next_file_number, self.last_seq, self.wal_number] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for t in &self.tables {
            p.extend_from_slice(&(t.level as u32).to_le_bytes());
            for v in [
                t.number,
                t.file_size,
                t.entries,
                t.smallest_seq,
                t.largest_seq,
            ] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            for k in [&t.smallest_key, &t.largest_key] {
                p.extend_from_slice(&(k.len() as u32).to_le_bytes());
                p.extend_from_slice(k);
            }
        }
        let mut out = Vec::with_capacity(HEADER_LEN + p.len());
        out.extend_from_slice(&MANIFEST_MAGIC.to_le_bytes());
        out.extend_from_slice(&STORE_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        let crc = checksum(&out[8..16], &p);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&p);
        out
    }

    /// Decodes a manifest file's bytes. Never panics.
    pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        let corrupt =
            |offset: usize, reason: ManifestDamage| Error::corruption(path, offset as u64, reason);
        if bytes.len() < HEADER_LEN {
            return Err(corrupt(0, ManifestDamage::TooShort));
        }
        let mut r = Reader { bytes, at: 0 };
        let short = || corrupt(0, ManifestDamage::TooShort);
        let magic = r.u64().ok_or_else(short)?;
        if magic != MANIFEST_MAGIC {
            return Err(corrupt(0, ManifestDamage::BadMagic { found: magic }));
        }
        let version = r.u32().ok_or_else(short)?;
        let len = r.u32().ok_or_else(short)? as usize;
        let crc = r.u32().ok_or_else(short)?;
        let payload = bytes.get(HEADER_LEN..).unwrap_or(&[]);
        if payload.len() != len {
            return Err(corrupt(
                HEADER_LEN,
                ManifestDamage::Length {
                    header: len,
                    actual: payload.len(),
                },
            ));
        }
        let computed = checksum(&bytes[8..16], payload);
        if computed != crc {
            return Err(corrupt(
                HEADER_LEN,
                ManifestDamage::Checksum {
                    stored: crc,
                    computed,
                },
            ));
        }
        if version > STORE_FORMAT_VERSION {
            return Err(Error::UnsupportedFormat {
                path: path.to_path_buf(),
                found: version,
                supported: STORE_FORMAT_VERSION,
            });
        }
        let mut r = Reader {
            bytes: payload,
            at: 0,
        };
        let bad = || corrupt(HEADER_LEN, ManifestDamage::Undecodable);
        let next_file_number = r.u64().ok_or_else(bad)?;
        let last_seq = r.u64().ok_or_else(bad)?;
        let wal_number = r.u64().ok_or_else(bad)?;
        let count = r.u32().ok_or_else(bad)?;
        let mut tables = Vec::new();
        for _ in 0..count {
            let level = r.u32().ok_or_else(bad)? as usize;
            let number = r.u64().ok_or_else(bad)?;
            let file_size = r.u64().ok_or_else(bad)?;
            let entries = r.u64().ok_or_else(bad)?;
            let smallest_seq = r.u64().ok_or_else(bad)?;
            let largest_seq = r.u64().ok_or_else(bad)?;
            let smallest_key = r.bytes_u32().ok_or_else(bad)?;
            let largest_key = r.bytes_u32().ok_or_else(bad)?;
            tables.push(TableMeta {
                level,
                number,
                file_size,
                entries,
                smallest_seq,
                largest_seq,
                smallest_key,
                largest_key,
            });
        }
        if r.at != payload.len() {
            return Err(bad());
        }
        let state = Self {
            next_file_number,
            last_seq,
            wal_number,
            tables,
        };
        state
            .check()
            .map_err(|reason| corrupt(HEADER_LEN, reason))?;
        Ok(state)
    }

    /// What every manifest this code writes satisfies; a checksummed but
    /// crafted one that does not would overflow counters, break the
    /// read path's order, have a compaction delete a file a live table
    /// still reads (a file named by two records), or drop every WAL
    /// unread (a WAL number at or past the next file number).
    fn check(&self) -> std::result::Result<(), ManifestDamage> {
        if self.last_seq > MAX_SEQUENCE {
            return Err(ManifestDamage::LastSequence(self.last_seq));
        }
        if self.next_file_number > MAX_FILE_NUMBER {
            return Err(ManifestDamage::FileNumber(self.next_file_number));
        }
        for t in &self.tables {
            let fits = t.smallest_seq <= t.largest_seq
                && t.largest_seq <= self.last_seq
                && t.smallest_key <= t.largest_key
                && t.number < self.next_file_number;
            if !fits {
                return Err(ManifestDamage::Table {
                    number: t.number,
                    smallest: t.smallest_seq,
                    largest: t.largest_seq,
                });
            }
        }
        self.check_files()
    }

    /// The part of [`Self::check`] about the files the state names.
    fn check_files(&self) -> std::result::Result<(), ManifestDamage> {
        // Each file is one table: the store opens one reader per record,
        // and each record's table deletes the file when it is replaced
        // (`version::TableFileLife`). A trivial move or an in-place filter
        // rebuild hands the file on, so a written manifest never names a
        // number twice.
        let mut numbers: Vec<u64> = self.tables.iter().map(|t| t.number).collect();
        numbers.sort_unstable();
        if let Some(pair) = numbers.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(ManifestDamage::DuplicateTable { number: pair[0] });
        }
        // The oldest live WAL was handed a number below the next one; at
        // or past it, every WAL on disk would read as flushed and go.
        if self.wal_number >= self.next_file_number {
            return Err(ManifestDamage::WalNumber {
                wal: self.wal_number,
                next: self.next_file_number,
            });
        }
        Ok(())
    }

    /// Makes this state the store's manifest atomically: written to a
    /// temporary file, fsynced, renamed over `MANIFEST`, directory fsynced.
    /// A state that fails [`Self::check`] is refused before any file is
    /// touched ([`Error::ManifestRefused`]).
    pub(crate) fn write(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        self.write_staged(fs, dir).map_err(|failure| match failure {
            ManifestWriteFailure::BeforeRename(e) | ManifestWriteFailure::AfterRename(e) => e,
        })
    }

    /// [`Self::write`], saying how far a failure got: before the rename the
    /// previous manifest is still the store's, so files created for this
    /// state may be removed; after it, this state may be the durable one.
    pub(crate) fn write_staged(
        &self,
        fs: &dyn FileSystem,
        dir: &Path,
    ) -> std::result::Result<(), ManifestWriteFailure> {
        use ManifestWriteFailure::{AfterRename, BeforeRename};
        // Never a manifest the next open refuses (`check`, run by
        // `decode`): a table newer than the last sequence, a file named
        // twice, a WAL number at or past the next file number. A bug that
        // built such a state fails this install, which stops writes, and
        // the store's manifest stays the last good one, where written it
        // would lock the store at its next open. Linear in the tables
        // (the sort of their numbers aside), as the write itself is.
        self.check()
            .map_err(|reason| BeforeRename(Error::ManifestRefused(reason)))?;
        let tmp = dir.join(names::MANIFEST_TMP);
        let path = dir.join(names::MANIFEST);
        let mut file = fs.create(&tmp).map_err(|e| BeforeRename(e.into()))?;
        file.write_all(&self.encode())
            .map_err(|e| BeforeRename(Error::io(&tmp, e)))?;
        file.sync().map_err(|e| BeforeRename(Error::io(&tmp, e)))?;
        drop(file);
        fs.rename(&tmp, &path).map_err(|e| BeforeRename(e.into()))?;
        fs.sync_dir(dir).map_err(|e| AfterRename(e.into()))
    }
}

/// How far a failed [`ManifestState::write_staged`] got.
#[derive(Debug)]
pub(crate) enum ManifestWriteFailure {
    /// `MANIFEST` is unchanged (a `MANIFEST.tmp` may be left).
    BeforeRename(Error),
    /// `MANIFEST` was replaced; the directory fsync failed.
    AfterRename(Error),
}

/// crc32 over version, length and payload.
fn checksum(version_and_len: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(version_and_len);
    h.update(payload);
    h.finalize()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }
    fn bytes_u32(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        self.take(n).map(<[u8]>::to_vec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_every_flip_detected() {
        let state = ManifestState {
            next_file_number: 9,
            last_seq: 100,
            wal_number: 7,
            tables: vec![TableMeta {
                level: 1,
                number: 3,
                file_size: 4096,
                entries: 10,
                smallest_seq: 1,
                largest_seq: 10,
                smallest_key: b"a".to_vec(),
                largest_key: b"z".to_vec(),
            }],
        };
        let bytes = state.encode();
        let p = Path::new("MANIFEST");
        assert_eq!(ManifestState::decode(p, &bytes).unwrap(), state);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            assert!(ManifestState::decode(p, &b).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn every_refusal_names_its_reason() {
        let p = Path::new("MANIFEST");
        let reason = |bytes: &[u8]| match ManifestState::decode(p, bytes) {
            Err(Error::Corruption {
                reason: crate::damage::Damage::Manifest(m),
                ..
            }) => m,
            other => panic!("{other:?}"),
        };
        let good = ManifestState {
            next_file_number: 9,
            last_seq: 100,
            wal_number: 7,
            tables: Vec::new(),
        };
        let bytes = good.encode();
        assert_eq!(reason(&bytes[..5]), ManifestDamage::TooShort);
        let mut magic = bytes.clone();
        magic[0] ^= 1;
        assert!(matches!(reason(&magic), ManifestDamage::BadMagic { .. }));
        assert!(matches!(
            reason(&bytes[..bytes.len() - 1]),
            ManifestDamage::Length { .. }
        ));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(reason(&flipped), ManifestDamage::Checksum { .. }));
        let crafted = |state: ManifestState| reason(&state.encode());
        assert_eq!(
            crafted(ManifestState {
                last_seq: MAX_SEQUENCE + 1,
                ..good.clone()
            }),
            ManifestDamage::LastSequence(MAX_SEQUENCE + 1)
        );
        assert_eq!(
            crafted(ManifestState {
                next_file_number: u64::MAX,
                ..good.clone()
            }),
            ManifestDamage::FileNumber(u64::MAX)
        );
        let table = TableMeta {
            level: 1,
            number: 3,
            file_size: 1,
            entries: 1,
            smallest_seq: 5,
            largest_seq: 101,
            smallest_key: b"a".to_vec(),
            largest_key: b"b".to_vec(),
        };
        assert!(matches!(
            crafted(ManifestState {
                tables: vec![table.clone()],
                ..good.clone()
            }),
            ManifestDamage::Table { number: 3, .. }
        ));
        assert_eq!(
            crafted(ManifestState {
                wal_number: 9,
                ..good.clone()
            }),
            ManifestDamage::WalNumber { wal: 9, next: 9 }
        );
        // One file named at two levels, each record valid on its own.
        let fits = TableMeta {
            largest_seq: 100,
            ..table
        };
        let deeper = TableMeta {
            level: 3,
            ..fits.clone()
        };
        assert_eq!(
            crafted(ManifestState {
                tables: vec![fits, deeper],
                ..good
            }),
            ManifestDamage::DuplicateTable { number: 3 }
        );
    }

    /// The writer holds itself to what the open checks: a state `decode`
    /// would refuse (a bug's: a table named twice, the WAL number at the
    /// next file number, a table newer than the last sequence or numbered
    /// at the next file number) is never renamed into place, and the
    /// manifest on disk stays the last good one, which the next open
    /// accepts.
    #[test]
    fn a_state_the_open_would_refuse_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::fs::RealFs;
        let table = TableMeta {
            level: 1,
            number: 3,
            file_size: 10,
            entries: 1,
            smallest_seq: 1,
            largest_seq: 5,
            smallest_key: b"a".to_vec(),
            largest_key: b"b".to_vec(),
        };
        let good = ManifestState {
            next_file_number: 9,
            last_seq: 100,
            wal_number: 7,
            tables: vec![table.clone()],
        };
        good.write(&fs, dir.path()).unwrap();
        let named_twice = ManifestState {
            tables: vec![table.clone(), TableMeta { level: 2, ..table }],
            ..good.clone()
        };
        let wal_at_next = ManifestState {
            wal_number: 9,
            ..good.clone()
        };
        let above_last_seq = ManifestState {
            last_seq: 4,
            ..good.clone()
        };
        let number_at_next = ManifestState {
            next_file_number: 3,
            wal_number: 2,
            ..good.clone()
        };
        for bad in [named_twice, wal_at_next, above_last_seq, number_at_next] {
            let expected = ManifestState::decode(p(), &bad.encode());
            let Err(Error::Corruption {
                reason: crate::damage::Damage::Manifest(expected),
                ..
            }) = expected
            else {
                panic!("the open accepts {bad:?}");
            };
            match bad.write(&fs, dir.path()) {
                Err(Error::ManifestRefused(reason)) => assert_eq!(reason, expected),
                other => panic!("{bad:?}: {other:?}"),
            }
            let path = dir.path().join(names::MANIFEST);
            let on_disk = ManifestState::decode(&path, &std::fs::read(&path).unwrap());
            assert_eq!(on_disk.unwrap(), good);
        }
    }

    /// `fuzzing::resealed::reseal_manifest` frames random fields into
    /// manifests with a valid checksum that decode (so the property test
    /// below reaches past the checksum), or that fail the decoder's own
    /// checks when not repaired.
    #[test]
    fn resealed_manifests_reach_the_decoder() {
        use crate::fuzzing::resealed::{exercise_manifest, reseal_manifest};
        let mut data = vec![5 | 32];
        data.extend((0..300u32).map(|i| (i * 91 + 7) as u8));
        assert!(exercise_manifest(&reseal_manifest(&data)));
        let state = ManifestState::decode(p(), &reseal_manifest(&data)).unwrap();
        assert!(!state.tables.is_empty());
        data[0] = 5;
        data[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            ManifestState::decode(p(), &reseal_manifest(&data)),
            Err(Error::Corruption { .. })
        ));
    }

    fn p() -> &'static Path {
        Path::new("MANIFEST")
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = ManifestState::decode(Path::new("m"), &bytes);
        }

        /// Random fields in a manifest with a valid checksum (as the fuzz
        /// target `manifest_resealed`): decoding never panics, and what
        /// decodes names no more tables than its bytes hold and re-encodes
        /// as its version says (`fuzzing::resealed::exercise_manifest`).
        #[test]
        fn resealed_random_fields_decode_safely(
            ctl in any::<u8>(),
            fields in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            let mut data = vec![ctl];
            data.extend_from_slice(&fields);
            let bytes = crate::fuzzing::resealed::reseal_manifest(&data);
            crate::fuzzing::resealed::exercise_manifest(&bytes);
        }
    }
}
