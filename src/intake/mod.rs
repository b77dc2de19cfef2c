//! The Kafka-native intake (see `docs/kafka-intake.md`): agents produce intents to an intents
//! topic, keyed and partitioned by their operation's scope and signed under the principal's
//! intake key, and read their decisions from a decisions topic under their own address.
//!
//! Built so far: the frozen record formats ([`record`]): signing and checking an intent record,
//! reading it as a claim, addressing and signing its decision. The consumer that decides the
//! intents of each partition this node owns comes next.

pub mod record;
