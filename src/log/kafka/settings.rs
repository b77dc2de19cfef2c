//! What `[log.librdkafka]` may say: producer settings that would weaken an acknowledged append
//! are refused, and the connection settings reach every Kafka client of a node.

use rdkafka::ClientConfig;

/// A producer setting that could lose or duplicate an acknowledged event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Kafka producer setting `{setting} = {value}` is refused: {why}")]
pub struct UnsafeSetting {
    /// The setting.
    pub setting: String,
    /// Its value.
    pub value: String,
    /// What it would break.
    pub why: &'static str,
}

/// Refuses producer settings that would weaken what an acknowledged append means: anything
/// but `acks=all` (an acknowledged event could be lost with a leader), turning idempotence off
/// (a retry could duplicate an event), or more than 5 requests in flight (librdkafka cannot
/// keep order with idempotence then). Everything else is tuning and passes.
pub fn check_producer_settings(settings: &[(String, String)]) -> Result<(), UnsafeSetting> {
    for (setting, value) in settings {
        let refuse = |why| {
            Err(UnsafeSetting {
                setting: setting.clone(),
                value: value.clone(),
                why,
            })
        };
        let v = value.trim().to_ascii_lowercase();
        match setting.as_str() {
            "acks" | "request.required.acks" if v != "all" && v != "-1" => {
                return refuse("an acknowledged event could be lost when a leader fails");
            }
            "enable.idempotence" if v != "true" => {
                return refuse("a retried append could write an event twice");
            }
            "max.in.flight.requests.per.connection" | "max.in.flight"
                if v.parse::<u32>().map_or(true, |n| n > 5) =>
            {
                return refuse("idempotent ordering needs at most 5 requests in flight");
            }
            "partitioner" | "partitioner_cb" => {
                return refuse(
                    "partitions come from opledger's partition function, shared by every backend",
                );
            }
            _ => {}
        }
    }
    Ok(())
}

/// How every Kafka client of a node reaches the cluster: the bootstrap servers and the
/// connection settings of `[log.librdkafka]` (`security.*`, `sasl.*`, `ssl.*`, `socket.*`,
/// `client.rack`), so a cluster that needs TLS or SASL is reachable by the producer, the
/// readers, the group member, the replies topic and the admin client alike. The other settings
/// there are producer tuning and reach the events producer only.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// Bootstrap servers, `host:port,…`.
    pub brokers: String,
    /// Connection settings.
    pub settings: Vec<(String, String)>,
}

impl Connection {
    /// The connection part of `librdkafka` settings, for `brokers`.
    pub fn new(brokers: &str, librdkafka: &[(String, String)]) -> Self {
        let connection = |k: &str| {
            ["security.", "sasl.", "ssl.", "socket."]
                .iter()
                .any(|p| k.starts_with(p))
                || k == "client.rack"
        };
        Self {
            brokers: brokers.to_owned(),
            settings: librdkafka
                .iter()
                .filter(|(k, _)| connection(k))
                .cloned()
                .collect(),
        }
    }

    /// A client config with the servers and the connection settings.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in &self.settings {
            c.set(k, v);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn settings_that_could_lose_or_duplicate_an_event_are_refused_by_name() {
        for (setting, value) in [
            ("acks", "1"),
            ("request.required.acks", "0"),
            ("enable.idempotence", "false"),
            ("max.in.flight.requests.per.connection", "6"),
            ("partitioner", "murmur2"),
        ] {
            let err = check_producer_settings(&settings(&[(setting, value)]))
                .expect_err("must be refused");
            assert_eq!((err.setting.as_str(), err.value.as_str()), (setting, value));
            assert!(err.to_string().contains(setting));
        }
    }

    #[test]
    fn connection_settings_reach_every_client_and_tuning_only_the_producer() {
        let librdkafka = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("ssl.ca.location", "/etc/ca.pem"),
            ("client.rack", "eu-1a"),
            ("linger.ms", "5"),
            ("compression.type", "lz4"),
        ]);
        let c = Connection::new("k1:9093", &librdkafka);
        let names: Vec<&str> = c.settings.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "security.protocol",
                "sasl.mechanism",
                "ssl.ca.location",
                "client.rack"
            ]
        );
        let config = c.client_config();
        assert_eq!(config.get("bootstrap.servers"), Some("k1:9093"));
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("linger.ms"), None);
    }

    #[test]
    fn safe_settings_and_tuning_pass() {
        let ok = settings(&[
            ("acks", "all"),
            ("acks", "-1"),
            ("enable.idempotence", "true"),
            ("max.in.flight.requests.per.connection", "5"),
            ("linger.ms", "5"),
            ("compression.type", "lz4"),
        ]);
        assert_eq!(check_producer_settings(&ok), Ok(()));
    }
}
