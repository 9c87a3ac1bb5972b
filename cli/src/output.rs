//! What a command prints: a tree of named fields kept in the order the
//! command pushed them (what was asked, then the answer, then the details).
//! `render` turns it into aligned text; with `--json` the same tree is
//! serialized as JSON, in the same order (a struct-like map, never sorted).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// One printed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Text (keys and values are shown as UTF-8, invalid bytes replaced).
    Text(String),
    /// A count, size or number.
    Int(u64),
    /// A rate, ratio or measurement.
    Float(f64),
    /// Yes or no.
    Bool(bool),
    /// Not applicable here (`-` in text, `null` in JSON).
    Null,
    /// A key with no value: `not found` in text, `null` in JSON.
    Missing,
    /// Named fields, in order.
    Fields(Fields),
    /// A sequence (rows of a table when every item is flat `Fields`).
    List(Vec<Value>),
}

impl Value {
    /// Text, number, yes/no, null or missing: printed on one line.
    pub fn is_scalar(&self) -> bool {
        !matches!(self, Value::Fields(_) | Value::List(_))
    }
}

/// Named values in the order they were added. Names are unique within one
/// `Fields` (REQUIRES: callers never push a name twice).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    /// No fields yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `name` (builder style).
    pub fn with(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.push(name, value);
        self
    }

    /// Appends `name`.
    pub fn push(&mut self, name: &'static str, value: impl Into<Value>) {
        debug_assert!(self.0.iter().all(|(n, _)| *n != name), "{name} twice");
        self.0.push((name, value.into()));
    }

    /// The fields, in order.
    pub fn entries(&self) -> &[(&'static str, Value)] {
        &self.0
    }

    /// The value of `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

/// Bytes from the store, as text.
pub fn text(bytes: &[u8]) -> Value {
    Value::Text(String::from_utf8_lossy(bytes).into_owned())
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Value::Int(u64::from(n))
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Self {
        Value::Int(n as u64)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Fields> for Value {
    fn from(f: Fields) -> Self {
        Value::Fields(f)
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Value::List(items)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Text(t) => s.serialize_str(t),
            Value::Int(n) => s.serialize_u64(*n),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Null | Value::Missing => s.serialize_none(),
            Value::Fields(f) => f.serialize(s),
            Value::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

impl Serialize for Fields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// `value` as pretty JSON, fields in their order.
pub fn to_json(value: &Value) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_the_order_fields_were_pushed_in() {
        let v = Value::from(
            Fields::new()
                .with("zeta", 1u64)
                .with("alpha", "a")
                .with("mid", Value::Missing),
        );
        let json = to_json(&v).unwrap();
        let zeta = json.find("\"zeta\"").unwrap();
        let alpha = json.find("\"alpha\"").unwrap();
        let mid = json.find("\"mid\"").unwrap();
        assert!(zeta < alpha && alpha < mid, "{json}");
        assert!(json.contains("\"mid\": null"), "{json}");
    }

    #[test]
    fn none_is_null_and_lists_are_arrays() {
        let v = Value::from(vec![Value::from(None::<u64>), Value::from(2.5)]);
        assert_eq!(serde_json::to_string(&v).unwrap(), "[null,2.5]".to_string());
    }
}
