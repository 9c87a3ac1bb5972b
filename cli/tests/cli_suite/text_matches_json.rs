//! The text output and `--json` print the same fields with the same
//! values: the text of `stats --absent-gets`, `inspect --verify`, `trace`
//! and `get` on a deep store, parsed back (names and nesting by indent,
//! tables by their header, numbers as printed: four significant digits,
//! whole numbers from 10^4), equals the JSON of the same command, field by
//! field and row by row, in the same order.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::process::Command;

use serde_json::Value;

fn run(json: bool, args: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bloomlsm"));
    if json {
        command.arg("--json");
    }
    let out = command.args(args).output().unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {out:?}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Whether the printed `text` is `v` as the renderer prints it.
fn agrees(text: &str, v: &Value) -> bool {
    match v {
        Value::Null => text == "-" || text == "not found",
        Value::Bool(b) => text == if *b { "yes" } else { "no" },
        Value::String(s) => {
            // Control characters and backslashes as Rust escapes them,
            // whitespace at either end as `\u{..}`.
            let end = s.chars().count().saturating_sub(1);
            let escaped: String = s
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if c.is_control() || c == '\\' {
                        c.escape_default().to_string()
                    } else if c.is_whitespace() && (i == 0 || i == end) {
                        c.escape_unicode().to_string()
                    } else {
                        c.to_string()
                    }
                })
                .collect();
            text == escaped
        }
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => text.parse::<u64>() == Ok(u),
            (None, Some(f)) => text.parse::<f64>().is_ok_and(|t| {
                let err = (t - f).abs();
                // Whole numbers from 10^4 (0.5 off at most), otherwise four
                // significant digits.
                err <= 0.5 && f.abs() >= 1e4 || err <= f.abs() * 1e-3 || t == f
            }),
            _ => false,
        },
        Value::Array(_) | Value::Object(_) => false,
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// Printed after the name on the name's own line.
fn is_inline(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.len() <= 3 && m.values().all(is_scalar),
        Value::Array(items) => items.iter().all(is_scalar),
        _ => true,
    }
}

fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Checks `lines[at..]` against `v` printed at `indent`; returns where it ended.
fn check(lines: &[&str], mut at: usize, indent: usize, v: &Value) -> usize {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            // serde_json's map is sorted by name: each printed line's
            // name is looked up in it, and every name must be printed
            // once (`cli.rs` checks the order).
            let mut printed = Vec::new();
            while at < lines.len()
                && lines[at].starts_with(&pad)
                && !lines[at][indent..].starts_with(' ')
            {
                let line = lines[at];
                let name: String = line[indent..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let value = map
                    .get(&name)
                    .unwrap_or_else(|| panic!("line {at} {line:?}: {name} is not in the JSON"));
                assert!(!printed.contains(&name), "line {at}: {name} twice");
                let rest = &line[indent + name.len()..];
                if is_inline(value) {
                    let rest = rest.trim_start();
                    let ok = match value {
                        Value::Object(m) => {
                            let parts = cells(rest);
                            parts.len() == m.len()
                                && parts.iter().all(|p| {
                                    p.split_once(' ').is_some_and(|(n, t)| {
                                        m.get(n).is_some_and(|v| agrees(t, v))
                                    })
                                })
                        }
                        Value::Array(items) if items.is_empty() => rest == "(none)",
                        Value::Array(items) => {
                            let parts: Vec<&str> = rest.split(", ").collect();
                            parts.len() == items.len()
                                && items.iter().zip(parts).all(|(v, p)| agrees(p, v))
                        }
                        scalar => agrees(rest, scalar),
                    };
                    assert!(ok, "line {at} {line:?}: JSON {value}");
                    at += 1;
                } else {
                    assert_eq!(rest, ":", "line {at} {line:?}");
                    at = check(lines, at + 1, indent + 2, value);
                }
                printed.push(name);
            }
            let mut names: Vec<&String> = map.keys().collect();
            let mut printed: Vec<&String> = printed.iter().collect();
            names.sort();
            printed.sort();
            assert_eq!(printed, names, "fields printed at line {at}");
            at
        }
        Value::Array(items) if items.is_empty() => {
            assert_eq!(lines[at].trim(), "(none)");
            at + 1
        }
        Value::Array(items) => {
            let rows: Vec<&serde_json::Map<String, Value>> =
                items.iter().map(|i| i.as_object().unwrap()).collect();
            assert!(rows.iter().all(|r| r.values().all(is_scalar)));
            let names = cells(lines[at]);
            let mut sorted = names.clone();
            sorted.sort_unstable();
            let keys: Vec<&str> = rows[0].keys().map(String::as_str).collect();
            assert_eq!(sorted, keys, "line {at}");
            for (i, row) in rows.iter().enumerate() {
                let line = lines[at + 1 + i];
                let printed = cells(line);
                assert_eq!(printed.len(), names.len(), "line {line:?}");
                for (name, text) in names.iter().zip(printed) {
                    assert!(
                        agrees(text, &row[*name]),
                        "line {line:?}: {name} is {}",
                        row[*name]
                    );
                }
            }
            at + 1 + rows.len()
        }
        scalar => {
            assert!(agrees(lines[at].trim(), scalar));
            at + 1
        }
    }
}

fn same(args: &[&str]) {
    let text = run(false, args);
    let json: Value = serde_json::from_str(&run(true, args)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let end = check(&lines, 0, 0, &json);
    assert_eq!(end, lines.len(), "{args:?}: text past the JSON's fields");
}

#[test]
fn text_and_json_print_the_same_fields_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let levels = common::deep_store(dir.path(), 1000);
    assert!(levels.iter().filter(|&&t| t > 0).count() >= 3, "{levels:?}");
    let d = dir.path().to_str().unwrap();
    same(&["stats", d]);
    same(&["stats", d, "--absent-gets", "700"]);
    for k in ["k00000", "k00011", "k00012", "k00999", "a", "zz"] {
        same(&["trace", d, k]);
        same(&["get", d, k]);
    }
    let tables: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    for table in tables.iter().take(5) {
        same(&[
            "inspect",
            table.to_str().unwrap(),
            "--verify",
            "--probes",
            "2000",
        ]);
    }
    same(&["size", "--items", "1000000000", "--bits-per-key", "10"]);
    same(&["lecture", "--items", "2000", "--probes", "20000"]);
}
