//! `inspect`: one table file's filter (the lecture's three ways to its
//! false positive rate), properties and footer.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use bloomlsm_filter::{Filter, KeyHash};
use bloomlsm_sstable::{BlockHandle, FilterStatus, Table};

use super::{Outcome, Status};
use crate::output::{Fields, Value, text};

/// Above this fraction of bits set, k is too high for the bits per key
/// (at the optimal k about half the bits are set).
const OVERFULL_FILL: f64 = 0.6;

/// The table in `path`, and where its size came from: in a store directory
/// whose manifest names it, the table its record's size says (a filter
/// rebuilt in place leaves bytes past it when its install never became
/// durable; a file shorter than that is refused, naming both sizes, as the
/// store refuses it); otherwise the whole file, also when the manifest cannot be
/// read (a damaged store is what one inspects tables of).
fn open(path: &Path) -> Result<(Table, String)> {
    let number = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse::<u64>().ok());
    let dir = path.parent().unwrap_or(Path::new("."));
    let (recorded, whole_because) = match number {
        Some(n) if dir.join("MANIFEST").exists() => match bloomlsm::table_records(dir) {
            Ok(tables) => (
                tables
                    .into_iter()
                    .find(|t| t.number == n)
                    .map(|t| t.file_size),
                "not named by the store's manifest".to_string(),
            ),
            Err(e) => (None, format!("manifest unreadable: {e}")),
        },
        _ => (None, "not in a store directory".to_string()),
    };
    let Some(size) = recorded else {
        let table = Table::open_path(path, 0, None)?;
        return Ok((table, format!("file length ({whole_because})")));
    };
    let file = std::fs::File::open(path)?;
    // A table whose tail was lost, as the store names it (it would read
    // past the end of the file for its footer: an I/O error saying only
    // that a buffer could not be filled).
    let length = file.metadata()?.len();
    if length < size {
        bail!(
            "corrupt {} at offset {length}: table is {length} bytes; the manifest recorded {size}",
            path.display()
        );
    }
    let table = Table::open_at(Arc::new(file), path, size, 0, None)?;
    Ok((table, "manifest record".to_string()))
}

/// The file, its filter, its properties, then the footer's block handles;
/// with `verify`, what reading every entry back found ([`super::verify`]).
pub fn run(path: &Path, probes: u64, verify: bool) -> Result<Outcome> {
    if !path.exists() {
        bail!("{}: no such file", path.display());
    }
    let (table, size_from) = open(path)?;
    let p = table.properties();
    let f = table.footer();
    let properties = Fields::new()
        .with("entries", p.entries)
        .with("distinct_keys", p.distinct_keys)
        .with("tombstones", p.tombstones)
        .with("smallest_key", text(&p.smallest_key))
        .with("largest_key", text(&p.largest_key))
        .with("smallest_seq", p.smallest_seq)
        .with("largest_seq", p.largest_seq)
        .with("data_blocks", p.data_blocks)
        .with("data_bytes", p.data_bytes)
        .with("bits_per_key_requested", p.bits_per_key)
        .with("created_micros", p.created_micros);
    // In file order (sstable/FORMAT.md): filter, index, properties.
    let footer = Fields::new()
        .with("filter", handle(&f.filter))
        .with("index", handle(&f.index))
        .with("properties", handle(&f.properties));
    let fields = Fields::new()
        .with("file", path.display().to_string())
        .with("file_size", table.file_size())
        .with("size_from", size_from)
        .with("format_version", f.version)
        .with("filter", filter(&table, probes))
        .with("properties", properties)
        .with("footer", footer);
    if !verify {
        return Ok(Value::from(fields).into());
    }
    let (read_back, damage) = super::verify::verify(Arc::new(table))?;
    Ok(Outcome {
        value: fields.with("verify", read_back).into(),
        status: damage.map_or(Status::Success, Status::Damaged),
    })
}

fn handle(h: &BlockHandle) -> Fields {
    Fields::new().with("offset", h.offset).with("size", h.size)
}

/// From what the filter is (n, m, k) to what it costs and how often it errs.
fn filter(table: &Table, probes: u64) -> Fields {
    let filter = match (table.filter(), table.filter_status()) {
        (Some(filter), _) => filter,
        (None, FilterStatus::Unusable(reason)) => {
            return Fields::new()
                .with("status", "unusable")
                .with("reason", reason.to_string());
        }
        (None, _) => return Fields::new().with("status", "none"),
    };
    let hits = (0..probes)
        .filter(|i| {
            let key = format!("\u{0}bloomlsm-inspect-absent-{i}");
            filter.contains_hash(KeyHash::of(key.as_bytes()))
        })
        .count();
    let fill = filter.fill_ratio();
    let mut fields = Fields::new()
        .with("status", "usable")
        .with("kind", filter.kind().name())
        .with("items", filter.len())
        .with("bits_per_key", filter.bits_per_key())
        .with("k", filter.num_hashes())
        .with("m_bits", filter.num_bits())
        .with("memory_bytes", filter.memory_bytes())
        .with("fill_ratio", fill)
        .with("fpr_formula", filter.theoretical_fpr())
        .with("fpr_from_fill", filter.estimated_fpr())
        .with("fpr_measured", hits as f64 / probes.max(1) as f64)
        .with("probes", probes);
    if fill > OVERFULL_FILL {
        fields.push(
            "warning",
            format!(
                "{:.0}% of bits set: more hash functions than this bits-per-key wants (optimal leaves half set)",
                fill * 100.0
            ),
        );
    }
    fields
}
