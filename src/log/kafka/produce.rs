//! Producing a call's records to the events topic: all enqueued first, in order (the
//! idempotent producer keeps that order), then each delivery awaited. A full producer queue is
//! waited out — the oldest of the call's own records delivered first — rather than failing the
//! call part way; any other error fails it, and then any prefix of it may be durable, as the
//! log's contract allows (the caller treats each record as maybe appended).

use super::backend;
use super::event_log::KafkaLog;
use crate::log::model::{Appended, LogError, NewRecord, Offset};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureRecord;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The broker's append time from a produce response, if it is one. Brokers report it only for
/// LogAppendTime topics; librdkafka's mock cluster reports a fixed placeholder for every topic,
/// so a time more than a day from this producer's is not taken (readers of a CreateTime topic
/// see the producer's time).
fn broker_time(reported_ms: i64, ours_ms: u64) -> u64 {
    const DAY_MS: u64 = 24 * 60 * 60 * 1000;
    match u64::try_from(reported_ms) {
        Ok(t) if t.abs_diff(ours_ms) <= DAY_MS => t,
        _ => ours_ms,
    }
}

impl KafkaLog {
    /// Produces `records` to `partition`: where each landed, in order.
    pub(super) async fn produce(
        &self,
        partition: u32,
        records: &[NewRecord],
    ) -> Result<Vec<Appended>, LogError> {
        let started = std::time::Instant::now();
        let mut pending = std::collections::VecDeque::with_capacity(records.len());
        let mut appended = Vec::with_capacity(records.len());
        for record in records {
            let mut ts = self.stamp(partition);
            let mut message = FutureRecord::to(&self.options.topic)
                .partition(partition as i32)
                .key(&record.key[..])
                .payload(&record.payload[..])
                .timestamp(i64::try_from(ts).unwrap_or(i64::MAX));
            let delivery = loop {
                match self.producer.send_result(message) {
                    Ok(delivery) => break delivery,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        let Some((oldest, oldest_ts)) = pending.pop_front() else {
                            // Full of other calls' records: back off while they drain, for
                            // as long as one append may take.
                            if started.elapsed() > self.options.timeout {
                                return Err(backend(
                                    "enqueueing an event",
                                    "the producer queue stayed full",
                                ));
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            // Stamped again: others may have stamped later times meanwhile.
                            ts = self.stamp(partition);
                            message = back.timestamp(i64::try_from(ts).unwrap_or(i64::MAX));
                            continue;
                        };
                        appended.push(self.delivered(oldest, oldest_ts).await?);
                        ts = self.stamp(partition);
                        message = back.timestamp(i64::try_from(ts).unwrap_or(i64::MAX));
                    }
                    Err((e, _)) => return Err(backend("enqueueing an event", e)),
                }
            };
            pending.push_back((delivery, ts));
        }
        for (delivery, ts) in pending {
            appended.push(self.delivered(delivery, ts).await?);
        }
        Ok(appended)
    }

    /// Waits for one enqueued record's delivery: where it landed.
    async fn delivered(
        &self,
        delivery: rdkafka::producer::DeliveryFuture,
        ts: u64,
    ) -> Result<Appended, LogError> {
        let delivered = delivery
            .await
            .map_err(|_| LogError::Closed)?
            .map_err(|(e, _)| backend("appending an event", e))?;
        // On a LogAppendTime topic (what `ensure_topics` creates) the broker's time is what
        // readers see; otherwise the record keeps the time this producer gave it.
        let timestamp_ms = match delivered.timestamp {
            rdkafka::Timestamp::LogAppendTime(t) if t >= 0 => broker_time(t, ts),
            _ => {
                if !self.warned_create_time.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        topic = %self.options.topic,
                        "the events topic is not stamped by the broker (LogAppendTime): event \
                         times come from each node's clock, so leases are only as right as \
                         the nodes' clocks agree"
                    );
                }
                ts
            }
        };
        Ok(Appended {
            offset: Offset::try_from(delivered.offset)
                .map_err(|_| backend("appending an event", "negative offset"))?,
            timestamp_ms,
        })
    }
}
