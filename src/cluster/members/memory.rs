//! A members topic in memory (`test-support` feature), shared by the nodes of one process:
//! every message kept in order, each subscriber reading from where it joined.

use super::{MembersError, MembersFeed, MembersTopic};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The topic.
#[derive(Clone)]
pub struct MemoryMembers {
    messages: Arc<Mutex<Vec<Vec<u8>>>>,
    /// How many messages there are: subscribers wait for it to move.
    published: watch::Sender<usize>,
}

impl Default for MemoryMembers {
    fn default() -> Self {
        Self {
            messages: Arc::default(),
            published: watch::Sender::new(0),
        }
    }
}

impl MemoryMembers {
    /// An empty topic.
    pub fn new() -> Self {
        Self::default()
    }
}

impl MembersTopic for MemoryMembers {
    fn publish(&self, bytes: Vec<u8>) {
        let mut messages = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        messages.push(bytes);
        self.published.send_replace(messages.len());
    }

    /// Publishing delivers at once: nothing to wait for.
    fn flush(&self, _timeout: Duration) {}

    fn subscribe(&self) -> crate::BoxFuture<'_, Result<Box<dyn MembersFeed>, MembersError>> {
        let next = *self.published.borrow();
        let feed = MemoryFeed {
            topic: self.clone(),
            published: self.published.subscribe(),
            next,
        };
        Box::pin(async move { Ok(Box::new(feed) as Box<dyn MembersFeed>) })
    }
}

struct MemoryFeed {
    topic: MemoryMembers,
    published: watch::Receiver<usize>,
    next: usize,
}

impl MembersFeed for MemoryFeed {
    fn next(&mut self) -> crate::BoxFuture<'_, Vec<u8>> {
        Box::pin(async move {
            let next = self.next;
            // The sender lives in the feed's own handle of the topic: the wait cannot fail.
            let _ = self.published.wait_for(|n| *n > next).await;
            self.next += 1;
            let messages = self
                .topic
                .messages
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            messages[next].clone()
        })
    }
}
