//! Prints every number of the lecture beside its formula and a rate
//! measured on real filters, then the blocked filter's k curve beside
//! RocksDB's, then the "beyond Bloom" table:
//! `cargo run --release -p bloomlsm-filter --example lecture [items] [probes]`.

use bloomlsm_filter::lecture::{beyond_bloom, blocked_k_curve, lecture_report};

fn percent(v: f64) -> String {
    format!("{:.4}%", v * 100.0)
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let items = args.next().and_then(Result::ok).unwrap_or(1_000_000);
    let probes = args.next().and_then(Result::ok).unwrap_or(10_000_000);
    println!("bloomlsm: the lecture's numbers ({items} keys per filter, {probes} absent probes)\n");
    println!(
        "{:<28} {:<62} {:>14} {:>14} {:>14}",
        "topic", "quantity", "lecture", "formula", "measured"
    );
    for row in lecture_report(items, probes) {
        let fmt = |v: f64| match row.unit {
            "percent" => format!("{v:.4}%"),
            "fraction" | "ratio" => format!("{v:.4}"),
            _ => format!("{v:.4e}"),
        };
        println!(
            "{:<28} {:<62} {:>14} {:>14} {:>14}",
            row.topic,
            row.quantity,
            fmt(row.lecture),
            fmt(row.formula),
            fmt(row.measured)
        );
    }

    println!(
        "\nblocked filter (512-bit blocks): k per bits/key, ours beside RocksDB's FastLocalBloom"
    );
    println!(
        "{:>8} {:>4} {:>6} {:>12} {:>12} {:>6} {:>12} {:>12}",
        "bits/key", "k", "std k", "expected", "measured", "RDB k", "RDB expect", "RDB quoted"
    );
    for r in blocked_k_curve(items, probes) {
        println!(
            "{:>8} {:>4} {:>6} {:>12} {:>12} {:>6} {:>12} {:>12}",
            r.bits_per_key,
            r.k,
            r.standard_k,
            percent(r.expected_fpr),
            percent(r.measured_fpr),
            r.rocksdb_k,
            percent(r.rocksdb_expected_fpr),
            r.rocksdb_published_fpr.map_or("-".into(), percent)
        );
    }

    println!("\nbeyond Bloom: bits per key against the bound log2(1/eps)");
    println!(
        "{:>8} {:<9} {:>9} {:>12} {:>12} {:>9} {:>7}",
        "target", "kind", "bits/key", "expected", "measured", "bound", "x bound"
    );
    for r in beyond_bloom(items, probes) {
        println!(
            "{:>8} {:<9} {:>9.3} {:>12} {:>12} {:>9.3} {:>7.3}",
            percent(r.target_fpr),
            r.kind.name(),
            r.bits_per_key,
            percent(r.expected_fpr),
            percent(r.measured_fpr),
            r.bound_bits_per_key,
            r.over_bound
        );
    }
}
