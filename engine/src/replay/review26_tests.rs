//! Review findings on WAL format version 3 (review26). Each test states
//! the promise it checks; those marked "failed at 55648db" failed before
//! replay learned whether the store's WALs are all salted
//! (`LogStart::salted`, from the manifest's store format version).

use super::tests::{FRESH, PIT, SALTED, TORN, batch, record, replay, salted, wal_damage};
use super::*;
use crate::wal::header;

const SALT: u64 = 0x0123_4567_89ab_cdef;

/// A synced version 3 WAL holding writes 1..=5 (each acknowledged after
/// its fsync, SyncMode::Always).
fn v3_synced() -> Vec<u8> {
    let mut out = header::encode(true, SALT).to_vec();
    for s in 1..=5 {
        out.extend(salted(Some(SALT), &batch(s, 1, 5)));
    }
    out
}

/// Row 3: damage to durable WAL bytes is detected. A header overwritten
/// with bytes that are neither zeros nor a header (0xFF: what an erased
/// or unreadable flash page often reads as; or a misdirected write)
/// makes the file read as version 1 (no magic), the search's second
/// salt (bytes 12..20) is no longer the file's, so no record after it
/// verifies, and TolerateTornTail cut the WAL at byte 0: five
/// acknowledged writes dropped without an error. A version 2 WAL with
/// the same damage is refused (its records verify without a salt).
/// Failed at 55648db: Ok(None). In a store of format 6 or more
/// (`SALTED`) every live WAL had a salted header.
#[test]
fn a_v3_header_overwritten_with_non_zero_bytes_is_refused_not_cut() {
    for fill in [0xffu8, 0x5a] {
        let mut image = v3_synced();
        image[..header::HEADER_LEN].fill(fill);
        let got = replay(vec![image], TORN, SALTED);
        assert!(
            got.is_err(),
            "fill {fill:#x}: five acknowledged writes silently dropped: {got:?}"
        );
    }
}

/// The same with two flipped bits: one in the magic, one in the salt.
/// Failed at 55648db: Ok(None). In a store of format 6 or more
/// (`SALTED`) every live WAL had a salted header.
#[test]
fn a_v3_header_with_its_magic_and_salt_flipped_is_refused_not_cut() {
    let mut image = v3_synced();
    image[0] ^= 1;
    image[13] ^= 1;
    let got = replay(vec![image], TORN, SALTED);
    assert!(
        got.is_err(),
        "acknowledged writes silently dropped: {got:?}"
    );
}

/// Contrast (passes): in a version 2 WAL the same overwrite is refused.
#[test]
fn a_v2_header_overwritten_with_non_zero_bytes_is_refused() {
    let mut image = header::encode_v2(true).to_vec();
    for s in 1..=5 {
        image.extend(record(&batch(s, 1, 5)));
    }
    image[..header::V2_HEADER_LEN].fill(0xff);
    let (_, _, reason) = wal_damage(replay(vec![image], TORN, FRESH));
    assert_eq!(reason, WalDamage::BeforeIntact);
}

/// Row 5 and older stores: a version 1 WAL (no header) whose first and
/// only record, an 8 KB put, was being appended when the power failed:
/// its first page never reached the disk (zeros), its second did. No
/// write was acknowledged (the append's fsync never returned); the
/// build before 55648db opened it as a torn tail with nothing to
/// replay. The rule "a header's length of zeros with non-zero bytes
/// after it" refused it as DamagedHeader: a store an older build crashed
/// legitimately no longer opened in the default mode.
/// Failed at 55648db: Err(DamagedHeader). A store of an older format
/// (`FRESH`, not salted) reads its WALs as before.
#[test]
fn a_v1_wal_whose_first_page_a_power_loss_lost_opens_as_before() {
    let mut image = record(&batch(1, 1, 8000));
    assert!(image.len() > 4096 + 100);
    image[..4096].fill(0);
    assert_eq!(replay(vec![image.clone()], PIT, FRESH).unwrap(), None);
    assert_eq!(replay(vec![image], TORN, FRESH).unwrap(), None);
}
