//! A members topic in memory (`test-support` feature), shared by the nodes of one process:
//! every message kept in order, each subscriber reading from where it joined. Subscribers are
//! woken in the order they began to wait (`Notify`; tokio's `watch` wakes in a random order,
//! and a simulation must depend on its seed alone).

use super::{MembersError, MembersFeed, MembersTopic};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The topic.
#[derive(Clone, Default)]
pub struct MemoryMembers {
    messages: Arc<Mutex<Vec<Vec<u8>>>>,
    /// Woken at every message.
    published: Arc<Notify>,
}

impl MemoryMembers {
    /// An empty topic.
    pub fn new() -> Self {
        Self::default()
    }
}

impl MembersTopic for MemoryMembers {
    fn publish(&self, bytes: Vec<u8>) {
        self.messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(bytes);
        self.published.notify_waiters();
    }

    /// Publishing delivers at once: nothing to wait for.
    fn flush(&self, _timeout: Duration) {}

    fn subscribe(&self) -> crate::BoxFuture<'_, Result<Box<dyn MembersFeed>, MembersError>> {
        let next = self
            .messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        let feed = MemoryFeed {
            topic: self.clone(),
            next,
        };
        Box::pin(async move { Ok(Box::new(feed) as Box<dyn MembersFeed>) })
    }
}

struct MemoryFeed {
    topic: MemoryMembers,
    next: usize,
}

impl MembersFeed for MemoryFeed {
    fn next(&mut self) -> crate::BoxFuture<'_, Vec<u8>> {
        Box::pin(async move {
            loop {
                // Registered before the messages are read: one published in between still
                // wakes it.
                let published = self.topic.published.notified();
                tokio::pin!(published);
                published.as_mut().enable();
                let message = {
                    let messages = self
                        .topic
                        .messages
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    messages.get(self.next).cloned()
                };
                if let Some(message) = message {
                    self.next += 1;
                    return message;
                }
                published.await;
            }
        })
    }
}
