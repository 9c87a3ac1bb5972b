//! The header of a WAL file (format version 2): what its writer promised
//! about the records after it, so that recovery can tell bytes a power
//! loss never wrote from damage to bytes that were durable.
//!
//! `magic "bloomWAL" (8 bytes) | version: u16 LE = 2 | flags: u16 LE |
//! crc32 of the 12 bytes before: u32 LE`, then the records.
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
//! WAL. The header is rewritten in place, within one sector, and fsynced:
//! a power loss before that fsync leaves either header, both true; a torn
//! rewrite leaves a header that fails its checksum, read strictly
//! (`DamagedHeader`), which refuses the open and loses nothing, since the
//! records were fsynced first.
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
//! before the header existed): its records start at byte 0 and recovery
//! reads it strictly, as if synced. A version 1 file begins with the magic
//! only if its first record is a batch of exactly 1,869,573,218 bytes whose
//! checksum is the magic's last four bytes (a 2^-32 chance at that size).

/// Bytes of the header.
pub(crate) const HEADER_LEN: usize = 16;

const MAGIC: [u8; 8] = *b"bloomWAL";
const VERSION: u16 = 2;
/// Flag: each record was fsynced before the next was appended.
const SYNCED: u16 = 1;
/// Flag (with `SYNCED` only): a clean close appended and fsynced a close
/// marker as this WAL's last record before setting it (`seal.rs`), so the
/// WAL's end is that marker, and damage there is no torn tail.
const CLOSED: u16 = 2;

/// How a WAL's bytes begin, and so how recovery may read damage in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WalFormat {
    /// Version 1: no header, records from byte 0.
    Unheaded,
    /// Version 2. `synced`: the writer fsynced each record before the next.
    Headed { synced: bool },
    /// Version 2, synced, and closed: its last record is a close marker
    /// a clean close fsynced before rewriting the header to say so.
    Closed,
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
            Self::Headed { .. } | Self::Closed => HEADER_LEN,
        }
    }

    /// Whether every record was durable before the next one was written,
    /// so that damage followed by an intact record can only be corruption.
    /// True unless the header says otherwise: a version 1 WAL or a damaged
    /// header promises nothing we could relax.
    pub(crate) const fn each_record_durable(self) -> bool {
        !matches!(self, Self::Headed { synced: false })
    }
}

/// The header of a new WAL whose writer fsyncs each record (`synced`) or not.
pub(crate) fn encode(synced: bool) -> [u8; HEADER_LEN] {
    with_flags(if synced { SYNCED } else { 0 })
}

/// The header of a WAL whose records a clean close fsynced, the last one
/// its close marker.
pub(crate) fn encode_closed() -> [u8; HEADER_LEN] {
    with_flags(SYNCED | CLOSED)
}

pub(crate) fn with_flags(flags: u16) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    out[10..12].copy_from_slice(&flags.to_le_bytes());
    let crc = crc32fast::hash(&out[..12]);
    out[12..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Whether `bytes`, a whole WAL file, are what a power loss leaves of a
/// WAL whose header's fsync never returned: a proper prefix of a header
/// this build writes (its write torn), or zeros no longer than a header
/// (the file's length durable, the directory entry too, say by a later
/// fsync of the directory, but its page never written back, which ext4
/// and xfs show as zeros: `UnsyncedFate::Pages`). The header is fsynced
/// before any record is appended (`WalWriter::create`), so such a file
/// never held a record.
///
/// No file that held an acknowledged write reads so: such a write's
/// record was fsynced after a durable header (in `SyncMode::Never`, by
/// the clean close that appended the close marker after it), and a power
/// loss keeps a file's fsynced length and bytes, so the file is longer
/// than a header and its header intact. A device that zeroed a durable
/// page leaves the file's length, so a WAL whose only page it zeroed
/// reads as more than 16 zeros and is cut as before. A version 1 WAL
/// (no header) of at most 16 zeros is read the same way: its first
/// record's append was torn and never fsynced, no acknowledged write.
pub(crate) fn never_durable(bytes: &[u8]) -> bool {
    if bytes.is_empty() || bytes.len() > HEADER_LEN {
        return false;
    }
    let torn = bytes.len() < HEADER_LEN
        && [encode(false), encode(true)]
            .iter()
            .any(|h| h.starts_with(bytes));
    torn || bytes.iter().all(|&b| b == 0)
}

/// How `bytes`, a whole WAL file, begin. Never panics on any bytes.
pub(crate) fn decode(bytes: &[u8]) -> WalFormat {
    if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return WalFormat::Unheaded;
    }
    let Some(header) = bytes.get(..HEADER_LEN) else {
        return WalFormat::DamagedHeader;
    };
    let field = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    let crc = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
    let flags = field(10);
    let known = flags == 0 || flags == SYNCED || flags == SYNCED | CLOSED;
    if crc32fast::hash(&header[..12]) != crc || field(8) != VERSION || !known {
        return WalFormat::DamagedHeader;
    }
    if flags & CLOSED != 0 {
        return WalFormat::Closed;
    }
    WalFormat::Headed {
        synced: flags & SYNCED != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_header_decodes_to_what_it_promised() {
        for synced in [false, true] {
            let mut bytes = encode(synced).to_vec();
            assert_eq!(decode(&bytes), WalFormat::Headed { synced });
            bytes.extend_from_slice(b"records follow");
            assert_eq!(decode(&bytes), WalFormat::Headed { synced });
        }
        assert_eq!(decode(&encode_closed()), WalFormat::Closed);
        // Closed without synced, or an unknown flag: damage.
        assert_eq!(decode(&with_flags(CLOSED)), WalFormat::DamagedHeader);
        assert_eq!(decode(&with_flags(4 | SYNCED)), WalFormat::DamagedHeader);
        assert!(WalFormat::Closed.each_record_durable());
        assert_eq!(
            WalFormat::Headed { synced: true }.records_start(),
            HEADER_LEN
        );
    }

    #[test]
    fn any_flipped_bit_or_cut_of_a_header_is_damage_never_another_promise() {
        for synced in [false, true] {
            let good = encode(synced);
            for bit in 0..HEADER_LEN * 8 {
                let mut bytes = good;
                bytes[bit / 8] ^= 1 << (bit % 8);
                let got = decode(&bytes);
                // A flip in the magic makes a version 1 file, whose first
                // record is then damaged at byte 0.
                let expected = if bit < 64 {
                    WalFormat::Unheaded
                } else {
                    WalFormat::DamagedHeader
                };
                assert_eq!(got, expected, "synced {synced}, bit {bit}");
            }
            for cut in 8..HEADER_LEN {
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
            let h = encode(synced);
            for len in 1..HEADER_LEN {
                assert!(never_durable(&h[..len]), "synced {synced}, {len} bytes");
            }
            // A whole header is a WAL with no record yet, not a torn one.
            assert!(!never_durable(&h));
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
        let mut one_bit = [0u8; HEADER_LEN];
        one_bit[HEADER_LEN - 1] = 1;
        assert!(!never_durable(&one_bit));
    }

    #[test]
    fn only_an_unsynced_header_relaxes_recovery() {
        assert!(!WalFormat::Headed { synced: false }.each_record_durable());
        assert!(WalFormat::Headed { synced: true }.each_record_durable());
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
            let mut headed = MAGIC.to_vec();
            headed.extend_from_slice(&bytes);
            let _ = decode(&headed);
        }
    }
}
