//! Whether the filter options in force were the ones applied: every
//! table a fixed policy (`Uniform`, `PerLevel`) wrote or rebuilt carries a
//! filter of the open's kind at one of the policy's bits per key (none
//! below the one-bit floor), read from the table's own properties. A kind
//! or policy of an earlier open, or of the policy a `rebuild_filters`
//! replaced, must never be applied to a table written after it.
//! (`Optimized` fits each filter to a budget, so its tables are not
//! checked here.)

use std::path::Path;
use std::sync::Arc;

use crate::common::read_manifest;

use bloomlsm::sstable::Table;
use bloomlsm::{FilterKind, FilterPolicy, MIN_FILTER_BITS_PER_KEY};

/// The bits per key a fixed policy may build a table at, or `None` when
/// `policies` include `Optimized`.
pub fn allowed_bits(policies: &[FilterPolicy]) -> Option<Vec<f64>> {
    let mut bits = Vec::new();
    for p in policies {
        match p {
            FilterPolicy::Uniform { bits_per_key } => bits.push(*bits_per_key),
            FilterPolicy::PerLevel(v) => bits.extend(v.iter().copied()),
            FilterPolicy::Optimized { .. } => return None,
        }
    }
    Some(bits)
}

/// Checks the properties of every table the manifest of `dir` names
/// whose file number is `first_number` or more: its filter must be of
/// `kind` at one of `bits`, or absent where one of them is below the
/// floor. A table whose file is gone (a running store deleted it since
/// its manifest was read) is skipped. Returns the tables checked.
pub fn check(dir: &Path, first_number: u64, kind: FilterKind, bits: &[f64], at: &str) -> u64 {
    let no_filter_allowed = bits.iter().any(|&b| b < MIN_FILTER_BITS_PER_KEY);
    let mut checked = 0;
    for r in read_manifest(dir).tables {
        let [number, size, ..] = r.numbers;
        if number < first_number {
            continue;
        }
        let path = dir.join(format!("{number:06}.sst"));
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{at}: {}: {e}", path.display()),
        };
        let table = Table::open_at(Arc::new(file), &path, size, number, None)
            .unwrap_or_else(|e| panic!("{at}: {}: {e}", path.display()));
        let p = table.properties();
        match p.filter_kind {
            None => assert!(
                no_filter_allowed,
                "{at}: table {number} at L{} has no filter, but the policies give {bits:?}",
                r.level
            ),
            Some(k) => assert!(
                k == kind && bits.contains(&p.bits_per_key),
                "{at}: table {number} at L{} has a {k:?} filter at {} bits per key, \
                 but the open's kind is {kind:?} and the policies give {bits:?}",
                r.level,
                p.bits_per_key
            ),
        }
        checked += 1;
    }
    checked
}
