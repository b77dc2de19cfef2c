//! The counts check of the conformance suite: operations by tool and state, moved by each
//! commit, kept apart per partition, the same before and after the store writes them.

use super::position;
use crate::projection::counts::{CountChange, StateCount};
use crate::projection::{Changes, ProjectionStore};

fn moved(tool: &str, from: Option<&'static str>, to: &'static str) -> CountChange {
    CountChange {
        tool: tool.into(),
        from,
        to,
    }
}

fn counts(store: &dyn ProjectionStore, partition: u32) -> Vec<(String, String, u64)> {
    store
        .counts(partition)
        .expect("reads")
        .into_iter()
        .map(|StateCount { tool, state, count }| (tool, state, count))
        .collect()
}

fn count(tool: &str, state: &str, n: u64) -> (String, String, u64) {
    (tool.to_owned(), state.to_owned(), n)
}

/// Counts follow the moves each commit reports, by tool then state, per partition; a state
/// nobody is in any more is not listed.
pub async fn check_counts(store: &dyn ProjectionStore) {
    assert!(counts(store, 0).is_empty(), "nothing counted yet");
    let first = Changes {
        counts: vec![
            moved("pay", None, "processing"),
            moved("pay", None, "processing"),
            moved("mail", None, "processing"),
        ],
        ..Changes::default()
    };
    store.commit(0, position(3), first).await.expect("commits");
    let elsewhere = Changes {
        counts: vec![moved("pay", None, "manual")],
        ..Changes::default()
    };
    store
        .commit(1, position(1), elsewhere)
        .await
        .expect("commits");
    let second = Changes {
        counts: vec![
            moved("pay", Some("processing"), "completed"),
            moved("mail", Some("processing"), "manual"),
        ],
        ..Changes::default()
    };
    store.commit(0, position(5), second).await.expect("commits");
    let expected = [
        count("mail", "manual", 1),
        count("pay", "completed", 1),
        count("pay", "processing", 1),
    ];
    assert_eq!(counts(store, 0), expected);
    assert_eq!(counts(store, 1), [count("pay", "manual", 1)], "apart");
    store.flush().expect("flushes");
    assert_eq!(counts(store, 0), expected, "the same once written");
}
