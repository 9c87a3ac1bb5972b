//! The header of a WAL file (format version 3): what its writer promised
//! about the records after it, so that recovery can tell bytes a power
//! loss never wrote from damage to bytes that were durable, and the salt
//! that makes its records its own.
//!
//! `magic "bloomWAL" (8 bytes) | version: u16 LE = 3 | flags: u16 LE |
//! salt: u64 LE | crc32 of the 20 bytes before: u32 LE`, then the records.
//!
//! The salt is drawn at random when the file is created (`new_salt`), and
//! every record's crc32 covers it (the salt's 8 bytes, then the payload:
//! `record_crc`). Why: recovery decides whether damage is a torn tail or
//! lost durable data by looking past it for an intact record of the log
//! (`replay.rs`). Without the salt, WAL records of another log stored in
//! a value (a replica's copy of a primary's WAL, whose sequences run near
//! this store's) verify too, and a torn append of such a value, its
//! header page lost by a power cut, was refused as corruption though the
//! write was never acknowledged. With it they fail the checksum (as
//! SQLite salts its WAL frames, and RocksDB's recyclable log records
//! carry their log number). A record of this very file stored in a value
//! would verify, but the writer cannot know the salt without reading the
//! live WAL file, and such a copy carries a sequence the log has passed,
//! which the search's sequence filter refuses.
//!
//! Version 2 (older builds): `magic | version = 2 | flags | crc32 of the
//! 12 bytes before`, 16 bytes, no salt; its records' crc32 covers the
//! payload alone. It is read as before, so the search in such a WAL can
//! still take another log's records in a torn value for its own (the
//! refusal above stays possible until the store's WALs are all version
//! 3: the first read-write open replays and flushes them). A version
//! this build does not know is a damaged header. Flags mean the same in
//! both versions.
//!
//! Flag bit 0, `SYNCED`: the writer fsynced every record before it
//! appended the next, and the file before the next WAL's first record
//! (`SyncMode::Always`). Without it (`SyncMode::Never`) no record was
//! fsynced while the store ran; a power loss may then have kept any of the
//! file's pages past the header and lost others (a page cache and a disk
//! cache write back in any order), so damage followed by intact records
//! is what such a crash leaves, not proof of corruption.
//!
//! A clean close sets `SYNCED` in a `SyncMode::Never` WAL's header too
//! (`seal.rs`): only once the close has fsynced every live WAL without an
//! error, in a store whose writes were not stopped by one, so every record
//! before it is durable and damage after it is corruption, as in a synced
//! WAL. The header is rewritten in place (its salt kept), within one
//! sector, and fsynced:
//! a power loss before that fsync leaves either header, both true; a torn
//! rewrite leaves a header that fails its checksum, read strictly
//! (`DamagedHeader`), which refuses the open and loses nothing, since the
//! records were fsynced first: `WalRecovery::PointInTime` opens it with
//! every record, read under the salt at bytes 12..20, which the old and
//! the new header share (`wal::salvaged_records`: only when the first
//! record verifies under it, so a flipped salt bit still reads nothing).
//! A WAL of a header alone (no write in it at the close) held no record:
//! torn so, it opens in either mode with no cut (`header_only`).
//! (Replay refuses a damaged header with any
//! byte other than zero after it, `WalDamage::DamagedHeader`, and, in a
//! store whose WALs are all of version 3 (store format 6 or more), a file
//! without the magic, zeros or any other bytes, with any byte other than
//! zero past a header's length: without the salt the records after it
//! could not be checked.)
//!
//! Flag bit 1, `CLOSED` (only with `SYNCED`): set by the same rewrite on
//! the WAL the close appended its close marker to, after the marker's
//! fsync: the WAL ends with that marker, so damage at its end (a zeroed
//! last page taking the last writes and the marker) is corruption, not the
//! torn tail a crash mid-append leaves. Other flags are damage.
//!
//! The header is written and fsynced when the file is created, before any
//! record is appended: a WAL that holds a record has its header durable.
//! A file that does not begin with the magic is a version 1 WAL (written
//! before the header existed): its records start at byte 0, their crc32
//! over the payload alone, and recovery reads it strictly, as if synced. A version 1 file begins with the magic
//! only if its first record is a batch of exactly 1,869,573,218 bytes whose
//! checksum is the magic's last four bytes (a 2^-32 chance at that size).

/// Bytes of the header this build writes (version 3).
pub(crate) const HEADER_LEN: usize = 24;
/// Bytes of a version 2 header (no salt), written by older builds.
pub(crate) const V2_HEADER_LEN: usize = 16;

const MAGIC: [u8; 8] = *b"bloomWAL";
/// The version this build writes.
const VERSION: u16 = 3;
/// The version before the salt, still read.
const V2: u16 = 2;
/// Flag: each record was fsynced before the next was appended.
const SYNCED: u16 = 1;
/// Flag (with `SYNCED` only): a clean close appended and fsynced a close
/// marker as this WAL's last record before setting it (`seal.rs`), so the
/// WAL's end is that marker, and damage there is no torn tail.
const CLOSED: u16 = 2;

/// How a WAL's bytes begin, and so how recovery may read damage in it.
/// `salt`: the salt of a version 3 header, which every record's checksum
/// covers; `None` in a version 2 WAL (checksum over the payload alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalFormat {
    /// Version 1: no header, records from byte 0.
    Unheaded,
    /// Version 2 or 3. `synced`: the writer fsynced each record before
    /// the next.
    Headed { synced: bool, salt: Option<u64> },
    /// Version 2 or 3, synced, and closed: its last record is a close
    /// marker a clean close fsynced before rewriting the header to say so.
    Closed { salt: Option<u64> },
    /// The magic, then a header that is damaged or of a version this build
    /// does not know: no record of it is read.
    DamagedHeader,
}

impl WalFormat {
    /// Where the first record starts (for a damaged header, where its
    /// damage starts).
    pub(crate) const fn records_start(self) -> usize {
        match self {
            Self::Unheaded | Self::DamagedHeader => 0,
            Self::Headed { salt: None, .. } | Self::Closed { salt: None } => V2_HEADER_LEN,
            Self::Headed { salt: Some(_), .. } | Self::Closed { salt: Some(_) } => HEADER_LEN,
        }
    }

    /// The salt every record's checksum covers (version 3 only).
    pub(crate) const fn salt(self) -> Option<u64> {
        match self {
            Self::Headed { salt, .. } | Self::Closed { salt } => salt,
            Self::Unheaded | Self::DamagedHeader => None,
        }
    }

    /// Whether the header says a clean close ended this WAL with a marker.
    pub(crate) const fn is_closed(self) -> bool {
        matches!(self, Self::Closed { .. })
    }

    /// Whether every record was durable before the next one was written,
    /// so that damage followed by an intact record can only be corruption.
    /// True unless the header says otherwise: a version 1 WAL or a damaged
    /// header promises nothing we could relax.
    pub(crate) const fn each_record_durable(self) -> bool {
        !matches!(self, Self::Headed { synced: false, .. })
    }
}

/// The checksum of a record of `payload` in a WAL whose header holds
/// `salt` (version 3: crc32 of the salt's 8 bytes LE, then the payload),
/// or none (versions 1 and 2: crc32 of the payload).
pub(crate) fn record_crc(salt: Option<u64>, payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    if let Some(salt) = salt {
        crc.update(&salt.to_le_bytes());
    }
    crc.update(payload);
    crc.finalize()
}

/// A salt for a new WAL file: random per file (`RandomState`'s keys are
/// random per process and differ per instance), mixed with the file's
/// path and the time, so two WALs, of one store or of two, differ in it
/// but by a 2^-64 chance.
pub(crate) fn new_salt(path: &std::path::Path) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    path.hash(&mut h);
    std::process::id().hash(&mut h);
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        t.as_nanos().hash(&mut h);
    }
    h.finish()
}

/// The header of a new WAL whose writer fsyncs each record (`synced`) or
/// not, its records checksummed with `salt`.
pub(crate) fn encode(synced: bool, salt: u64) -> [u8; HEADER_LEN] {
    with_flags(if synced { SYNCED } else { 0 }, salt)
}

/// The header of a WAL whose records a clean close fsynced, the last one
/// its close marker; `salt` is the one the file was created with.
pub(crate) fn encode_closed(salt: u64) -> [u8; HEADER_LEN] {
    with_flags(SYNCED | CLOSED, salt)
}

/// A version 3 header of any flags.
pub(crate) fn with_flags(flags: u16, salt: u64) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    out[10..12].copy_from_slice(&flags.to_le_bytes());
    out[12..20].copy_from_slice(&salt.to_le_bytes());
    let crc = crc32fast::hash(&out[..20]);
    out[20..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A version 2 header (no salt) of any flags, as older builds wrote it:
/// for tests and fuzz targets that read WALs of those builds.
pub(crate) fn v2_with_flags(flags: u16) -> [u8; V2_HEADER_LEN] {
    let mut out = [0u8; V2_HEADER_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&V2.to_le_bytes());
    out[10..12].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32fast::hash(&out[..12]);
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A version 2 header of a WAL synced or not.
pub(crate) fn encode_v2(synced: bool) -> [u8; V2_HEADER_LEN] {
    v2_with_flags(if synced { SYNCED } else { 0 })
}

/// A version 2 header of a closed WAL.
#[cfg(test)]
pub(crate) fn encode_closed_v2() -> [u8; V2_HEADER_LEN] {
    v2_with_flags(SYNCED | CLOSED)
}

/// Whether `bytes`, a whole WAL file, are what a power loss leaves of a
/// WAL whose header's fsync never returned: a proper prefix of a header
/// this build or an older one writes (its write torn: for version 3, the
/// magic, version and flags of a new WAL as far as they reach, then any
/// bytes of the salt and checksum), or zeros no longer than a version 3
/// header (the file's length durable, the directory entry too, say by a
/// later fsync of the directory, but its page never written back, which
/// ext4 and xfs show as zeros: `UnsyncedFate::Pages`). The header is
/// fsynced before any record is appended (`WalWriter::create`), so such a
/// file never held a record.
///
/// No file that held an acknowledged write reads so: such a write's
/// record was fsynced after a durable header (in `SyncMode::Never`, by
/// the clean close that appended the close marker after it), and a power
/// loss keeps a file's fsynced length and bytes, so the file is longer
/// than a header and its header intact. A device that zeroed a durable
/// page leaves the file's length, so a WAL whose only page it zeroed
/// reads as more zeros than a header (a record is at least 20 bytes, a
/// version 2 header 16) and is cut as before. A version 1 WAL (no
/// header) of at most 24 zeros is read the same way: a record of a write
/// is more than 24 bytes, so its first record's append was torn and never
/// fsynced, no acknowledged write.
pub(crate) fn never_durable(bytes: &[u8]) -> bool {
    if bytes.is_empty() || bytes.len() > HEADER_LEN {
        return false;
    }
    let v2_torn = bytes.len() < V2_HEADER_LEN
        && [encode_v2(false), encode_v2(true)]
            .iter()
            .any(|h| h.starts_with(bytes));
    // Magic, version and flags of a new version 3 WAL; the salt and
    // checksum after them are any bytes.
    let v3_torn = bytes.len() < HEADER_LEN
        && [encode(false, 0), encode(true, 0)].iter().any(|h| {
            let fixed = bytes.len().min(12);
            h[..fixed] == bytes[..fixed]
        });
    v2_torn || v3_torn || bytes.iter().all(|&b| b == 0)
}

/// Whether `bytes`, a whole WAL file, are a version 3 header's length and
/// begin with its magic and version, whatever its flags, salt and
/// checksum: a WAL of this build that never held a record (the smallest
/// record of a write, a delete of an empty key, is 25 bytes), whose
/// header may fail its checksum: a clean close's rewrite of it
/// (`seal.rs`, a `SyncMode::Never` WAL holding no write) torn inside its
/// sector. None of its bytes is a write not replayed.
pub(crate) fn header_only(bytes: &[u8]) -> bool {
    bytes.len() == HEADER_LEN
        && bytes[..MAGIC.len()] == MAGIC
        && bytes[8..10] == VERSION.to_le_bytes()
}

/// Whether `bytes`, a whole WAL file whose header is damaged, hold half
/// of the header a clean close writes on the WAL it appended its close
/// marker to (`encode_closed` of `salt`, the salt at bytes 12..20): its
/// flags field, or its checksum. A rewrite torn inside its sector keeps
/// one half of the old header and one of the new; the closed one is
/// written only after the marker's fsync (`seal.rs`), so such a WAL ended
/// in a marker whichever half survived, and a point-in-time replay that
/// finds no marker at its end reports the end lost, as under the intact
/// header (`wal::salvaged_records`). A tear at any byte counts too: a
/// header whose every byte is the old (open, synced or not) header's or
/// the closed one's, and at least one byte only the closed one's (a
/// checksum of new and old bytes under the old flags holds neither whole
/// half). A bit flip making a synced header's flags read closed claims
/// it too, and so does the one making its checksum's last byte the
/// closed header's (bit 2 of byte 23, for every salt: CRC-32 is affine,
/// so where the two checksums agree does not depend on the salt; no torn
/// unsynced-to-synced seal claims it, `replay/review28_tests.rs`): at
/// worst a lost end reported where no write was lost, never a write
/// dropped or added (`Closed` changes only the newest WAL's cut).
pub(crate) fn torn_from_closed(bytes: &[u8], salt: u64) -> bool {
    let closed = encode_closed(salt);
    let half =
        bytes.get(10..12) == Some(&closed[10..12]) || bytes.get(20..24) == Some(&closed[20..24]);
    half || bytes.get(..HEADER_LEN).is_some_and(|h| {
        [encode(true, salt), encode(false, salt)]
            .iter()
            .any(|old| byte_tear_between(h, old, &closed))
    })
}

/// Whether each byte of `h` is `old`'s or `new`'s at its place, and some
/// byte is only `new`'s: what a rewrite of `old` to `new` torn at byte
/// granularity leaves.
fn byte_tear_between(h: &[u8], old: &[u8; HEADER_LEN], new: &[u8; HEADER_LEN]) -> bool {
    // Every byte one of the two's, and not `old` whole: some byte is
    // then only `new`'s.
    h != old
        && h.iter()
            .zip(old.iter().zip(new))
            .all(|(b, (o, n))| b == o || b == n)
}

/// The length of the intact header `bytes` begin with (0 if none).
#[cfg(test)]
pub(crate) fn format_of_len(bytes: &[u8]) -> usize {
    decode(bytes).records_start()
}

/// How `bytes`, a whole WAL file, begin. Never panics on any bytes.
pub(crate) fn decode(bytes: &[u8]) -> WalFormat {
    if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return WalFormat::Unheaded;
    }
    let Some(version) = bytes.get(8..10).map(|v| u16::from_le_bytes([v[0], v[1]])) else {
        return WalFormat::DamagedHeader;
    };
    let (len, salt) = match version {
        V2 => (V2_HEADER_LEN, None),
        VERSION => (HEADER_LEN, Some(12)),
        _ => return WalFormat::DamagedHeader,
    };
    let Some(header) = bytes.get(..len) else {
        return WalFormat::DamagedHeader;
    };
    let crc_at = len - 4;
    let crc = u32::from_le_bytes([
        header[crc_at],
        header[crc_at + 1],
        header[crc_at + 2],
        header[crc_at + 3],
    ]);
    let flags = u16::from_le_bytes([header[10], header[11]]);
    let known = flags == 0 || flags == SYNCED || flags == SYNCED | CLOSED;
    if crc32fast::hash(&header[..crc_at]) != crc || !known {
        return WalFormat::DamagedHeader;
    }
    let salt = salt.and_then(|at: usize| {
        header
            .get(at..at + 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    });
    if flags & CLOSED != 0 {
        return WalFormat::Closed { salt };
    }
    WalFormat::Headed {
        synced: flags & SYNCED != 0,
        salt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SALT: u64 = 0x0123_4567_89ab_cdef;

    #[test]
    fn a_header_decodes_to_what_it_promised() {
        for synced in [false, true] {
            let mut bytes = encode(synced, SALT).to_vec();
            let want = WalFormat::Headed {
                synced,
                salt: Some(SALT),
            };
            assert_eq!(decode(&bytes), want);
            bytes.extend_from_slice(b"records follow");
            assert_eq!(decode(&bytes), want);
            assert_eq!(want.records_start(), HEADER_LEN);
        }
        assert_eq!(
            decode(&encode_closed(SALT)),
            WalFormat::Closed { salt: Some(SALT) }
        );
        // Closed without synced, or an unknown flag: damage.
        assert_eq!(decode(&with_flags(CLOSED, SALT)), WalFormat::DamagedHeader);
        assert_eq!(
            decode(&with_flags(4 | SYNCED, SALT)),
            WalFormat::DamagedHeader
        );
        assert!(WalFormat::Closed { salt: None }.each_record_durable());
    }

    #[test]
    fn a_version_2_header_still_decodes_without_a_salt() {
        for synced in [false, true] {
            let got = decode(&encode_v2(synced));
            assert_eq!(got, WalFormat::Headed { synced, salt: None });
            assert_eq!(got.records_start(), V2_HEADER_LEN);
            assert_eq!(got.salt(), None);
        }
        assert_eq!(
            decode(&encode_closed_v2()),
            WalFormat::Closed { salt: None }
        );
        // Its records are checksummed over the payload alone.
        assert_eq!(record_crc(None, b"payload"), crc32fast::hash(b"payload"));
    }

    #[test]
    fn the_salt_round_trips_and_is_in_every_record_checksum() {
        for salt in [0, 1, SALT, u64::MAX] {
            assert_eq!(decode(&encode(true, salt)).salt(), Some(salt));
            assert_eq!(decode(&encode_closed(salt)).salt(), Some(salt));
        }
        assert_ne!(
            record_crc(Some(1), b"payload"),
            record_crc(Some(2), b"payload")
        );
        assert_ne!(
            record_crc(Some(1), b"payload"),
            record_crc(None, b"payload")
        );
        let a = new_salt(std::path::Path::new("/db/000001.log"));
        let b = new_salt(std::path::Path::new("/db/000001.log"));
        assert_ne!(a, b, "two WAL files drew the same salt");
    }

    #[test]
    fn an_unknown_version_is_a_damaged_header() {
        for version in [0u16, 1, 4, u16::MAX] {
            let mut bytes = encode(true, SALT);
            bytes[8..10].copy_from_slice(&version.to_le_bytes());
            let crc = crc32fast::hash(&bytes[..20]);
            bytes[20..].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(decode(&bytes), WalFormat::DamagedHeader, "{version}");
        }
    }

    #[test]
    fn any_flipped_bit_or_cut_of_a_header_is_damage_never_another_promise() {
        let headers: [Vec<u8>; 4] = [
            encode(false, SALT).to_vec(),
            encode(true, SALT).to_vec(),
            encode_v2(false).to_vec(),
            encode_v2(true).to_vec(),
        ];
        for good in headers {
            for bit in 0..good.len() * 8 {
                let mut bytes = good.clone();
                bytes[bit / 8] ^= 1 << (bit % 8);
                let got = decode(&bytes);
                // A flip in the magic makes a version 1 file, whose first
                // record is then damaged at byte 0; a flip in the salt
                // (or any byte after the magic) fails the checksum.
                let expected = if bit < 64 {
                    WalFormat::Unheaded
                } else {
                    WalFormat::DamagedHeader
                };
                assert_eq!(got, expected, "{good:?}, bit {bit}");
            }
            for cut in 8..good.len() {
                assert_eq!(decode(&good[..cut]), WalFormat::DamagedHeader);
            }
            for cut in 0..8 {
                assert_eq!(decode(&good[..cut]), WalFormat::Unheaded);
            }
        }
    }

    #[test]
    fn a_header_never_made_durable_is_a_prefix_of_one_or_zeros_no_longer() {
        for synced in [false, true] {
            let h = encode(synced, SALT);
            for len in 1..HEADER_LEN {
                assert!(never_durable(&h[..len]), "synced {synced}, {len} bytes");
            }
            // A whole header is a WAL with no record yet, not a torn one.
            assert!(!never_durable(&h));
            let v2 = encode_v2(synced);
            for len in 1..V2_HEADER_LEN {
                assert!(never_durable(&v2[..len]), "v2 synced {synced}, {len}");
            }
            assert!(!never_durable(&v2));
        }
        for len in 1..=HEADER_LEN {
            assert!(never_durable(&vec![0; len]), "{len} zeros");
        }
        // An empty file is a WAL created and never written: no bytes to
        // count either way. Past a header's length the zeros may be a
        // durable page a device lost, records and all.
        assert!(!never_durable(&[]));
        assert!(!never_durable(&[0; HEADER_LEN + 1]));
        assert!(!never_durable(b"bloomWAX"));
        assert!(!never_durable(&encode_closed(SALT)[..20]));
        let mut one_bit = [0u8; HEADER_LEN];
        one_bit[HEADER_LEN - 1] = 1;
        assert!(!never_durable(&one_bit));
    }

    #[test]
    fn only_an_unsynced_header_relaxes_recovery() {
        for salt in [None, Some(SALT)] {
            assert!(
                !WalFormat::Headed {
                    synced: false,
                    salt
                }
                .each_record_durable()
            );
            assert!(WalFormat::Headed { synced: true, salt }.each_record_durable());
        }
        assert!(WalFormat::Unheaded.each_record_durable());
        assert!(WalFormat::DamagedHeader.each_record_durable());
    }

    #[test]
    fn a_version_1_record_begins_with_the_magic_only_at_one_huge_length() {
        let len = u32::from_le_bytes([MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3]]);
        assert_eq!(len, 1_869_573_218);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode(&bytes);
            let _ = never_durable(&bytes);
            for version in [V2, VERSION] {
                let mut headed = MAGIC.to_vec();
                headed.extend_from_slice(&version.to_le_bytes());
                headed.extend_from_slice(&bytes);
                let _ = decode(&headed);
                let _ = never_durable(&headed);
            }
        }
    }
}
