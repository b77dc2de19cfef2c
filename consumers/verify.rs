//! The verify consumer: recomputes every partition's hash chain (see `log::chain`) from the
//! log, and the root over all heads. Given heads recorded earlier (what an earlier `audit` or
//! `verify` printed, kept where the log's writers cannot change it), it checks that the log
//! still holds exactly the history they committed to, and names the first partition where it
//! does not. The embedded log checks each record against the seal stored with it as it is
//! opened, so there a changed record is named by its offset before this walk starts.

use crate::log::chain::{self, Chain, Head, Link};
use crate::log::model::{EventLog, LogError, read_held};
use crate::partition::Progress;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Every partition's chain head and the root over them, as printed for an auditor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHeads {
    /// The root over all heads (64 hex digits): the one value to keep elsewhere.
    pub root: String,
    /// Each partition's head, in partition order.
    pub partitions: Vec<PartitionHead>,
}

/// One partition's head.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionHead {
    /// The partition.
    pub partition: u32,
    /// Events chained (the partition's end offset).
    pub events: u64,
    /// The last event's link (64 hex digits).
    pub head: String,
}

/// Why a verification failed or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Reading the log failed, or the log found a record that no longer matches its seal.
    #[error("partition {partition}: {source}")]
    Log {
        /// Partition.
        partition: u32,
        /// Why.
        source: LogError,
    },
    /// The recorded heads cannot be used.
    #[error(
        "the recorded heads are unusable: {0}; pass the JSON an earlier `opledger audit` or `opledger verify` printed"
    )]
    Recorded(String),
    /// The recorded heads are of a log with another partition count.
    #[error(
        "the recorded heads cover {recorded} partitions but the log has {now}: they are another log's"
    )]
    PartitionCount {
        /// Partitions in the recorded heads.
        recorded: usize,
        /// Partitions of the log.
        now: u32,
    },
    /// A partition holds fewer events than when its head was recorded.
    #[error(
        "partition {partition} holds {now} events, fewer than the {recorded} recorded: events were removed since"
    )]
    Shorter {
        /// The partition.
        partition: u32,
        /// Events recorded.
        recorded: u64,
        /// Events now.
        now: u64,
    },
    /// A partition's first events are no longer the ones its recorded head committed to.
    #[error(
        "partition {partition}: its first {events} events are not the ones recorded (the chain's head differs), so the history was changed since"
    )]
    Diverged {
        /// The partition.
        partition: u32,
        /// Events the recorded head covers.
        events: u64,
    },
    /// A partition's walk stopped unexpectedly (a bug: an assertion that stays on).
    #[error("a partition's verification stopped unexpectedly: {0}")]
    Panicked(String),
}

impl ChainHeads {
    /// The printed form of `heads` (in partition order).
    pub fn of(heads: &[Head]) -> Self {
        Self {
            root: hex::encode(chain::root(heads)),
            partitions: (0..)
                .zip(heads)
                .map(|(partition, h)| PartitionHead {
                    partition,
                    events: h.records,
                    head: hex::encode(h.link),
                })
                .collect(),
        }
    }

    /// Heads recorded earlier: the JSON `audit` or `verify` printed (the heads are under
    /// `chain`), or the heads alone. The root must match the heads, so a hand-edited file is
    /// refused rather than trusted.
    pub fn parse(text: &str) -> Result<Self, VerifyError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| VerifyError::Recorded(e.to_string()))?;
        let heads = value.get("chain").cloned().unwrap_or(value);
        let heads: ChainHeads = serde_json::from_value(heads)
            .map_err(|e| VerifyError::Recorded(format!("no chain heads in it ({e})")))?;
        let parsed = heads.links()?;
        if hex::encode(chain::root(&parsed)) != heads.root {
            return Err(VerifyError::Recorded(
                "its root does not match its heads".into(),
            ));
        }
        Ok(heads)
    }

    fn links(&self) -> Result<Vec<Head>, VerifyError> {
        let mut heads = Vec::with_capacity(self.partitions.len());
        for (expected, p) in (0u32..).zip(&self.partitions) {
            if p.partition != expected {
                return Err(VerifyError::Recorded(format!(
                    "partition {expected} missing or out of order"
                )));
            }
            let mut link: Link = [0; 32];
            hex::decode_to_slice(&p.head, &mut link)
                .map_err(|e| VerifyError::Recorded(format!("head of partition {expected}: {e}")))?;
            heads.push(Head {
                records: p.events,
                link,
            });
        }
        Ok(heads)
    }
}

/// Recomputes every partition's chain up to its end at the start, in parallel; checks each
/// against `recorded` where given. `progress` hears after every slice read.
pub async fn verify<L: EventLog>(
    log: Arc<L>,
    recorded: Option<&ChainHeads>,
    mut progress: impl FnMut(Progress),
) -> Result<ChainHeads, VerifyError> {
    let count = log.partition_count();
    let recorded = match recorded {
        Some(r) if r.partitions.len() != count as usize => {
            return Err(VerifyError::PartitionCount {
                recorded: r.partitions.len(),
                now: count,
            });
        }
        Some(r) => r.links()?.into_iter().map(Some).collect(),
        None => vec![None; count as usize],
    };
    let mut ends = Vec::with_capacity(count as usize);
    for partition in 0..count {
        let end = log
            .end_offset(partition)
            .await
            .map_err(|source| VerifyError::Log { partition, source })?;
        ends.push(end);
    }
    let total = ends.iter().sum();
    let (read_tx, mut read_rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for ((partition, end), recorded) in (0..).zip(ends).zip(recorded) {
        let (log, read_tx) = (Arc::clone(&log), read_tx.clone());
        tasks.push(tokio::spawn(walk(log, partition, end, recorded, read_tx)));
    }
    drop(read_tx);
    let mut applied = 0;
    while let Some(n) = read_rx.recv().await {
        applied += n;
        progress(Progress { applied, total });
    }
    let mut heads = Vec::with_capacity(tasks.len());
    for task in tasks {
        heads.push(
            task.await
                .map_err(|e| VerifyError::Panicked(e.to_string()))??,
        );
    }
    Ok(ChainHeads::of(&heads))
}

/// One partition's chain up to `end`, checked against its recorded head on the way.
async fn walk<L: EventLog>(
    log: Arc<L>,
    partition: u32,
    end: u64,
    recorded: Option<Head>,
    read: mpsc::UnboundedSender<u64>,
) -> Result<Head, VerifyError> {
    if let Some(r) = recorded
        && r.records > end
    {
        return Err(VerifyError::Shorter {
            partition,
            recorded: r.records,
            now: end,
        });
    }
    let mut chain = Chain::new(partition);
    let check = |chain: &Chain| match recorded {
        Some(r) if r.records == chain.head().records && r.link != chain.head().link => {
            Err(VerifyError::Diverged {
                partition,
                events: r.records,
            })
        }
        _ => Ok(()),
    };
    check(&chain)?;
    while chain.head().records < end {
        let from = chain.head().records;
        let records = read_held(log.as_ref(), partition, from, end)
            .await
            .map_err(|source| VerifyError::Log { partition, source })?;
        for record in &records {
            chain.push(&record.key, &record.payload);
            check(&chain)?;
        }
        // The receiver only goes when the verification has failed anyway.
        let _ = read.send(records.len() as u64);
    }
    Ok(chain.head())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::log::memory::MemoryLog;
    use crate::log::model::NewRecord;

    async fn log_with(records: &[(u32, u8)]) -> Arc<MemoryLog> {
        let log = Arc::new(MemoryLog::new(2, ManualClock::new(1)).expect("log"));
        for &(partition, byte) in records {
            let record = NewRecord {
                key: [byte; 32],
                payload: vec![byte; 3],
            };
            log.append(partition, vec![record]).await.expect("appends");
        }
        log
    }

    #[tokio::test]
    async fn heads_are_the_chains_of_what_was_appended() {
        let log = log_with(&[(0, 1), (1, 2), (0, 3)]).await;
        let heads = verify(log, None, |_| {}).await.expect("verifies");
        let mut p0 = Chain::new(0);
        p0.push(&[1; 32], &[1; 3]);
        p0.push(&[3; 32], &[3; 3]);
        let mut p1 = Chain::new(1);
        p1.push(&[2; 32], &[2; 3]);
        assert_eq!(heads, ChainHeads::of(&[p0.head(), p1.head()]));
        assert_eq!(heads.partitions[0].events, 2);
    }

    #[tokio::test]
    async fn a_log_that_grew_still_holds_what_was_recorded() {
        let before = verify(log_with(&[(0, 1)]).await, None, |_| {})
            .await
            .expect("verifies");
        let grown = log_with(&[(0, 1), (0, 2), (1, 3)]).await;
        let recorded = ChainHeads::parse(&serde_json::json!({ "chain": before }).to_string())
            .expect("parses what audit prints");
        let now = verify(grown, Some(&recorded), |_| {}).await.expect("holds");
        assert_ne!(now.root, before.root);
    }

    #[tokio::test]
    async fn a_changed_shortened_or_foreign_history_is_named() {
        let recorded = verify(log_with(&[(0, 1), (0, 2)]).await, None, |_| {})
            .await
            .expect("verifies");
        let changed = log_with(&[(0, 1), (0, 9), (0, 2)]).await;
        assert!(matches!(
            verify(changed, Some(&recorded), |_| {}).await,
            Err(VerifyError::Diverged {
                partition: 0,
                events: 2
            })
        ));
        let shorter = log_with(&[(0, 1)]).await;
        assert!(matches!(
            verify(shorter, Some(&recorded), |_| {}).await,
            Err(VerifyError::Shorter {
                partition: 0,
                recorded: 2,
                now: 1
            })
        ));
        let one = ChainHeads::of(&[Chain::new(0).head()]);
        assert!(matches!(
            verify(log_with(&[]).await, Some(&one), |_| {}).await,
            Err(VerifyError::PartitionCount {
                recorded: 1,
                now: 2
            })
        ));
    }

    #[test]
    fn recorded_heads_that_do_not_add_up_are_refused() {
        let heads = ChainHeads::of(&[Chain::new(0).head(), Chain::new(1).head()]);
        let mut edited = heads.clone();
        edited.partitions[1].events = 5;
        let mut unordered = heads.clone();
        unordered.partitions.swap(0, 1);
        for (what, text) in [
            ("edited", serde_json::to_string(&edited).expect("json")),
            (
                "unordered",
                serde_json::to_string(&unordered).expect("json"),
            ),
            ("not json", "{".into()),
            ("no heads", r#"{"events": 3}"#.into()),
        ] {
            assert!(
                matches!(ChainHeads::parse(&text), Err(VerifyError::Recorded(_))),
                "{what}"
            );
        }
        let text = serde_json::to_string(&heads).expect("json");
        assert_eq!(ChainHeads::parse(&text).expect("parses"), heads);
    }
}
