//! A workload parameter's value once checked ([`ParamValue`]), and a workload's parameters by key
//! ([`WorkloadParams`]) as `run.workload.params` holds them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A workload's parameters by key, in key order (as the report writes them).
pub type WorkloadParams = BTreeMap<String, ParamValue>;

/// One parameter's value: what [`super::ParamSpec::check`] leaves of a profile's or a command
/// line's value (sizes are bytes by then), written to the report as the JSON it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    /// A whole number; a JSON number with a fraction or an exponent is a [`ParamValue::Float`],
    /// so `5.0` stays `5.0`.
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<ParamValue>),
}

impl ParamValue {
    /// The value of checked JSON; `None` for what no parameter kind produces (null, objects,
    /// whole numbers beyond `i64`).
    pub fn from_json(value: &Value) -> Option<ParamValue> {
        Some(match value {
            Value::Bool(b) => ParamValue::Bool(*b),
            Value::Number(n) if n.is_f64() => ParamValue::Float(n.as_f64()?),
            Value::Number(n) => ParamValue::Int(n.as_i64()?),
            Value::String(s) => ParamValue::Str(s.clone()),
            Value::Array(items) => {
                ParamValue::List(items.iter().map(Self::from_json).collect::<Option<_>>()?)
            }
            Value::Null | Value::Object(_) => return None,
        })
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            ParamValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            ParamValue::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// The number, whole or not.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(n) => Some(*n as f64),
            ParamValue::Float(x) => Some(*x),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            ParamValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[ParamValue]> {
        match self {
            ParamValue::List(items) => Some(items),
            _ => None,
        }
    }
}

impl From<&str> for ParamValue {
    fn from(s: &str) -> ParamValue {
        ParamValue::Str(s.to_string())
    }
}

impl From<String> for ParamValue {
    fn from(s: String) -> ParamValue {
        ParamValue::Str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each kind of value reads from the JSON it was and writes back the same text: a float that
    /// happens to be whole keeps its `.0`.
    #[test]
    fn values_write_back_the_json_they_were_read_from() {
        let text = r#"{"cpu":true,"duration_s":5.0,"nics":["eth0","eth1"],"port":12865,"ratio":0.25,"test":"TCP_RR","threads":[1,2,4]}"#;
        let params: WorkloadParams = serde_json::from_str(text).unwrap();
        assert_eq!(params["duration_s"], ParamValue::Float(5.0));
        assert_eq!(params["port"], ParamValue::Int(12865));
        assert_eq!(serde_json::to_string(&params).unwrap(), text);
    }

    #[test]
    fn checked_json_converts_and_what_no_kind_produces_is_refused() {
        assert_eq!(
            ParamValue::from_json(&json!([1, 2])),
            Some(ParamValue::List(vec![
                ParamValue::Int(1),
                ParamValue::Int(2)
            ]))
        );
        assert_eq!(
            ParamValue::from_json(&json!(2.0)),
            Some(ParamValue::Float(2.0))
        );
        assert_eq!(ParamValue::from_json(&json!(null)), None);
        assert_eq!(ParamValue::from_json(&json!({"a": 1})), None);
        assert_eq!(ParamValue::from_json(&json!(u64::MAX)), None);
    }

    #[test]
    fn accessors_read_only_their_own_kind() {
        assert_eq!(ParamValue::Int(3).as_f64(), Some(3.0));
        assert_eq!(ParamValue::Int(-1).as_u64(), None);
        assert_eq!(ParamValue::Float(3.0).as_u64(), None);
        assert_eq!(ParamValue::from("x").as_str(), Some("x"));
        assert_eq!(ParamValue::Bool(true).as_list(), None);
    }
}
