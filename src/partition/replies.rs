//! The reply path of one node: callers wait for the arbiter's decision on the event they appended.
//!
//! A caller registers before appending and puts the returned [`ReplyTo`] into the event; the
//! arbiter that applies the event delivers the decision here. Only the partition's owner appends
//! (other nodes ask it through the partition service), so the caller and the arbiter are on one
//! node. The node id is random per process, so events of an earlier incarnation that are
//! re-applied after a restart — or applied by another node that took the partition over —
//! reach nobody.

use super::Answer;
use super::fold::Applied;
use super::follower::Observer;
use crate::core::event::ReplyTo;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

/// Shards of the pending map, so concurrent callers rarely share a lock.
const SHARDS: usize = 32;

/// Pending callers of this node, by request number.
pub struct Replies {
    node: u64,
    next: AtomicU64,
    shards: [Mutex<HashMap<u64, oneshot::Sender<Answer>>>; SHARDS],
}

impl Replies {
    /// A reply path for a node with a random incarnation id.
    pub fn new() -> Self {
        Self::with_node(uuid::Uuid::new_v4().as_u64_pair().0)
    }

    /// A reply path with a given node id.
    pub fn with_node(node: u64) -> Self {
        Self {
            node,
            next: AtomicU64::new(0),
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
        }
    }

    /// This node's incarnation id.
    pub fn node(&self) -> u64 {
        self.node
    }

    fn shard(&self, request: u64) -> &Mutex<HashMap<u64, oneshot::Sender<Answer>>> {
        &self.shards[request as usize % SHARDS]
    }

    /// Registers a caller; put the returned address into the event it appends.
    pub fn register(&self) -> (ReplyTo, oneshot::Receiver<Answer>) {
        let request = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(self.shard(request)).insert(request, tx);
        (
            ReplyTo {
                node: self.node,
                request,
            },
            rx,
        )
    }

    /// Forgets a caller that gave up (append failed or it timed out).
    pub fn cancel(&self, to: ReplyTo) {
        if to.node == self.node {
            lock(self.shard(to.request)).remove(&to.request);
        }
    }

    /// Delivers a decision to a caller of this node; answers for other nodes or earlier
    /// incarnations are ignored.
    pub fn deliver(&self, to: ReplyTo, answer: Answer) {
        if to.node != self.node {
            return;
        }
        let waiter = lock(self.shard(to.request)).remove(&to.request);
        if let Some(tx) = waiter {
            // The caller may have given up in the meantime; then nobody needs the answer.
            let _ = tx.send(answer);
        }
    }

    /// How many callers are waiting (for tests and metrics).
    pub fn pending(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }
}

/// The arbiter's observer: each decision goes to its waiting caller, once committed. Answers
/// for another node or an earlier incarnation reach nobody: their callers timed out with a
/// retriable answer and ask again.
impl Observer for Replies {
    fn wants_records(&self) -> bool {
        true
    }

    fn observe(&self, _partition: u32, batch: &[Applied]) {
        for applied in batch {
            if let Some(to) = applied.reply_to {
                self.deliver(
                    to,
                    Answer {
                        decision: applied.decision.clone(),
                        record: applied.record.clone(),
                    },
                );
            }
        }
    }
}

impl Default for Replies {
    fn default() -> Self {
        Self::new()
    }
}

/// Locks a shard. A panic while holding it leaves a plain map behind, which stays usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::Decision;

    fn answer() -> Answer {
        Answer {
            decision: Decision::Execute,
            record: None,
        }
    }

    #[tokio::test]
    async fn a_registered_caller_gets_its_answer_and_nobody_elses() {
        let replies = Replies::with_node(7);
        let (a, rx_a) = replies.register();
        let (b, rx_b) = replies.register();
        assert_ne!(a, b);
        replies.deliver(b, answer());
        assert_eq!(rx_b.await.expect("answered"), answer());
        replies.cancel(a);
        drop(rx_a);
        assert_eq!(replies.pending(), 0);
    }

    #[tokio::test]
    async fn answers_for_another_node_or_incarnation_are_ignored() {
        let replies = Replies::with_node(7);
        let (a, mut rx) = replies.register();
        replies.deliver(
            ReplyTo {
                node: 8,
                request: a.request,
            },
            answer(),
        );
        assert!(rx.try_recv().is_err());
        assert_eq!(replies.pending(), 1);
    }
}
