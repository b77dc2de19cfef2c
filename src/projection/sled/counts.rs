//! The counts by tool and state in sled: key `n` + partition (u32 BE) + the state's number +
//! the tool's name, value the count (u64 BE). A commit carries each count it moves as it
//! stands after it, so the overlay and sled hold values, never deltas that a read could add
//! twice.

use super::layout::{count_prefix, decode_count_key};
use super::pending::Pending;
use crate::projection::ProjectionError;
use crate::projection::counts::{StateCount, state_of};
use std::collections::{BTreeMap, HashMap};

fn decode(key: &[u8], value: &[u8]) -> Result<u64, ProjectionError> {
    let bytes: [u8; 8] = value.try_into().map_err(|_| ProjectionError::Corrupt {
        what: format!("count {}", hex::encode(key)),
        reason: format!("{} bytes, not 8", value.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// The counts committed but not yet in sled, by key: (the commit's seq, the count after it).
#[derive(Default)]
pub(super) struct Unwritten(HashMap<Vec<u8>, (u64, u64)>);

impl Unwritten {
    /// The count under `key` as last committed, if sled does not hold it yet.
    pub(super) fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.get(key).map(|&(_, n)| n)
    }

    /// What commit `seq` left each of `counts` at.
    pub(super) fn set(&mut self, seq: u64, counts: Vec<(Vec<u8>, u64)>) {
        for (key, count) in counts {
            self.0.insert(key, (seq, count));
        }
    }

    /// Sled holds every commit up to `upto`: `counts`' keys go unless a later commit moved them.
    pub(super) fn written(&mut self, counts: &[(Vec<u8>, u64)], upto: u64) {
        for (key, _) in counts {
            if self.0.get(key).is_some_and(|e| e.0 <= upto) {
                self.0.remove(key);
            }
        }
    }

    /// `partition`'s unwritten counts.
    pub(super) fn of(&self, partition: u32) -> Vec<(Vec<u8>, u64)> {
        let prefix = count_prefix(partition);
        let mine = self.0.iter().filter(|(k, _)| k.starts_with(&prefix));
        mine.map(|(key, &(_, count))| (key.clone(), count))
            .collect()
    }
}

/// Each count `changes` move in `partition`, as it stands after them: `now` says what it is
/// before (the overlay's, else sled's).
pub(super) fn after(
    partition: u32,
    changes: &[crate::projection::counts::CountChange],
    now: impl Fn(&[u8]) -> Result<u64, ProjectionError>,
) -> Result<Vec<(Vec<u8>, u64)>, ProjectionError> {
    let mut counts = Vec::new();
    for ((tool, state), delta) in crate::projection::counts::deltas(changes) {
        let code = crate::projection::counts::state_code(state).ok_or_else(|| {
            ProjectionError::Corrupt {
                what: format!("a count of tool {tool}"),
                reason: format!("{state:?} is not a state"),
            }
        })?;
        let key = super::layout::count_key(partition, code, tool);
        let count = crate::projection::counts::moved(now(&key)?, delta);
        counts.push((key, count));
    }
    Ok(counts)
}

/// The count sled holds under `key` (0 if none).
pub(super) fn stored(db: &sled::Db, key: &[u8]) -> Result<u64, ProjectionError> {
    db.get(key)?.map_or(Ok(0), |v| decode(key, &v))
}

/// Writes a group's counts.
pub(super) fn write(db: &sled::Db, counts: &BTreeMap<&[u8], u64>) -> Result<(), ProjectionError> {
    for (key, count) in counts {
        db.insert(*key, &count.to_be_bytes())?;
    }
    Ok(())
}

/// `partition`'s counts: sled's, with the overlay's newer ones over them.
pub(super) fn read(
    db: &sled::Db,
    pending: &Pending,
    partition: u32,
) -> Result<Vec<StateCount>, ProjectionError> {
    let by_key = pending.counts(partition, || {
        let mut stored = BTreeMap::new();
        for item in db.scan_prefix(count_prefix(partition)) {
            let (key, value) = item?;
            stored.insert(key.to_vec(), decode(&key, &value)?);
        }
        Ok(stored)
    })?;
    let mut counts = Vec::new();
    for (key, count) in by_key {
        let named = decode_count_key(&key).and_then(|(s, tool)| Some((state_of(s)?, tool)));
        let Some((state, tool)) = named else {
            return Err(ProjectionError::Corrupt {
                what: format!("count {}", hex::encode(&key)),
                reason: "not a state and a tool name".into(),
            });
        };
        if count > 0 {
            counts.push(StateCount {
                tool: tool.to_owned(),
                state: state.to_owned(),
                count,
            });
        }
    }
    counts.sort_by(|a, b| (&a.tool, &a.state).cmp(&(&b.tool, &b.state)));
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::super::layout::count_key;

    #[test]
    fn a_counts_key_is_pinned() {
        let manual = crate::projection::counts::state_code("manual").expect("a state");
        assert_eq!(
            hex::encode(count_key(3, manual, "pay.x")),
            "6e00000003047061792e78",
            "`n`, partition 3, state 4 (manual), the tool: a change needs a new format"
        );
    }
}
