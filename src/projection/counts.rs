//! How many operations each partition holds, by tool and state: kept by the fold as deltas,
//! so that a summary of a million operations reads a few dozen numbers, never the records.

use crate::core::operation::OpState;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One operation's move between states in a batch: it left `from` (`None`: it is new) for
/// `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountChange {
    /// Its tool.
    pub tool: String,
    /// Its state before the batch, if it existed.
    pub from: Option<&'static str>,
    /// Its state after.
    pub to: &'static str,
}

/// How many of a partition's operations of `tool` are in `state`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    /// The tool.
    pub tool: String,
    /// The state's name (`processing`, `manual`, …).
    pub state: String,
    /// How many (never 0 in a listing).
    pub count: u64,
}

/// A state's number in stored keys: its place in [`OpState::NAMES`].
pub(crate) fn state_code(state: &str) -> Option<u8> {
    OpState::NAMES
        .iter()
        .position(|n| *n == state)
        .map(|i| i as u8)
}

/// The state a stored key's number names.
pub(crate) fn state_of(code: u8) -> Option<&'static str> {
    OpState::NAMES.get(code as usize).copied()
}

/// What `changes` do to each (tool, state)'s count: +1 for each arrival, −1 for each departure,
/// the pairs that net to nothing left out.
pub fn deltas(changes: &[CountChange]) -> BTreeMap<(&str, &'static str), i64> {
    let mut net: BTreeMap<(&str, &'static str), i64> = BTreeMap::new();
    for change in changes {
        if let Some(from) = change.from {
            *net.entry((&change.tool, from)).or_default() -= 1;
        }
        *net.entry((&change.tool, change.to)).or_default() += 1;
    }
    net.retain(|_, d| *d != 0);
    net
}

/// `count` moved by `delta`, never below zero (a store that lost counts still answers).
pub fn moved(count: u64, delta: i64) -> u64 {
    if delta < 0 {
        count.saturating_sub(delta.unsigned_abs())
    } else {
        count.saturating_add(delta as u64)
    }
}

/// Sums `counts` of any number of partitions into one per (tool, state), by tool then state.
pub fn sum<'a>(counts: impl IntoIterator<Item = &'a StateCount>) -> Vec<StateCount> {
    let mut total: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for c in counts {
        *total.entry((&c.tool, &c.state)).or_default() += c.count;
    }
    total
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|((tool, state), count)| StateCount {
            tool: tool.to_owned(),
            state: state.to_owned(),
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(tool: &str, from: Option<&'static str>, to: &'static str) -> CountChange {
        CountChange {
            tool: tool.into(),
            from,
            to,
        }
    }

    #[test]
    fn moves_between_states_net_out_per_tool_and_state() {
        let changes = [
            change("a", None, "processing"),
            change("a", Some("processing"), "completed"),
            change("b", None, "processing"),
            change("a", Some("manual"), "manual"),
        ];
        let d = deltas(&changes);
        let d: Vec<_> = d.into_iter().collect();
        assert_eq!(d, [(("a", "completed"), 1), (("b", "processing"), 1),]);
        assert_eq!(moved(3, -1), 2);
        assert_eq!(moved(0, -1), 0, "never below zero");
        assert_eq!(moved(3, 2), 5);
    }

    #[test]
    fn state_codes_follow_the_names_and_partitions_sum_by_tool_and_state() {
        for (i, name) in OpState::NAMES.iter().enumerate() {
            assert_eq!(state_code(name), Some(i as u8));
            assert_eq!(state_of(i as u8), Some(*name));
        }
        assert_eq!(state_code("nope"), None);
        assert_eq!(state_of(7), None);
        let c = |tool: &str, state: &str, count| StateCount {
            tool: tool.into(),
            state: state.into(),
            count,
        };
        let summed = sum(&[
            c("b", "manual", 1),
            c("a", "completed", 2),
            c("b", "manual", 3),
            c("a", "failed", 0),
        ]);
        assert_eq!(summed, [c("a", "completed", 2), c("b", "manual", 4)]);
    }
}
