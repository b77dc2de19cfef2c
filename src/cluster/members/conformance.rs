//! What every members topic does (`test-support` feature): a subscriber reads what is
//! published after it subscribed — nothing before — in order, and every subscriber reads the
//! same. Run against the in-memory topic by the unit tests and against Kafka on librdkafka's
//! mock cluster (`tests/log_conformance_kafka.rs`).

use super::MembersTopic;
use std::time::Duration;

/// Longest wait for one message to arrive: a failure bound, never a pause.
const ARRIVAL: Duration = Duration::from_secs(20);

/// Runs the suite on `topic`, a fresh, empty one.
pub async fn run(topic: &dyn MembersTopic) {
    topic.publish(b"before".to_vec());
    topic.flush(ARRIVAL);
    let mut first = topic.subscribe().await.expect("subscribes");
    let mut second = topic.subscribe().await.expect("subscribes");
    for message in [&b"one"[..], b"two", b"three"] {
        topic.publish(message.to_vec());
    }
    topic.flush(ARRIVAL);
    for feed in [&mut first, &mut second] {
        let mut read = Vec::new();
        for _ in 0..3 {
            let next = tokio::time::timeout(ARRIVAL, feed.next()).await;
            read.push(next.expect("a message published after subscribing arrives"));
        }
        assert_eq!(
            read,
            [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()],
            "what was published before subscribing is not read; the rest is, in order"
        );
    }
    // A late subscriber starts at the end as it is now.
    let mut late = topic.subscribe().await.expect("subscribes");
    topic.publish(b"four".to_vec());
    topic.flush(ARRIVAL);
    let next = tokio::time::timeout(ARRIVAL, late.next()).await;
    assert_eq!(next.expect("arrives"), b"four".to_vec());
}
