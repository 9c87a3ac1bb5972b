//! A `Value` as text for a reader: one `name  value` line per field, names
//! aligned within their group and kept in the command's order; nested
//! fields indented under `name:`; a list of flat records as a table with a
//! header row (numbers right-aligned).

use crate::output::{Fields, Value};

/// Fields with at most this many scalar values print on their parent's line
/// (`offset 120  size 48`).
const INLINE_FIELDS: usize = 3;

/// The whole text, ending in a newline.
pub fn render(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out
}

fn write_value(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Fields(fields) => write_fields(out, fields, indent),
        Value::List(items) => write_list(out, items, indent),
        scalar => line(out, indent, &scalar_text(scalar)),
    }
}

fn line(out: &mut String, indent: usize, text: &str) {
    let text = format!("{:indent$}{text}", "");
    out.push_str(text.trim_end());
    out.push('\n');
}

/// The text after a field's name when it fits on one line.
fn one_line(value: &Value) -> Option<String> {
    match value {
        Value::Fields(f) if is_flat(f) && f.entries().len() <= INLINE_FIELDS => Some(
            f.entries()
                .iter()
                .map(|(name, v)| format!("{name} {}", scalar_text(v)))
                .collect::<Vec<_>>()
                .join("  "),
        ),
        Value::List(items) if items.is_empty() => Some("(none)".into()),
        Value::List(items) if items.iter().all(Value::is_scalar) => {
            Some(items.iter().map(scalar_text).collect::<Vec<_>>().join(", "))
        }
        Value::Fields(_) | Value::List(_) => None,
        scalar => Some(scalar_text(scalar)),
    }
}

fn write_fields(out: &mut String, fields: &Fields, indent: usize) {
    let width = fields
        .entries()
        .iter()
        .filter(|(_, v)| one_line(v).is_some())
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    for (name, value) in fields.entries() {
        match one_line(value) {
            Some(text) => line(out, indent, &format!("{name:<width$}  {text}")),
            None => {
                line(out, indent, &format!("{name}:"));
                write_value(out, value, indent + 2);
            }
        }
    }
}

fn is_flat(fields: &Fields) -> bool {
    fields.entries().iter().all(|(_, v)| v.is_scalar())
}

fn write_list(out: &mut String, items: &[Value], indent: usize) {
    if items.is_empty() {
        return line(out, indent, "(none)");
    }
    let rows: Option<Vec<&Fields>> = items
        .iter()
        .map(|item| match item {
            Value::Fields(f) if is_flat(f) => Some(f),
            _ => None,
        })
        .collect();
    match rows {
        Some(rows) => write_table(out, &rows, indent),
        None => {
            for (i, item) in items.iter().enumerate() {
                if item.is_scalar() {
                    line(out, indent, &format!("- {}", scalar_text(item)));
                } else {
                    line(out, indent, &format!("[{i}]"));
                    write_value(out, item, indent + 2);
                }
            }
        }
    }
}

/// Rows of flat records: one column per name, in first-seen order.
fn write_table(out: &mut String, rows: &[&Fields], indent: usize) {
    let mut columns: Vec<&'static str> = Vec::new();
    for row in rows {
        for (name, _) in row.entries() {
            if !columns.contains(name) {
                columns.push(name);
            }
        }
    }
    let cells: Vec<Vec<(String, bool)>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|c| match row.get(c) {
                    Some(v) => (scalar_text(v), matches!(v, Value::Int(_) | Value::Float(_))),
                    None => ("-".to_string(), false),
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].0.chars().count())
                .chain(std::iter::once(c.len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // A column is right-aligned when every cell in it is a number.
    let numeric: Vec<bool> = (0..columns.len())
        .map(|i| cells.iter().all(|r| r[i].1))
        .collect();
    let format_row = |texts: Vec<&str>| {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let w = widths[i];
                if numeric[i] {
                    format!("{t:>w$}")
                } else {
                    format!("{t:<w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    line(out, indent, &format_row(columns.clone()));
    for row in &cells {
        line(
            out,
            indent,
            &format_row(row.iter().map(|(t, _)| t.as_str()).collect()),
        );
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::Text(t) => escape_controls(t),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => float_text(*f),
        Value::Bool(b) => if *b { "yes" } else { "no" }.to_string(),
        Value::Null => "-".to_string(),
        Value::Missing => "not found".to_string(),
        Value::Fields(_) | Value::List(_) => String::new(),
    }
}

/// `t` with its control characters escaped as Rust writes them (`\n`,
/// `\t`, `\u{0}`): a key or value holding a newline stays on its row. A
/// backslash is escaped too (`\\`), so every escape reads one way: a
/// newline prints `\n`, a backslash then `n` prints `\\n`. So is
/// whitespace at either end (`\u{20}`, `\u{a0}`): lines are printed with
/// their ends trimmed and cells padded with spaces, which would hide it
/// (`a` and `a ` would print the same).
fn escape_controls(t: &str) -> String {
    let at_an_end = |i: usize, c: char| i == 0 || i + c.len_utf8() == t.len();
    let escaped =
        |i: usize, c: char| c.is_control() || c == '\\' || (c.is_whitespace() && at_an_end(i, c));
    if !t.char_indices().any(|(i, c)| escaped(i, c)) {
        return t.to_string();
    }
    let mut out = String::with_capacity(t.len() + 8);
    for (i, c) in t.char_indices() {
        if c.is_control() || c == '\\' {
            out.extend(c.escape_default());
        } else if escaped(i, c) {
            // `escape_default` leaves a space as it is.
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whole numbers without decimals, large ones rounded to whole numbers,
/// the rest with four significant digits (tiny ones in scientific
/// notation). JSON keeps full precision.
fn float_text(f: f64) -> String {
    let a = f.abs();
    if !f.is_finite() {
        f.to_string()
    } else if (f.fract() == 0.0 && a < 1e16) || a >= 1e4 {
        format!("{f:.0}")
    } else if a >= 1e-4 {
        let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
        format!("{f:.decimals$}")
    } else {
        format!("{f:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_print_in_order_with_aligned_names() {
        let v = Value::from(
            Fields::new()
                .with("key", "hello")
                .with("value", Value::Missing)
                .with("blocks_read", 0u64),
        );
        assert_eq!(
            render(&v),
            "key          hello\nvalue        not found\nblocks_read  0\n"
        );
    }

    #[test]
    fn nested_fields_indent_and_small_ones_stay_inline() {
        let handle = Fields::new().with("offset", 120u64).with("size", 48u64);
        let v = Value::from(
            Fields::new()
                .with("file", "t.sst")
                .with("footer", Fields::new().with("index", handle))
                .with(
                    "filter",
                    Fields::new()
                        .with("a", 1u64)
                        .with("b", 2u64)
                        .with("c", 3u64)
                        .with("d", 4u64),
                ),
        );
        assert_eq!(
            render(&v),
            "file  t.sst\nfooter:\n  index  offset 120  size 48\nfilter:\n  a  1\n  b  2\n  c  3\n  d  4\n"
        );
    }

    #[test]
    fn records_become_a_table_with_numbers_right_aligned() {
        let row = |level: u64, source: &str| {
            Value::from(Fields::new().with("level", level).with("source", source))
        };
        let v = Value::from(vec![row(0, "memtable"), row(12, "table 7")]);
        assert_eq!(
            render(&v),
            "level  source\n    0  memtable\n   12  table 7\n"
        );
        assert_eq!(render(&Value::List(Vec::new())), "(none)\n");
    }

    #[test]
    fn numbers_read_as_numbers() {
        assert_eq!(float_text(10.0), "10");
        assert_eq!(float_text(64e9), "64000000000");
        assert_eq!(float_text(8_194_022.4), "8194022");
        assert_eq!(float_text(9.5851), "9.585");
        assert_eq!(float_text(0.94), "0.9400");
        assert_eq!(float_text(170.6667), "170.7");
        assert_eq!(float_text(0.008194), "0.008194");
        assert_eq!(float_text(-0.5), "-0.5000");
        assert_eq!(float_text(0.000067), "6.700e-5");
        assert_eq!(scalar_text(&Value::Bool(false)), "no");
        assert_eq!(scalar_text(&Value::Null), "-");
    }
}
