//! Workload parameters: each workload declares its keys ([`ParamSpec`]) once; profiles, `--set
//! key=value` and `iommutop workload NAME key=value` are all checked against that declaration,
//! and the workload reads the checked values through [`ParamValues`].

mod value;

pub use value::{ParamValue, WorkloadParams};

use crate::units::{self, format_size};
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// A parameter that is wrong: its key as a profile writes it, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter `{key}`: {message}")]
pub struct ParamError {
    pub key: String,
    pub message: String,
}

impl ParamError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> ParamError {
        ParamError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// What values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Bool,
    /// A whole number in `min..=max`.
    Int {
        min: i64,
        max: i64,
    },
    /// A number in `min..=max`.
    Float {
        min: f64,
        max: f64,
    },
    /// Bytes: a number, or a string with a binary suffix (`4k`, `128K`, `256MiB`, `1g`); stored
    /// as the number of bytes.
    Size {
        min: u64,
        max: u64,
    },
    Str,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A list of strings (`["eth0", "eth1"]`, or `eth0,eth1` on a command line).
    StrList {
        min_len: usize,
        max_len: usize,
    },
    /// A list of whole numbers in `min..=max`.
    IntList {
        min: i64,
        max: i64,
    },
    /// A list of words from a set (`["4k", "2m"]`).
    ChoiceList(&'static [&'static str]),
}

/// A parameter's value when neither the profile nor the command line gives one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    /// No default: the parameter is absent unless given (the workload decides what that means).
    Unset,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
    Strs(&'static [&'static str]),
    Ints(&'static [i64]),
}

impl DefaultValue {
    fn value(self) -> Option<Value> {
        Some(match self {
            DefaultValue::Unset => return None,
            DefaultValue::Bool(b) => Value::from(b),
            DefaultValue::Int(n) => Value::from(n),
            DefaultValue::Float(x) => Value::from(x),
            DefaultValue::Str(s) => Value::from(s),
            DefaultValue::Strs(list) => Value::from(list.to_vec()),
            DefaultValue::Ints(list) => Value::from(list.to_vec()),
        })
    }
}

/// One parameter of a workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub key: &'static str,
    pub kind: Kind,
    pub default: DefaultValue,
    /// One line for `iommutop workload NAME --help` and docs/profiles.md.
    pub help: &'static str,
}

impl ParamSpec {
    /// Checks a value given in a profile (TOML turned JSON) and returns it normalized.
    pub fn check(&self, value: &Value) -> Result<Value, BadValue> {
        check_value(self.kind, value)
    }

    /// Parses a value given as text (`--set key=TEXT`, `iommutop workload NAME key=TEXT`).
    pub fn parse_text(&self, text: &str) -> Result<Value, BadValue> {
        let text = text.trim();
        let value = match self.kind {
            Kind::Bool => match text {
                "true" | "yes" | "1" | "on" | "" => Value::Bool(true),
                "false" | "no" | "0" | "off" => Value::Bool(false),
                _ => return Err(BadValue::expected("true or false", format!("`{text}`"))),
            },
            Kind::Int { .. } => Value::from(parse_int(text)?),
            Kind::Float { .. } => Value::from(
                text.parse::<f64>()
                    .map_err(|_| BadValue::expected("a number", format!("`{text}`")))?,
            ),
            Kind::Size { .. } => Value::from(size_in_bytes(text)?),
            Kind::Str | Kind::Choice(_) => Value::from(text),
            Kind::StrList { .. } | Kind::ChoiceList(_) => Value::from(split_list(text)),
            Kind::IntList { .. } => Value::Array(
                split_list(text)
                    .iter()
                    .map(|t| parse_int(t).map(Value::from))
                    .collect::<Result<_, _>>()?,
            ),
        };
        check_value(self.kind, &value)
    }

    /// What values it takes, in words (`a whole number 1..=4096`, `one of: randread, read`).
    pub fn describe_kind(&self) -> String {
        describe(self.kind)
    }

    /// The default, as a profile would write it; `None` if it has none.
    pub fn default_text(&self) -> Option<String> {
        match (self.kind, self.default) {
            (Kind::Size { .. }, DefaultValue::Int(n)) if n > 0 => {
                Some(format!("\"{}\"", format_size(n.unsigned_abs())))
            }
            _ => self.default.value().map(|v| v.to_string()),
        }
    }
}

/// The parameters as a Markdown table (docs/profiles.md holds one per workload; a test keeps
/// them in step).
pub fn markdown_table(specs: &[ParamSpec]) -> String {
    let mut out = String::from("| key | values | default | meaning |\n|---|---|---|---|\n");
    for spec in specs {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            spec.key,
            spec.describe_kind().replace('|', "\\|"),
            spec.default_text()
                .map_or_else(|| "—".to_string(), |d| format!("`{d}`")),
            spec.help.replace('|', "\\|"),
        );
    }
    out
}

/// A value a parameter does not take: what it takes and what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadValue {
    /// `expected a whole number 1..=4096, got 0`.
    #[error("expected {expected}, got {got}")]
    Expected { expected: String, got: String },
    /// Blank text where a string is needed.
    #[error("expected a non-empty string")]
    Empty,
    /// Text that is no size.
    #[error(transparent)]
    Size(#[from] units::SizeError),
}

impl BadValue {
    fn expected(expected: impl Into<String>, got: impl Into<String>) -> BadValue {
        BadValue::Expected {
            expected: expected.into(),
            got: got.into(),
        }
    }
}

/// The message, for errors that carry one (a profile's, a workload's).
impl From<BadValue> for String {
    fn from(bad: BadValue) -> String {
        bad.to_string()
    }
}

fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_int(text: &str) -> Result<i64, BadValue> {
    let t = text.trim().replace('_', "");
    t.parse::<i64>()
        .map_err(|_| BadValue::expected("a whole number", format!("`{text}`")))
}

/// A size as parameters give it.
fn size_in_bytes(text: &str) -> Result<u64, BadValue> {
    Ok(units::parse_size(text)?)
}

fn describe(kind: Kind) -> String {
    match kind {
        Kind::Bool => "true or false".into(),
        Kind::Int { min, max } => format!("a whole number {min}..={max}"),
        Kind::Float { min, max } => format!("a number {min}..={max}"),
        Kind::Size { min, max } => format!(
            "a size {}..={} (bytes, or with k/m/g)",
            format_size(min),
            format_size(max)
        ),
        Kind::Str => "a string".into(),
        Kind::Choice(words) => format!("one of: {}", words.join(", ")),
        Kind::StrList { min_len, max_len } if min_len == max_len => {
            format!("a list of {min_len} strings")
        }
        Kind::StrList { min_len, max_len } => {
            format!("a list of {min_len} to {max_len} strings")
        }
        Kind::IntList { min, max } => format!("a list of whole numbers {min}..={max}"),
        Kind::ChoiceList(words) => format!("a list of: {}", words.join(", ")),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a decimal number",
        Value::Number(_) => "a whole number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 40 {
        format!("{}…", &text[..text.floor_char_boundary(40)])
    } else {
        text
    }
}

fn check_value(kind: Kind, value: &Value) -> Result<Value, BadValue> {
    let wrong = || BadValue::expected(describe(kind), type_name(value));
    let out_of_range = || BadValue::expected(describe(kind), shown(value));
    match kind {
        Kind::Bool => value.as_bool().map(Value::from).ok_or_else(wrong),
        Kind::Int { min, max } => {
            let n = value.as_i64().ok_or_else(wrong)?;
            (min..=max)
                .contains(&n)
                .then(|| Value::from(n))
                .ok_or_else(out_of_range)
        }
        Kind::Float { min, max } => {
            let x = value.as_f64().ok_or_else(wrong)?;
            (x.is_finite() && (min..=max).contains(&x))
                .then(|| Value::from(x))
                .ok_or_else(out_of_range)
        }
        Kind::Size { min, max } => {
            let bytes = match value {
                Value::String(s) => size_in_bytes(s)?,
                Value::Number(n) => n.as_u64().ok_or_else(out_of_range)?,
                _ => return Err(wrong()),
            };
            if (min..=max).contains(&bytes) {
                Ok(Value::from(bytes))
            } else {
                Err(out_of_range())
            }
        }
        Kind::Str => value
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .map(Value::from)
            .ok_or_else(|| match value {
                Value::String(_) => BadValue::Empty,
                _ => wrong(),
            }),
        Kind::Choice(words) => {
            let s = value.as_str().ok_or_else(wrong)?;
            words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(s))
                .map(|w| Value::from(*w))
                .ok_or_else(|| BadValue::expected(describe(kind), format!("\"{s}\"")))
        }
        Kind::StrList { min_len, max_len } => {
            let items = list_items(value).ok_or_else(wrong)?;
            let mut out = Vec::new();
            for item in items {
                let s = item
                    .as_str()
                    .filter(|s| !s.trim().is_empty())
                    .ok_or_else(out_of_range)?;
                out.push(Value::from(s));
            }
            if (min_len..=max_len).contains(&out.len()) {
                Ok(Value::Array(out))
            } else {
                Err(BadValue::expected(
                    describe(kind),
                    format!("{} item(s)", out.len()),
                ))
            }
        }
        Kind::IntList { min, max } => {
            let items = list_items(value).ok_or_else(wrong)?;
            if items.is_empty() {
                return Err(BadValue::expected(describe(kind), "an empty list"));
            }
            items
                .iter()
                .map(|item| {
                    item.as_i64()
                        .filter(|n| (min..=max).contains(n))
                        .map(Value::from)
                        .ok_or_else(out_of_range)
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array)
        }
        Kind::ChoiceList(words) => {
            let items = list_items(value).ok_or_else(wrong)?;
            if items.is_empty() {
                return Err(BadValue::expected(describe(kind), "an empty list"));
            }
            let mut out: Vec<Value> = Vec::new();
            for item in items {
                let s = item.as_str().ok_or_else(out_of_range)?;
                let word = words
                    .iter()
                    .find(|w| w.eq_ignore_ascii_case(s))
                    .ok_or_else(|| BadValue::expected(describe(kind), format!("\"{s}\"")))?;
                if !out.iter().any(|v| v == *word) {
                    out.push(Value::from(*word));
                }
            }
            Ok(Value::Array(out))
        }
    }
}

/// A list, or a single item standing for a list of one.
fn list_items(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items.clone()),
        Value::String(_) | Value::Number(_) => Some(vec![value.clone()]),
        _ => None,
    }
}

/// Why a key is not accepted: unknown (with the nearest known key, if one is close).
pub fn unknown_key_message(key: &str, workload: &str, specs: &[ParamSpec]) -> String {
    let mut message = format!("unknown parameter for workload {workload}");
    if let Some(near) = specs
        .iter()
        .map(|s| (edit_distance(key, s.key), s.key))
        .filter(|&(d, _)| d <= 2 || d * 3 <= key.len())
        .min()
        .map(|(_, k)| k)
    {
        let _ = write!(message, " (did you mean `{near}`?)");
    } else {
        let keys: Vec<&str> = specs.iter().map(|s| s.key).collect();
        let _ = write!(message, " (known: {})", keys.join(", "));
    }
    message
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// A workload's checked parameters, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamValues {
    workload: &'static str,
    values: WorkloadParams,
}

impl ParamValues {
    /// Checks `given` (already normalized values by key, as [`ParamSpec::check`] returns them)
    /// against `specs` and fills in the defaults. Keys must be known.
    pub fn new(
        workload: &'static str,
        specs: &[ParamSpec],
        given: Map<String, Value>,
    ) -> Result<ParamValues, ParamError> {
        let mut values = WorkloadParams::new();
        for spec in specs {
            let value = match given.get(spec.key) {
                Some(v) => Some(spec.check(v).map_err(|m| ParamError::new(spec.key, m))?),
                None => spec.default.value(),
            };
            if let Some(value) = value {
                let typed = ParamValue::from_json(&value).ok_or_else(|| {
                    ParamError::new(spec.key, format!("no parameter takes {value}"))
                })?;
                values.insert(spec.key.to_string(), typed);
            }
        }
        if let Some(key) = given.keys().find(|k| !specs.iter().any(|s| s.key == *k)) {
            return Err(ParamError::new(
                key.clone(),
                unknown_key_message(key, workload, specs),
            ));
        }
        Ok(ParamValues { workload, values })
    }

    pub fn workload(&self) -> &'static str {
        self.workload
    }

    /// Every parameter with its value (for the report).
    pub fn to_params(&self) -> WorkloadParams {
        self.values.clone()
    }

    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    fn get(&self, key: &str) -> Result<&ParamValue, ParamError> {
        self.values
            .get(key)
            .ok_or_else(|| ParamError::new(key, "missing: this workload needs it"))
    }

    fn mistyped(key: &str, what: &str) -> ParamError {
        ParamError::new(key, format!("expected {what}"))
    }

    pub fn bool(&self, key: &str) -> Result<bool, ParamError> {
        self.get(key)?
            .as_bool()
            .ok_or_else(|| Self::mistyped(key, "true or false"))
    }

    pub fn u64(&self, key: &str) -> Result<u64, ParamError> {
        self.get(key)?
            .as_u64()
            .ok_or_else(|| Self::mistyped(key, "a whole number"))
    }

    pub fn f64(&self, key: &str) -> Result<f64, ParamError> {
        self.get(key)?
            .as_f64()
            .ok_or_else(|| Self::mistyped(key, "a number"))
    }

    pub fn str(&self, key: &str) -> Result<&str, ParamError> {
        self.get(key)?
            .as_str()
            .ok_or_else(|| Self::mistyped(key, "a string"))
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, ParamError> {
        if self.has(key) {
            self.str(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn strs(&self, key: &str) -> Result<Vec<String>, ParamError> {
        self.get(key)?
            .as_list()
            .and_then(|items| {
                items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .ok_or_else(|| Self::mistyped(key, "a list of strings"))
    }

    pub fn u64s(&self, key: &str) -> Result<Vec<u64>, ParamError> {
        self.get(key)?
            .as_list()
            .and_then(|items| items.iter().map(ParamValue::as_u64).collect())
            .ok_or_else(|| Self::mistyped(key, "a list of whole numbers"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            key: "iodepth",
            kind: Kind::Int { min: 1, max: 4096 },
            default: DefaultValue::Int(1),
            help: "",
        },
        ParamSpec {
            key: "bs",
            kind: Kind::Size {
                min: 512,
                max: 1 << 26,
            },
            default: DefaultValue::Int(4096),
            help: "",
        },
        ParamSpec {
            key: "rw",
            kind: Kind::Choice(&["read", "randread"]),
            default: DefaultValue::Str("randread"),
            help: "",
        },
        ParamSpec {
            key: "nics",
            kind: Kind::StrList {
                min_len: 2,
                max_len: 2,
            },
            default: DefaultValue::Unset,
            help: "",
        },
    ];

    #[test]
    fn defaults_fill_in_and_given_values_are_normalized() {
        let given = json!({"bs": "128k", "rw": "READ"});
        let params = ParamValues::new("fio", SPECS, given.as_object().cloned().unwrap()).unwrap();
        assert_eq!(params.u64("bs").unwrap(), 128 << 10);
        assert_eq!(params.str("rw").unwrap(), "read");
        assert_eq!(params.u64("iodepth").unwrap(), 1);
        assert!(!params.has("nics"));
    }

    #[test]
    fn wrong_values_say_what_was_expected() {
        let check = |key: &str, value: Value| {
            let spec = SPECS.iter().find(|s| s.key == key).unwrap();
            spec.check(&value).unwrap_err().to_string()
        };
        assert_eq!(
            check("iodepth", json!(0)),
            "expected a whole number 1..=4096, got 0"
        );
        assert_eq!(
            check("iodepth", json!("32")),
            "expected a whole number 1..=4096, got a string"
        );
        assert_eq!(
            check("rw", json!("write")),
            "expected one of: read, randread, got \"write\""
        );
        assert_eq!(
            check("nics", json!(["eth0"])),
            "expected a list of 2 strings, got 1 item(s)"
        );
        assert!(check("bs", json!("4q")).contains("k, m or g suffix"));
    }

    #[test]
    fn text_values_parse_by_kind() {
        let spec = |key: &str| *SPECS.iter().find(|s| s.key == key).unwrap();
        assert_eq!(spec("iodepth").parse_text("32"), Ok(json!(32)));
        assert_eq!(spec("bs").parse_text("4k"), Ok(json!(4096)));
        assert_eq!(
            spec("nics").parse_text("eth0, eth1"),
            Ok(json!(["eth0", "eth1"]))
        );
        assert!(spec("iodepth").parse_text("x").is_err());
    }

    #[test]
    fn unknown_keys_suggest_the_nearest() {
        let given = json!({"iodpeth": 4});
        let err = ParamValues::new("fio", SPECS, given.as_object().cloned().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "parameter `iodpeth`: unknown parameter for workload fio (did you mean `iodepth`?)"
        );
        let msg = unknown_key_message("zzzzzzzz", "fio", SPECS);
        assert!(msg.contains("known: iodepth, bs, rw, nics"), "{msg}");
    }
}
