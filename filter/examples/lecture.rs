//! Prints every number of the lecture beside its formula and a rate
//! measured on real filters:
//! `cargo run --release -p bloomlsm-filter --example lecture [items] [probes]`.

use bloomlsm_filter::lecture::lecture_report;

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
}
