//! Serde for a map whose typed keys are written as text (`#[serde(with =
//! "iommutop_abi::keyed_by_text")]`): keyed by that text and in the text's order, so that a map
//! by `Op` or by page size writes the JSON a map by their names did, and reads it back through
//! the key's own parsing.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt::Display;

pub fn serialize<K: Display, V: Serialize, S: Serializer>(
    map: &BTreeMap<K, V>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let by_text: BTreeMap<String, &V> = map.iter().map(|(k, v)| (k.to_string(), v)).collect();
    by_text.serialize(serializer)
}

pub fn deserialize<'de, K, V, D>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
    D: Deserializer<'de>,
{
    BTreeMap::deserialize(deserializer)
}
