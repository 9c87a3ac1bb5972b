//! `bloomlsm`: inspect tables, trace lookups, read and write a store, size
//! filters, and print the lecture's numbers. Readable tables by default,
//! JSON with `--json`. Errors are one line and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloomlsm::{Db, Options};
use bloomlsm_filter::lecture::lecture_report;
use bloomlsm_filter::{Filter, KeyHash, math};
use bloomlsm_sstable::{FilterStatus, Table};
use clap::{Parser, Subcommand};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(
    name = "bloomlsm",
    version,
    about = "Inspect and use bloomlsm stores and tables"
)]
struct Cli {
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Footer, properties, blocks and filter of one table file, with the
    /// filter's FPR three ways: the lecture's formula, estimated from the
    /// fill ratio, and measured by probing keys not in the table.
    Inspect {
        /// A `.sst` file.
        table: PathBuf,
        /// Absent keys to probe for the measured FPR.
        #[arg(long, default_value_t = 100_000)]
        probes: u64,
    },
    /// Per-level tables, entries, filter memory and theoretical FPR; with
    /// `--absent-gets N`, also runs N gets of absent keys and reports reads
    /// saved, observed FPR and data-block reads per get.
    Stats {
        /// The store directory.
        db: PathBuf,
        /// Absent-key gets to run before reporting the counters.
        #[arg(long, default_value_t = 0)]
        absent_gets: u64,
    },
    /// Reads a key.
    Get {
        /// The store directory.
        db: PathBuf,
        /// The key (UTF-8 text).
        key: String,
    },
    /// Writes a key.
    Put {
        /// The store directory (created if missing).
        db: PathBuf,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Deletes a key.
    Delete {
        /// The store directory.
        db: PathBuf,
        /// The key.
        key: String,
    },
    /// Lists pairs from `--from` (inclusive) to `--to` (exclusive).
    Scan {
        /// The store directory.
        db: PathBuf,
        /// First key.
        #[arg(long)]
        from: Option<String>,
        /// Key to stop before.
        #[arg(long)]
        to: Option<String>,
        /// Most pairs to print.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One lookup's path through memtables and tables: each filter's
    /// verdict and each block read.
    Trace {
        /// The store directory.
        db: PathBuf,
        /// The key.
        key: String,
    },
    /// Sizes a filter: m, k, bytes and FPR for N items, from a target FPR,
    /// bits per key or a memory budget, beside an exact set of the keys.
    ///
    /// The lecture's crawler: `bloomlsm size --items 1000000000 --bits-per-key 10 --key-bytes 64`
    /// (1.25 GB of filter, 0.82% wrongly "seen", against 64 GB for the exact set).
    Size {
        /// Number of items.
        #[arg(long)]
        items: u64,
        /// Target false positive rate.
        #[arg(long, conflicts_with_all = ["bits_per_key", "memory"])]
        fpr: Option<f64>,
        /// Bits per item.
        #[arg(long, conflicts_with = "memory")]
        bits_per_key: Option<f64>,
        /// Memory budget in bytes.
        #[arg(long)]
        memory: Option<u64>,
        /// Bytes per key for the exact-set comparison.
        #[arg(long, default_value_t = 64)]
        key_bytes: u64,
    },
    /// The lecture's numbers beside formulas and measured filters.
    Lecture {
        /// Keys per measured filter.
        #[arg(long, default_value_t = 200_000)]
        items: u64,
        /// Absent probes per measured filter.
        #[arg(long, default_value_t = 2_000_000)]
        probes: u64,
    },
}

type CliResult = Result<serde_json::Value, String>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli.command) {
        Ok(value) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            } else {
                print_table(&value, 0);
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn print_table(value: &serde_json::Value, indent: usize) {
    let pad = " ".repeat(indent);
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if v.is_object() || v.is_array() {
                    println!("{pad}{k}:");
                    print_table(v, indent + 2);
                } else {
                    println!("{pad}{k:<28} {}", scalar(v));
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                if v.is_object() {
                    println!("{pad}[{i}]");
                    print_table(v, indent + 2);
                } else {
                    println!("{pad}- {}", scalar(v));
                }
            }
        }
        other => println!("{pad}{}", scalar(other)),
    }
}

fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() != 0.0)
            .map_or(n.to_string(), |f| format!("{f:.6}")),
        other => other.to_string(),
    }
}

fn existing_store(path: &Path) -> Result<Db, String> {
    if !path.join("MANIFEST").exists() {
        return Err(format!(
            "{} is not a bloomlsm store (no MANIFEST)",
            path.display()
        ));
    }
    Db::open(path, Options::default()).map_err(|e| e.to_string())
}

fn run(command: &Command) -> CliResult {
    match command {
        Command::Inspect { table, probes } => inspect(table, *probes),
        Command::Stats { db, absent_gets } => stats(db, *absent_gets),
        Command::Get { db, key } => {
            let db = existing_store(db)?;
            let v = db.get(key.as_bytes()).map_err(|e| e.to_string())?;
            Ok(json!({ "key": key, "value": v.map(|v| String::from_utf8_lossy(&v).into_owned()) }))
        }
        Command::Put { db, key, value } => {
            let db = Db::open(db, Options::default()).map_err(|e| e.to_string())?;
            db.put(key.as_bytes(), value.as_bytes())
                .map_err(|e| e.to_string())?;
            db.close().map_err(|e| e.to_string())?;
            Ok(json!({ "put": key }))
        }
        Command::Delete { db, key } => {
            let db = existing_store(db)?;
            db.delete(key.as_bytes()).map_err(|e| e.to_string())?;
            db.close().map_err(|e| e.to_string())?;
            Ok(json!({ "deleted": key }))
        }
        Command::Scan {
            db,
            from,
            to,
            limit,
        } => {
            let db = existing_store(db)?;
            let from = from.clone().unwrap_or_default().into_bytes();
            let iter = match to {
                Some(to) => db.scan(from..to.clone().into_bytes()),
                None => db.scan(from..),
            }
            .map_err(|e| e.to_string())?;
            let mut pairs = Vec::new();
            for item in iter.take(*limit) {
                let (k, v) = item.map_err(|e| e.to_string())?;
                pairs.push(json!({ "key": String::from_utf8_lossy(&k), "value": String::from_utf8_lossy(&v) }));
            }
            Ok(json!(pairs))
        }
        Command::Trace { db, key } => {
            let db = existing_store(db)?;
            let (value, trace) = db.get_traced(key.as_bytes()).map_err(|e| e.to_string())?;
            Ok(json!({
                "key": key,
                "value": value.map(|v| String::from_utf8_lossy(&v).into_owned()),
                "reads_saved": trace.reads_saved(),
                "blocks_read_from_files": trace.blocks_read_from_files(),
                "trace": trace,
            }))
        }
        Command::Size {
            items,
            fpr,
            bits_per_key,
            memory,
            key_bytes,
        } => size(*items, *fpr, *bits_per_key, *memory, *key_bytes),
        Command::Lecture { items, probes } => {
            let rows: Vec<_> = lecture_report(*items, *probes)
                .into_iter()
                .map(|r| {
                    json!({ "topic": r.topic, "quantity": r.quantity, "lecture": r.lecture,
                            "formula": r.formula, "measured": r.measured, "unit": r.unit })
                })
                .collect();
            Ok(json!(rows))
        }
    }
}

fn inspect(path: &Path, probes: u64) -> CliResult {
    if !path.exists() {
        return Err(format!("{}: no such file", path.display()));
    }
    let table = Table::open_path(path, 0, None).map_err(|e| e.to_string())?;
    let p = table.properties();
    let f = table.footer();
    let filter = match (table.filter(), table.filter_status()) {
        (Some(filter), _) => {
            let hits = (0..probes)
                .filter(|i| {
                    let key = format!("\u{0}bloomlsm-inspect-absent-{i}");
                    filter.contains_hash(KeyHash::of(key.as_bytes()))
                })
                .count();
            let fill = filter.fill_ratio();
            let mut v = json!({
                "kind": filter.kind().name(),
                "k": filter.num_hashes(),
                "m_bits": filter.num_bits(),
                "items": filter.len(),
                "bits_per_key": filter.bits_per_key(),
                "memory_bytes": filter.memory_bytes(),
                "fill_ratio": fill,
                "fpr_formula": filter.theoretical_fpr(),
                "fpr_from_fill": filter.estimated_fpr(),
                "fpr_measured": hits as f64 / probes.max(1) as f64,
                "probes": probes,
            });
            if fill > 0.6 {
                v["warning"] = json!(format!(
                    "{:.0}% of bits set: more hash functions than this bits-per-key wants (optimal leaves half set)",
                    fill * 100.0
                ));
            }
            v
        }
        (None, FilterStatus::Unusable(reason)) => json!({ "status": "unusable", "reason": reason }),
        (None, _) => json!({ "status": "none" }),
    };
    Ok(json!({
        "file": path.display().to_string(),
        "file_size": table.file_size(),
        "format_version": f.version,
        "footer": { "filter": [f.filter.offset, f.filter.size], "index": [f.index.offset, f.index.size],
                    "properties": [f.properties.offset, f.properties.size] },
        "properties": {
            "entries": p.entries, "distinct_keys": p.distinct_keys, "tombstones": p.tombstones,
            "data_blocks": p.data_blocks, "data_bytes": p.data_bytes,
            "smallest_key": String::from_utf8_lossy(&p.smallest_key), "largest_key": String::from_utf8_lossy(&p.largest_key),
            "smallest_seq": p.smallest_seq, "largest_seq": p.largest_seq,
            "bits_per_key_requested": p.bits_per_key, "created_micros": p.created_micros,
        },
        "filter": filter,
    }))
}

fn stats(path: &Path, absent_gets: u64) -> CliResult {
    let db = existing_store(path)?;
    if absent_gets > 0 {
        // Absent keys inside the tables' ranges: each right after a stored key.
        let mut stored = Vec::new();
        for item in db
            .scan::<&[u8], _>(..)
            .map_err(|e| e.to_string())?
            .take(absent_gets.min(100_000) as usize)
        {
            stored.push(item.map_err(|e| e.to_string())?.0);
        }
        for i in 0..absent_gets {
            let Some(base) = stored.get((i as usize) % stored.len().max(1)) else {
                break;
            };
            let mut key = base.clone();
            key.extend_from_slice(format!("\u{0}absent{i}").as_bytes());
            db.get(&key).map_err(|e| e.to_string())?;
        }
    }
    let s = db.stats();
    let levels: Vec<_> = s
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.tables > 0)
        .map(|(i, l)| {
            json!({ "level": i, "tables": l.tables, "entries": l.entries, "filter_bytes": l.filter_bytes,
                    "bits_per_key": l.bits_per_key, "theoretical_fpr": l.theoretical_fpr,
                    "table_probes": l.table_probes, "reads_saved": l.filter_negatives,
                    "false_positives": l.filter_false_positives, "observed_fpr": l.observed_fpr,
                    "data_blocks_read": l.data_blocks_read })
        })
        .collect();
    Ok(json!({
        "levels": levels,
        "gets": s.gets,
        "reads_saved": s.total.filter_negatives,
        "observed_fpr": s.total.observed_fpr,
        "theoretical_fpr": s.total.theoretical_fpr,
        "data_blocks_read_per_get": s.data_blocks_read_per_get,
        "tables_without_usable_filter": s.total.tables_without_usable_filter,
    }))
}

fn size(
    items: u64,
    fpr: Option<f64>,
    bits_per_key: Option<f64>,
    memory: Option<u64>,
    key_bytes: u64,
) -> CliResult {
    if items == 0 {
        return Err("--items must be at least 1".into());
    }
    let bpk = match (fpr, bits_per_key, memory) {
        (Some(p), _, _) if p > 0.0 && p < 1.0 => math::bits_per_key_for_fpr(p),
        (Some(p), _, _) => return Err(format!("--fpr {p} must be between 0 and 1")),
        (_, Some(b), _) if b > 0.0 => b,
        (_, Some(b), _) => return Err(format!("--bits-per-key {b} must be positive")),
        (_, _, Some(m)) if m > 0 => m as f64 * 8.0 / items as f64,
        _ => return Err("give one of --fpr, --bits-per-key or --memory".into()),
    };
    let m = (items as f64 * bpk).ceil() as u64;
    let k = math::optimal_num_hashes(bpk);
    let rate = math::false_positive_rate(items, m, k);
    let exact = items.saturating_mul(key_bytes);
    Ok(json!({
        "items": items, "bits_per_key": bpk, "m_bits": m, "k": k, "filter_bytes": m.div_ceil(8),
        "false_positive_rate": rate, "false_positives_per_items": rate * items as f64,
        "exact_set_bytes": exact, "exact_set_over_filter": exact as f64 / m.div_ceil(8) as f64,
    }))
}
