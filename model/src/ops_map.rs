//! Reading maps keyed by [`Op`] name so that a report from a newer build, which may count
//! operations this build does not know, still reads: unknown operations are skipped.

use crate::sample::Op;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// The operation with this report name (`dma_map`, ...).
pub fn op_named(name: &str) -> Option<Op> {
    Op::ALL.into_iter().find(|op| op.name() == name)
}

/// `deserialize_with` for `BTreeMap<Op, T>` fields: unknown operation names are dropped.
pub(crate) fn skip_unknown<'de, D, T>(deserializer: D) -> Result<BTreeMap<Op, T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let by_name = BTreeMap::<String, T>::deserialize(deserializer)?;
    Ok(by_name
        .into_iter()
        .filter_map(|(name, value)| Some((op_named(&name)?, value)))
        .collect())
}

/// `deserialize_with` for `Vec<Op>` fields: unknown operation names are dropped.
pub(crate) fn skip_unknown_list<'de, D>(deserializer: D) -> Result<Vec<Op>, D::Error>
where
    D: Deserializer<'de>,
{
    let names = Vec::<String>::deserialize(deserializer)?;
    Ok(names.iter().filter_map(|name| op_named(name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_found_by_its_name() {
        for op in Op::ALL {
            assert_eq!(op_named(op.name()), Some(op));
            let json = serde_json::to_value(op).expect("serializes");
            assert_eq!(json, op.name(), "serde name and Op::name agree");
        }
        assert_eq!(op_named("teleport"), None);
    }
}
