//! Manifests and WALs built from random bytes with every checksum right,
//! so the decoders behind the crc32s see the random fields (random bytes
//! alone are refused at the first checksum). Shared by the fuzz targets
//! `manifest_resealed` and `wal_resealed` and the property tests beside
//! the decoders (`manifest.rs`, `wal.rs`).

use std::path::Path;

use bloomlsm_filter::fuzzing::Fields;

use crate::manifest::{MANIFEST_MAGIC, ManifestState, STORE_FORMAT_VERSION};
use crate::options::WalRecovery;

/// A manifest file with a valid checksum, from `data`:
///
/// - byte 0: bits 0-2 the store format version (0 to 7; this build reads
///   up to 5); bit 3 set: the rest is the payload as given; else the rest
///   is fields: next file number, last sequence, WAL number (u64 each),
///   then tables (level u8, file number, size, entries, smallest and
///   largest sequence u64, each key a u8 length and bytes) while bytes
///   remain; bit 4 set: the table count is a u32 taken before the tables,
///   else the number of tables; bit 5 set: the fields are made to pass the
///   decoder's checks (sequences and keys in order, file numbers distinct
///   and below the next one, the WAL number too, the last sequence at
///   most the largest).
pub fn reseal_manifest(data: &[u8]) -> Vec<u8> {
    let Some((&ctl, rest)) = data.split_first() else {
        return Vec::new();
    };
    let version = u32::from(ctl & 7);
    let payload = if ctl & 8 != 0 {
        rest.to_vec()
    } else {
        let mut f = Fields(rest);
        let mut next = f.u64();
        let mut last_seq = f.u64();
        let mut wal = f.u64();
        let given_count = (ctl & 16 != 0).then(|| f.u32());
        let repair = ctl & 32 != 0;
        if repair {
            next %= 1 << 40;
            last_seq %= 1 << 50;
        }
        let mut tables: Vec<(u32, [u64; 5], [Vec<u8>; 2])> = Vec::new();
        while !f.0.is_empty() {
            let level = u32::from(f.u8());
            let mut number = f.u64();
            let file_size = f.u64();
            let entries = f.u64();
            let (mut small, mut large) = (f.u64(), f.u64());
            let n = usize::from(f.u8() % 32);
            let mut smallest = f.bytes(n);
            let n = usize::from(f.u8() % 32);
            let mut largest = f.bytes(n);
            if repair {
                // Room below `next` for one more distinct number, then
                // the first free one from where the input points.
                next = next.max(tables.len() as u64 + 1);
                number %= next;
                while tables.iter().any(|(_, [n, ..], _)| *n == number) {
                    number = (number + 1) % next;
                }
                small %= last_seq + 1;
                large %= last_seq + 1;
                if small > large {
                    std::mem::swap(&mut small, &mut large);
                }
                if smallest > largest {
                    std::mem::swap(&mut smallest, &mut largest);
                }
            }
            tables.push((
                level,
                [number, file_size, entries, small, large],
                [smallest, largest],
            ));
        }
        if repair {
            // Every WAL number is handed out below the next one.
            next = next.max(1);
            wal %= next;
        }
        let mut p = Vec::new();
        for v in [next, last_seq, wal] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        let count = given_count.unwrap_or(tables.len() as u32);
        p.extend_from_slice(&count.to_le_bytes());
        for (level, fields, keys) in &tables {
            p.extend_from_slice(&level.to_le_bytes());
            for v in fields {
                p.extend_from_slice(&v.to_le_bytes());
            }
            for k in keys {
                p.extend_from_slice(&(k.len() as u32).to_le_bytes());
                p.extend_from_slice(k);
            }
        }
        p
    };
    let mut out = Vec::with_capacity(20 + payload.len());
    out.extend_from_slice(&MANIFEST_MAGIC.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&out[8..16]);
    crc.update(&payload);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Decodes manifest bytes and panics if the decoder breaks a promise:
/// never a panic; a manifest that decodes names no more tables than its
/// bytes hold (52 bytes each at least), passes its own checks, and
/// re-encodes to its bytes when of the version this build writes (the
/// layout is the same in every version), else to bytes of the same state.
/// Returns whether the bytes decoded.
pub fn exercise_manifest(bytes: &[u8]) -> bool {
    let path = Path::new("MANIFEST");
    let Ok(state) = ManifestState::decode(path, bytes) else {
        return false;
    };
    assert!(
        state.tables.len() * 52 <= bytes.len(),
        "{} tables from {} bytes",
        state.tables.len(),
        bytes.len()
    );
    let again = state.encode();
    if bytes.get(8..12) == Some(&STORE_FORMAT_VERSION.to_le_bytes()[..]) {
        assert_eq!(again, bytes, "re-encoding changed the bytes");
    } else {
        let back = ManifestState::decode(path, &again).ok();
        assert_eq!(back.as_ref(), Some(&state), "re-encoding changed the state");
    }
    true
}

/// WAL files with intact record frames, from `data`, and whether they are
/// a clean log (every record a batch continuing the sequence, so that
/// replay must recover every op):
///
/// - byte 0: bits 0-1 the header of every WAL (none: version 1; unsynced;
///   synced; closed, its last record a close marker); bit 2 set: the
///   header's flags are a u16 taken from the input (its checksum right);
///   bit 3 set: payloads as given (each a u8 length and bytes), else
///   batches; bit 4 set: each batch's first sequence and op count are taken
///   from the input, else the sequence continues and the count is true;
///   bit 5 set: ops of any kind tag, else puts and deletes; bits 6-7: the
///   number of WALs less one, each record going to a WAL the input picks;
/// - byte 1: bits 0-6 the first sequence of the log, less one (clean
///   logs); bit 7 set: headers of version 2 (no salt, as older builds
///   wrote), else of version 3, each WAL its own salt;
/// - then records while bytes remain: for a batch, a byte whose low 3
///   bits are the op count (and whose high bits pick its WAL), then per
///   op a kind byte, a key (u8 length below 16, bytes) and for a put a
///   value (u8 length, bytes).
pub fn reseal_wal(data: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let Some((&ctl, rest)) = data.split_first() else {
        return (vec![Vec::new()], false);
    };
    let mut f = Fields(rest);
    let header_kind = ctl & 3;
    let raw_flags = ctl & 4 != 0;
    let raw_payloads = ctl & 8 != 0;
    let raw_batch_header = ctl & 16 != 0;
    let any_kind = ctl & 32 != 0;
    let num_wals = usize::from(ctl >> 6) + 1;
    let flags = match (header_kind, raw_flags) {
        (0, _) => None,
        (_, true) => Some(u16::from_le_bytes(f.take())),
        (1, false) => Some(0),
        (2, false) => Some(1),
        _ => Some(3),
    };
    let mut clean = !raw_flags && !raw_payloads && !raw_batch_header && !any_kind;
    let seq_byte = f.u8();
    let v2 = seq_byte & 0x80 != 0;
    let mut next_seq = u64::from(seq_byte & 0x7f) + 1;
    // Each WAL file its own salt (version 3), or none (version 2).
    let salts: Vec<Option<u64>> = (0..num_wals as u64)
        .map(|i| (flags.is_some() && !v2).then_some(0x5a17_0000_0000_0001 ^ (i << 17)))
        .collect();
    let mut wals: Vec<Vec<u8>> = salts
        .iter()
        .map(|salt| match (flags, salt) {
            (None, _) => Vec::new(),
            (Some(flags), None) => crate::wal::header::v2_with_flags(flags).to_vec(),
            (Some(flags), Some(salt)) => crate::wal::header::with_flags(flags, *salt).to_vec(),
        })
        .collect();
    let mut records = vec![0usize; num_wals];
    let mut wal = 0;
    while !f.0.is_empty() {
        let lead = f.u8();
        // Records go to the same or a later WAL, as the log's order does.
        wal = (wal + usize::from(lead >> 6)).min(num_wals - 1);
        let payload = if raw_payloads {
            let n = usize::from(lead & 0x3f) * 4;
            f.bytes(n)
        } else {
            let count = u32::from(lead & 7);
            let mut p = Vec::new();
            let (first, count_field) = if raw_batch_header {
                (f.u64(), f.u32())
            } else {
                (next_seq, count)
            };
            p.extend_from_slice(&first.to_le_bytes());
            p.extend_from_slice(&count_field.to_le_bytes());
            for _ in 0..count {
                let tag = f.u8();
                let tag = if any_kind { tag } else { tag & 1 };
                p.push(tag);
                let n = usize::from(f.u8() % 16);
                let key = f.bytes(n);
                p.extend_from_slice(&(key.len() as u32).to_le_bytes());
                p.extend_from_slice(&key);
                if tag == 1 {
                    let n = usize::from(f.u8());
                    let value = f.bytes(n);
                    p.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    p.extend_from_slice(&value);
                }
            }
            if count == 0 {
                // An empty batch is a close marker: only the log's last.
                clean &= f.0.is_empty();
            }
            next_seq += u64::from(count);
            p
        };
        push_record(&mut wals[wal], salts[wal], &payload);
        records[wal] += 1;
    }
    if header_kind == 3 && !raw_flags && !raw_payloads {
        // A closed WAL ends with its close marker, at the next sequence.
        for (w, bytes) in wals.iter_mut().enumerate() {
            if w + 1 == num_wals {
                let mut marker = next_seq.to_le_bytes().to_vec();
                marker.extend_from_slice(&0u32.to_le_bytes());
                push_record(bytes, salts[w], &marker);
            } else {
                // Only the newest WAL holds the marker a close appends.
                clean = false;
            }
        }
    }
    // Only the newest WAL may be empty.
    clean &= records[..num_wals - 1].iter().all(|&n| n > 0);
    (wals, clean)
}

/// One op of [`clean_wal_input`]: a put of `value`, or (`None`) a delete.
#[derive(Clone, Debug)]
pub struct CleanOp {
    /// The key; only its first 15 bytes are used.
    pub key: Vec<u8>,
    /// The value of a put (its first 255 bytes), `None` for a delete.
    pub value: Option<Vec<u8>>,
}

/// An input of [`reseal_wal`] that makes a clean log: `header` (0 to 3,
/// as bits 0-1 of its byte 0) on each of `wals` WALs (1 to 4), the log
/// starting after sequence `first_seq`, and `batches` (their first 7 ops
/// each; an empty batch gets one put) spread over the WALs in order, so
/// that every WAL holds one at least when there are as many batches as
/// WALs. The log is clean then, unless a closed log (`header` 3) spans
/// several WALs: only the newest holds the close marker.
pub fn clean_wal_input(
    header: u8,
    wals: usize,
    first_seq: u8,
    batches: &[Vec<CleanOp>],
) -> Vec<u8> {
    let wals = wals.clamp(1, 4);
    let mut data = vec![(header & 3) | ((wals as u8 - 1) << 6), first_seq];
    let mut wal = 0;
    let put = CleanOp {
        key: b"k".to_vec(),
        value: Some(Vec::new()),
    };
    for (i, batch) in batches.iter().enumerate() {
        let target = i * wals / batches.len();
        let ops: Vec<&CleanOp> = if batch.is_empty() {
            vec![&put]
        } else {
            batch.iter().take(7).collect()
        };
        data.push(ops.len() as u8 | (((target - wal) as u8) << 6));
        wal = target;
        for op in ops {
            let key = &op.key[..op.key.len().min(15)];
            data.push(u8::from(op.value.is_some()));
            data.push(key.len() as u8);
            data.extend_from_slice(key);
            if let Some(value) = &op.value {
                let value = &value[..value.len().min(255)];
                data.push(value.len() as u8);
                data.extend_from_slice(value);
            }
        }
    }
    data
}

fn push_record(wal: &mut Vec<u8>, salt: Option<u64>, payload: &[u8]) {
    wal.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    wal.extend_from_slice(&crate::wal::header::record_crc(salt, payload).to_le_bytes());
    wal.extend_from_slice(payload);
}

/// Replays `wals` (oldest first) in both recovery modes and panics if
/// replay breaks a promise: never a panic; a clean log (`reseal_wal`)
/// replays whole in both modes, every op of it in the memtable.
pub fn exercise_wal(wals: &[Vec<u8>], clean: bool) {
    let logs: Vec<crate::replay::WalBytes> = wals
        .iter()
        .enumerate()
        .map(|(i, bytes)| crate::replay::WalBytes {
            path: Path::new(&format!("{i:06}.wal")).to_path_buf(),
            bytes: bytes.clone(),
        })
        .collect();
    for mode in [WalRecovery::TolerateTornTail, WalRecovery::PointInTime] {
        let mem = crate::memtable::MemTable::new(0);
        let replayed = crate::replay::replay_logs(&logs, mode, crate::replay::LogStart::ANY, &mem);
        if clean {
            let ops: usize = wals.iter().map(|w| ops_in(w)).sum();
            match replayed {
                Ok(r) => assert!(r.cut.is_none(), "a clean log was cut: {:?}", r.cut),
                Err(e) => panic!("a clean log was refused: {e}"),
            }
            assert_eq!(mem.len(), ops, "a clean log lost ops");
            assert_every_op_replayed(wals, &mem);
        }
    }
}

/// Every op of every intact batch of `wals` is in `mem` at its own
/// sequence, as written: a put's value, a delete's tombstone.
fn assert_every_op_replayed(wals: &[Vec<u8>], mem: &crate::memtable::MemTable) {
    use crate::answer::Answer;
    use bloomlsm_sstable::EntryKind;
    for bytes in wals {
        for record in crate::wal::records(bytes).records {
            let Ok((first, batch)) = crate::batch::WriteBatch::decode(&record.payload) else {
                continue;
            };
            for (seq, (kind, key, value)) in (first..).zip(batch.ops()) {
                let want = match kind {
                    EntryKind::Put => Answer::Value(value.to_vec()),
                    EntryKind::Delete => Answer::Deleted,
                };
                assert_eq!(mem.get(key, seq), want, "key {key:?} at sequence {seq}");
            }
        }
    }
}

/// Ops in the intact records of one WAL.
fn ops_in(bytes: &[u8]) -> usize {
    crate::wal::records(bytes)
        .records
        .iter()
        .filter_map(|r| crate::batch::WriteBatch::decode(&r.payload).ok())
        .map(|(_, b)| b.len())
        .sum()
}
