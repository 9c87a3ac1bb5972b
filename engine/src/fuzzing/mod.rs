//! Entry points for fuzz targets and property tests: the store's decoders
//! on arbitrary bytes. Not part of the stable API.

use std::path::Path;

/// The filter crate's counting allocator, for the engine's fuzz targets
/// (which depend on this crate alone).
pub use bloomlsm_filter::fuzzing::CountingAlloc;

use crate::options::WalRecovery;

/// Replays WAL bytes as a store's only live WAL, with recovery's checks
/// (torn tail or corruption, sequence continuity); returns the number of
/// operations recovered, or why the bytes were refused.
pub fn replay_wal(bytes: &[u8], point_in_time: bool) -> Result<usize, String> {
    let mode = if point_in_time {
        WalRecovery::PointInTime
    } else {
        WalRecovery::TolerateTornTail
    };
    let logs = [crate::replay::WalBytes {
        path: Path::new("fuzz.wal").to_path_buf(),
        bytes: bytes.to_vec(),
    }];
    let mem = crate::memtable::MemTable::new(0);
    crate::replay::replay_logs(&logs, mode, crate::replay::LogStart::ANY, &mem)
        .map_err(|e| e.to_string())?;
    Ok(mem.len())
}

/// The headers a WAL whose records are each fsynced (`synced`) or not
/// begins with: version 2 (older builds) and version 3 (this build, salt
/// 0). A fuzz target puts each before its bytes to reach the recovery of
/// headed WALs.
pub fn wal_headers(synced: bool) -> [Vec<u8>; 2] {
    [
        crate::wal::header::encode_v2(synced).to_vec(),
        crate::wal::header::encode(synced, 0).to_vec(),
    ]
}

/// Decodes manifest bytes; returns the number of tables named.
pub fn decode_manifest(bytes: &[u8]) -> Result<usize, String> {
    crate::manifest::ManifestState::decode(Path::new("MANIFEST"), bytes)
        .map(|s| s.tables.len())
        .map_err(|e| e.to_string())
}

pub mod db_model;
pub mod resealed;
