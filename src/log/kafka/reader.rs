//! One partition's reader and how a consumed message becomes a log record.

use super::backend;
use crate::log::model::{LogError, LogRecord, Offset};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset as KafkaOffset, TopicPartitionList};

/// One partition's reader. `next` is the offset the next record it hands out will have, when
/// known (`None` after an interrupted read: seek first); `peeked` is that record, if
/// [`EventLog::wait_beyond`](crate::log::model::EventLog::wait_beyond) already received it.
pub(super) struct Reader {
    pub(super) consumer: StreamConsumer,
    pub(super) next: Option<Offset>,
    pub(super) peeked: Option<LogRecord>,
}

impl Reader {
    /// Positions the consumer at `from` unless it already stands there; returns the record
    /// already received at `from`, if any.
    pub(super) fn position(
        &mut self,
        topic: &str,
        partition: u32,
        from: Offset,
    ) -> Result<Option<LogRecord>, LogError> {
        let resume = self.next.take();
        let peeked = self.peeked.take();
        if resume == Some(from) {
            return Ok(peeked.filter(|r| r.offset == from));
        }
        let mut tpl = TopicPartitionList::new();
        let offset = i64::try_from(from).map_err(|_| backend("seeking", "offset too large"))?;
        tpl.add_partition_offset(topic, partition as i32, KafkaOffset::Offset(offset))
            .map_err(|e| backend("seeking", e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| backend(format!("assigning partition {partition}"), e))?;
        Ok(None)
    }
}

/// A consumed message as a log record, checked to be the one expected.
pub(super) fn to_record(
    topic: &str,
    partition: u32,
    expected: Offset,
    message: &rdkafka::message::BorrowedMessage<'_>,
) -> Result<LogRecord, LogError> {
    let offset =
        Offset::try_from(message.offset()).map_err(|_| backend("reading", "negative offset"))?;
    if offset != expected {
        // Offsets are dense within what this backend writes; anything else is not ours.
        return Err(LogError::Corrupt {
            partition,
            segment: std::path::PathBuf::from(topic),
            position: offset,
            reason: format!("expected offset {expected}, got {offset}"),
        });
    }
    let key: [u8; 32] = message
        .key()
        .and_then(|k| k.try_into().ok())
        .ok_or_else(|| backend("reading", "a message without a 32-byte key"))?;
    Ok(LogRecord {
        partition,
        offset,
        timestamp_ms: message
            .timestamp()
            .to_millis()
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0),
        key,
        payload: message.payload().unwrap_or_default().into(),
    })
}
