//! Listing a partition's operations, newest first, through its creation index: the positions
//! an index yields (creation time, then id, both descending) are examined one by one against a
//! filter, and the listing stops at a limit of matches or of positions examined — so a filter
//! that matches little costs a bounded read, and the caller resumes from where it stopped.

use super::ProjectionError;
use crate::core::key::OperationId;
use crate::core::operation::OperationRecord;
use serde::{Deserialize, Serialize};

/// A place in a partition's listing: an operation's creation time (log time, ms) and its id.
/// Listings run from the newest place down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ListPosition {
    /// Log time of the operation's first claim.
    pub created_at_ms: u64,
    /// The operation.
    pub id: OperationId,
}

impl ListPosition {
    /// The place of `record`.
    pub fn of(record: &OperationRecord) -> Self {
        Self {
            created_at_ms: record.created_at_ms,
            id: record.id,
        }
    }
}

/// Which operations a listing keeps: every field given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFilter {
    /// Only this principal's.
    pub principal: Option<String>,
    /// Only this tool's.
    pub tool: Option<String>,
    /// Only those in this state now (`manual`, `completed`, …).
    pub state: Option<String>,
    /// Only those created at or after this log time (ms).
    pub since_ms: Option<u64>,
    /// Only those strictly older than this place (a cursor, or the end of a time range).
    pub before: Option<ListPosition>,
}

impl ListFilter {
    /// Whether `record` is kept (its place is checked by the index walk, not here).
    pub fn keeps(&self, record: &OperationRecord) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == record.principal)
            && self.tool.as_ref().is_none_or(|t| *t == record.tool)
            && self
                .state
                .as_deref()
                .is_none_or(|s| s == record.state.name())
    }
}

/// One partition's part of a listing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSlice {
    /// Matching operations, newest first, at most the limit asked for.
    pub items: Vec<OperationRecord>,
    /// The oldest place examined when the walk stopped at a limit: every place at or above it
    /// (and below the filter's `before`) was examined. `None`: the partition has nothing more
    /// that the filter could keep.
    pub stopped_at: Option<ListPosition>,
}

/// Walks `places` (newest first, strictly below the filter's `before`), reading each record
/// with `get`, until `limit` matches or `examine_max` places were examined.
pub(crate) fn walk(
    places: impl IntoIterator<Item = Result<ListPosition, ProjectionError>>,
    get: impl Fn(&OperationId) -> Result<Option<OperationRecord>, ProjectionError>,
    filter: &ListFilter,
    limit: usize,
    examine_max: usize,
) -> Result<ListSlice, ProjectionError> {
    let mut slice = ListSlice::default();
    if limit == 0 {
        return Ok(slice);
    }
    let mut examined = 0;
    for place in places {
        let place = place?;
        debug_assert!(filter.before.is_none_or(|b| place < b), "walk out of range");
        if filter
            .since_ms
            .is_some_and(|since| place.created_at_ms < since)
        {
            break;
        }
        examined += 1;
        if let Some(record) = get(&place.id)?
            && filter.keeps(&record)
        {
            slice.items.push(record);
        }
        if slice.items.len() == limit || examined == examine_max {
            slice.stopped_at = Some(place);
            break;
        }
    }
    Ok(slice)
}

/// The newest `limit` operations over several partitions' slices, newest first, and where the
/// next page starts (`None`: nothing more). Only what every partition examined counts: a
/// partition that stopped early (at its examine limit) holds the cut, and matches of the
/// others below it are left for the next page, so no page skips anything.
pub fn merge(slices: Vec<ListSlice>, limit: usize) -> (Vec<OperationRecord>, Option<ListPosition>) {
    let cut = slices.iter().filter_map(|s| s.stopped_at).max();
    let mut items: Vec<OperationRecord> = slices
        .into_iter()
        .flat_map(|s| s.items)
        .filter(|r| cut.is_none_or(|c| ListPosition::of(r) >= c))
        .collect();
    items.sort_unstable_by_key(|r| std::cmp::Reverse(ListPosition::of(r)));
    // Exactly `limit` with every partition done is the last page.
    if items.len() > limit || (items.len() == limit && cut.is_some()) {
        items.truncate(limit);
        let next = items.last().map(ListPosition::of);
        return (items, next);
    }
    (items, cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::operation::{OpState, fixture};

    fn at(n: u8, created_at_ms: u64) -> OperationRecord {
        let mut r = fixture(
            n,
            OpState::Failed {
                code: "declined".into(),
            },
            false,
        );
        r.created_at_ms = created_at_ms;
        r
    }

    fn place(r: &OperationRecord) -> Result<ListPosition, ProjectionError> {
        Ok(ListPosition::of(r))
    }

    #[test]
    fn a_walk_stops_at_the_limit_of_matches_or_of_places_examined() {
        let records = [at(5, 50), at(4, 40), at(3, 30), at(2, 20)];
        let get = |id: &OperationId| Ok(records.iter().find(|r| r.id == *id).cloned());
        let all = ListFilter::default();
        let slice = walk(records.iter().map(place), get, &all, 2, 100).unwrap();
        assert_eq!(slice.items, records[..2]);
        assert_eq!(slice.stopped_at, Some(ListPosition::of(&records[1])));
        let everything = walk(records.iter().map(place), get, &all, 10, 100).unwrap();
        assert_eq!((everything.items.len(), everything.stopped_at), (4, None));
        let none = ListFilter {
            tool: Some("other".into()),
            ..ListFilter::default()
        };
        let slice = walk(records.iter().map(place), get, &none, 10, 3).unwrap();
        assert!(slice.items.is_empty());
        assert_eq!(slice.stopped_at, Some(ListPosition::of(&records[2])));
        let recent = ListFilter {
            since_ms: Some(30),
            ..ListFilter::default()
        };
        let slice = walk(records.iter().map(place), get, &recent, 10, 100).unwrap();
        assert_eq!((slice.items.len(), slice.stopped_at), (3, None));
        assert!(
            walk(records.iter().map(place), get, &all, 0, 100)
                .unwrap()
                .items
                .is_empty()
        );
    }

    #[test]
    fn a_filter_keeps_what_every_given_field_allows() {
        let r = at(1, 10);
        let with = |f: ListFilter| f.keeps(&r);
        assert!(with(ListFilter::default()));
        assert!(with(ListFilter {
            principal: Some("a".into()),
            tool: Some("t".into()),
            state: Some("failed".into()),
            ..ListFilter::default()
        }));
        assert!(!with(ListFilter {
            principal: Some("b".into()),
            ..ListFilter::default()
        }));
        assert!(!with(ListFilter {
            tool: Some("u".into()),
            ..ListFilter::default()
        }));
        assert!(!with(ListFilter {
            state: Some("manual".into()),
            ..ListFilter::default()
        }));
    }

    #[test]
    fn a_merge_never_lists_below_what_a_partition_left_unexamined() {
        let (a, b, c, d) = (at(1, 40), at(2, 30), at(3, 20), at(4, 10));
        // One partition examined down to 25 only; the other found 20 and 10.
        let slices = vec![
            ListSlice {
                items: vec![a.clone(), b.clone()],
                stopped_at: Some(ListPosition {
                    created_at_ms: 25,
                    id: OperationId([0; 16]),
                }),
            },
            ListSlice {
                items: vec![c.clone(), d.clone()],
                stopped_at: None,
            },
        ];
        let (items, next) = merge(slices.clone(), 10);
        assert_eq!(items, [a.clone(), b.clone()]);
        assert_eq!(next.map(|p| p.created_at_ms), Some(25));
        // A full page ends at its last item.
        let (items, next) = merge(slices, 1);
        assert_eq!(items, [a]);
        assert_eq!(next, Some(ListPosition::of(&items[0])));
        // Every partition done: the end.
        let done = vec![ListSlice {
            items: vec![c.clone(), d.clone()],
            stopped_at: None,
        }];
        assert_eq!(merge(done.clone(), 10), (vec![c.clone(), d.clone()], None));
        assert_eq!(
            merge(done.clone(), 2),
            (vec![c.clone(), d], None),
            "no empty last page"
        );
        assert_eq!(merge(done, 1).1, Some(ListPosition::of(&c)));
    }
}
