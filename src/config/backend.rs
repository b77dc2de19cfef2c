//! The `[log]` backend: the embedded log, or Kafka with its topics, the members' timeout and the
//! secret nodes
//! share.

use super::raw::RawLog;
use super::{ConfigError, Setting};
use serde::Deserialize;

/// Which backend holds the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Segment files in the data directory (the default).
    Embedded,
    /// A Kafka cluster.
    Kafka(KafkaSettings),
}

/// Where and how a node finds its log on Kafka (`[log]` with `backend = "kafka"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSettings {
    /// Bootstrap servers, `host:port,…`.
    pub brokers: String,
    /// The events topic (default `opledger.events`).
    pub topic: String,
    /// The topic nodes announce themselves on (default `opledger.members`).
    pub members_topic: String,
    /// Replication factor of topics a node creates when they are missing (default 3).
    pub replication_factor: u16,
    /// How other nodes reach this node (`None`: `http://` + the bound address).
    pub advertise: Option<String>,
    /// The secret every node of the cluster shares to authenticate peer messages.
    pub peer_secret: Option<PeerSecret>,
    /// How long a node that stopped announcing itself keeps its partitions (default 3 s; nodes
    /// announce every second). A dead node's partitions are served again about this long after
    /// it died; a node that stops cleanly hands them on at once.
    pub member_timeout: std::time::Duration,
    /// Extra librdkafka producer settings (tuning only; unsafe ones are refused at start).
    pub librdkafka: Vec<(String, String)>,
    /// The Kafka-native intake's topics (`None`: no intake; agents claim over HTTP only).
    /// Boxed: most configs have none, and the settings stay small.
    pub intake: Option<Box<IntakeTopics>>,
}

/// The topics of the Kafka-native intake: agents produce intents to one and read their
/// decisions from the other (`[log] intents_topic`, `decisions_topic`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntakeTopics {
    /// Where agents produce intents; as many partitions as the events topic.
    pub intents: String,
    /// Where the ledger produces one decision per intent record (default `opledger.decisions`).
    pub decisions: String,
}

impl KafkaSettings {
    /// Settings for `brokers` with every default.
    pub fn new(brokers: &str) -> Self {
        Self {
            brokers: brokers.to_owned(),
            topic: KAFKA_TOPIC_DEFAULT.to_owned(),
            members_topic: KAFKA_MEMBERS_TOPIC_DEFAULT.to_owned(),
            replication_factor: 3,
            advertise: None,
            peer_secret: PeerSecret::from_env(),
            member_timeout: MEMBER_TIMEOUT_DEFAULT,
            librdkafka: Vec::new(),
            intake: None,
        }
    }
}

/// The member timeout when the config does not say: three announcement periods.
pub const MEMBER_TIMEOUT_DEFAULT: std::time::Duration = std::time::Duration::from_secs(3);

/// The secret nodes of one cluster share. Never printed, not even in a debug dump.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct PeerSecret(String);

impl PeerSecret {
    /// A secret.
    pub fn new(secret: &str) -> Self {
        Self(secret.to_owned())
    }

    /// The secret from [`PEER_SECRET_ENV`], if set.
    pub fn from_env() -> Option<Self> {
        std::env::var(PEER_SECRET_ENV)
            .ok()
            .filter(|s| !s.is_empty())
            .map(Self)
    }

    /// The secret itself, to key the peer messages' signatures.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PeerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerSecret(<redacted>)")
    }
}

/// Default events topic.
pub const KAFKA_TOPIC_DEFAULT: &str = "opledger.events";
/// Default members topic.
pub const KAFKA_MEMBERS_TOPIC_DEFAULT: &str = "opledger.members";
/// Default decisions topic of the intake.
pub const KAFKA_DECISIONS_TOPIC_DEFAULT: &str = "opledger.decisions";
/// The environment variable that gives the peer secret when the config does not.
pub const PEER_SECRET_ENV: &str = "OPLEDGER_PEER_SECRET";

/// The backend `[log]` names, with its settings checked.
pub(super) fn validate_backend(log: &RawLog) -> Result<Backend, ConfigError> {
    let invalid = |key: &'static str, m: String| ConfigError::invalid(Setting::Key("log", key), m);
    let backend = match (log.backend.as_str(), log.brokers.clone()) {
        ("embedded", _) if log.intents_topic.is_some() || log.decisions_topic.is_some() => {
            return Err(invalid(
                "intents_topic",
                "[log] intents_topic and decisions_topic name Kafka topics: the intake runs with backend = \"kafka\" (on the embedded log, claim over HTTP, in batches for throughput)".to_owned(),
            ));
        }
        ("embedded", _) => Backend::Embedded,
        ("kafka", Some(brokers)) if !brokers.trim().is_empty() => {
            let name = |value: &Option<String>, default: &str, what: &'static str| {
                let v = value.clone().unwrap_or_else(|| default.to_owned());
                let ok = !v.is_empty()
                    && v.len() <= 249
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if ok {
                    Ok(v)
                } else {
                    Err(invalid(
                        what,
                        format!(
                            "[log] {what} = {v:?}: use 1-249 characters of a-z, A-Z, 0-9, '.', '_', '-'"
                        ),
                    ))
                }
            };
            let topic = name(&log.topic, KAFKA_TOPIC_DEFAULT, "topic")?;
            let members_topic = name(
                &log.members_topic,
                KAFKA_MEMBERS_TOPIC_DEFAULT,
                "members_topic",
            )?;
            if topic == members_topic {
                return Err(invalid(
                    "members_topic",
                    "[log] topic and members_topic must differ".to_owned(),
                ));
            }
            let intake = match (&log.intents_topic, &log.decisions_topic) {
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(invalid(
                        "decisions_topic",
                        "[log] decisions_topic needs intents_topic: the intake runs only when intents_topic names where agents produce intents".to_owned(),
                    ));
                }
                (Some(_), _) => {
                    let intents = name(&log.intents_topic, "", "intents_topic")?;
                    let decisions = name(
                        &log.decisions_topic,
                        KAFKA_DECISIONS_TOPIC_DEFAULT,
                        "decisions_topic",
                    )?;
                    let mut all = [&topic, &members_topic, &intents, &decisions];
                    all.sort();
                    if all.windows(2).any(|w| w[0] == w[1]) {
                        return Err(invalid(
                            "intents_topic",
                            "[log] topic, members_topic, intents_topic and decisions_topic must all differ".to_owned(),
                        ));
                    }
                    Some(Box::new(IntakeTopics { intents, decisions }))
                }
            };
            let peer_secret = log
                .peer_secret
                .clone()
                .filter(|s| !s.0.is_empty())
                .or_else(PeerSecret::from_env);
            if peer_secret.as_ref().is_some_and(|s| s.0.len() < 16) {
                return Err(invalid(
                    "peer_secret",
                    "[log] peer_secret must be at least 16 characters (it authenticates nodes to each other)"
                        .to_owned(),
                ));
            }
            let replication_factor = log.replication_factor.unwrap_or(3);
            if replication_factor == 0 {
                return Err(invalid(
                    "replication_factor",
                    "[log] replication_factor must be at least 1".to_owned(),
                ));
            }
            if let Some(advertise) = &log.advertise
                && !(advertise.starts_with("http://") || advertise.starts_with("https://"))
            {
                return Err(invalid(
                    "advertise",
                    format!(
                        "[log] advertise = {advertise:?} must be an http:// or https:// address"
                    ),
                ));
            }
            let member_timeout = match &log.member_timeout {
                None => MEMBER_TIMEOUT_DEFAULT,
                Some(text) => humantime::parse_duration(text)
                    .ok()
                    .filter(|d| (2..=300).contains(&d.as_secs()))
                    .ok_or_else(|| {
                        invalid("member_timeout", format!(
                            "[log] member_timeout = {text:?}: use a duration from \"2s\" to \"5m\" (nodes announce themselves every second), e.g. \"3s\""
                        ))
                    })?,
            };
            let librdkafka: Vec<(String, String)> = log.librdkafka.clone().into_iter().collect();
            if let Err(e) = crate::log::kafka::check_producer_settings(&librdkafka) {
                return Err(ConfigError::invalid(
                    Setting::Key("log", "librdkafka"),
                    format!("[log.librdkafka] {e}"),
                ));
            }
            Backend::Kafka(KafkaSettings {
                brokers,
                topic,
                members_topic,
                peer_secret,
                replication_factor,
                advertise: log
                    .advertise
                    .as_ref()
                    .map(|a| a.trim_end_matches('/').to_owned()),
                member_timeout,
                librdkafka,
                intake,
            })
        }
        ("kafka", _) => {
            return Err(invalid(
                "backend",
                "[log] backend = \"kafka\" needs brokers = \"host:port,…\"".to_owned(),
            ));
        }
        (other, _) => {
            return Err(invalid(
                "backend",
                format!("[log] backend = {other:?}: expected \"embedded\" or \"kafka\""),
            ));
        }
    };
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::config::tests::err;

    #[test]
    fn kafka_settings_have_defaults_and_unsafe_ones_are_refused() {
        let config = Config::parse("[log]\nbackend = \"kafka\"\nbrokers = \"k1:9092,k2:9092\"")
            .expect("valid");
        let Backend::Kafka(k) = &config.backend else {
            panic!("kafka backend expected")
        };
        assert_eq!(k.brokers, "k1:9092,k2:9092");
        assert_eq!(
            (k.topic.as_str(), k.members_topic.as_str()),
            ("opledger.events", "opledger.members")
        );
        assert_eq!(k.member_timeout, std::time::Duration::from_secs(3));
        assert_eq!((k.replication_factor, k.advertise.as_deref()), (3, None));
        let kafka = "[log]\nbackend = \"kafka\"\nbrokers = \"k:9092\"\n";
        let tuned = Config::parse(&format!(
            "{kafka}advertise = \"http://n1:7070/\"\n[log.librdkafka]\n\"linger.ms\" = \"5\""
        ))
        .expect("valid");
        let Backend::Kafka(k) = &tuned.backend else {
            panic!("kafka backend expected")
        };
        assert_eq!(k.advertise.as_deref(), Some("http://n1:7070"));
        assert_eq!(k.librdkafka, vec![("linger.ms".to_owned(), "5".to_owned())]);
        let e = err(&format!("{kafka}[log.librdkafka]\nacks = \"1\""));
        assert!(e.contains("acks"), "{e}");
        assert!(err(&format!("{kafka}topic = \"bad topic\"")).contains("topic"));
        assert!(err(&format!("{kafka}members_topic = \"opledger.events\"")).contains("differ"));
        assert!(err(&format!("{kafka}advertise = \"n1:7070\"")).contains("advertise"));
        assert!(err(&format!("{kafka}replication_factor = 0")).contains("replication_factor"));
        assert!(err(&format!("{kafka}member_timeout = \"500ms\"")).contains("member_timeout"));
        assert!(err(&format!("{kafka}group = \"opledger\"")).contains("group"));
        assert_eq!(k.intake, None, "no intake unless intents_topic is set");
    }

    #[test]
    fn the_intake_runs_when_its_intents_topic_is_named() {
        let kafka = "[log]\nbackend = \"kafka\"\nbrokers = \"k:9092\"\n";
        let config =
            Config::parse(&format!("{kafka}intents_topic = \"fleet.intents\"")).expect("valid");
        let Backend::Kafka(k) = &config.backend else {
            panic!("kafka backend expected")
        };
        assert_eq!(
            k.intake,
            Some(Box::new(IntakeTopics {
                intents: "fleet.intents".to_owned(),
                decisions: "opledger.decisions".to_owned()
            }))
        );
        let e = err(&format!("{kafka}decisions_topic = \"d\""));
        assert!(e.contains("needs intents_topic"), "{e}");
        let e = err(&format!("{kafka}intents_topic = \"opledger.events\""));
        assert!(e.contains("must all differ"), "{e}");
        let e = err(&format!(
            "{kafka}intents_topic = \"i\"\ndecisions_topic = \"i\""
        ));
        assert!(e.contains("must all differ"), "{e}");
        assert!(err(&format!("{kafka}intents_topic = \"\"")).contains("intents_topic"));
        let e = err("[log]\nintents_topic = \"i\"");
        assert!(e.contains("backend = \"kafka\""), "{e}");
    }
}
