//! Entry points for fuzz targets and property tests: the store's decoders
//! on arbitrary bytes. Not part of the stable API.

use std::path::Path;

use crate::options::WalRecovery;

/// Replays WAL bytes and decodes every record as a batch; returns the
/// number of operations recovered, or why the bytes were refused.
pub fn replay_wal(bytes: &[u8], point_in_time: bool) -> Result<usize, String> {
    let mode = if point_in_time {
        WalRecovery::PointInTime
    } else {
        WalRecovery::TolerateTornTail
    };
    let replay =
        crate::wal::replay(Path::new("fuzz.wal"), bytes, mode).map_err(|e| e.to_string())?;
    let mut ops = 0;
    for record in replay.records {
        let (_, batch) =
            crate::batch::WriteBatch::decode(&record.payload).map_err(|e| e.to_string())?;
        ops += batch.len();
    }
    Ok(ops)
}

/// Decodes manifest bytes; returns the number of tables named.
pub fn decode_manifest(bytes: &[u8]) -> Result<usize, String> {
    crate::manifest::ManifestState::decode(Path::new("MANIFEST"), bytes)
        .map(|s| s.tables.len())
        .map_err(|e| e.to_string())
}
