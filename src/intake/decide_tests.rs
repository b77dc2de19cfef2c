//! Deciding a poll: refusals answered (signed only for a verified record), nothing appended for
//! any of them; an operation's intents of one poll in successive rounds; the decision record's
//! layout and signature.

use super::*;
use crate::config::Config;
use crate::core::key::ClientKey;
use crate::ledger::unarbitrated::unarbitrated;
use crate::log::memory::MemoryLog;
use crate::log::model::{EventLog, partition_for};

const TOKEN: &str = "token-agent-a-0001";
const CONFIG: &str = r#"
[[principal]]
id = "agent-a"
token = "token-agent-a-0001"
roles = ["agent"]

[[principal]]
id = "ops"
token = "token-operator-0002"
roles = ["operator"]

[[tool]]
name = "pay.charge"
class = "keyed"
[tool.fingerprint]
amount = ["amount"]
"#;
const PARTITIONS: u32 = 2;

fn intent(id: &str, key: &str) -> serde_json::Value {
    json!({"v": 1, "id": id, "reply_to": "fleet/w-1", "tool": "pay.charge", "key": key,
           "holder": "w-1", "request": {"amount": 5}})
}

/// A record of `value` for `key`, as `principal` signs it under `token`'s key.
fn record(
    offset: u64,
    principal: &str,
    token: &str,
    key: &str,
    value: &serde_json::Value,
) -> Polled {
    let value = value.to_string().into_bytes();
    let scope = ScopedHash::of(
        principal,
        "pay.charge",
        &ClientKey::parse(key).expect("key"),
    );
    let signature =
        record::intent_signature(&IntakeKey::of_token(token), principal, &scope.0, &value);
    Polled {
        offset,
        key: scope.0.to_vec(),
        value,
        principal: Some(principal.as_bytes().to_vec()),
        signature: Some(hex::encode(signature).into_bytes()),
    }
}

async fn appended(log: &MemoryLog) -> usize {
    let mut n = 0;
    for p in 0..PARTITIONS {
        n += log.read(p, 0, 100).await.expect("reads").len();
    }
    n
}

fn value_of(d: &Decided) -> serde_json::Value {
    serde_json::from_slice(&d.value).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_records_are_answered_and_append_nothing() {
    let config = Config::parse(CONFIG).expect("config");
    let (ledger, log) = unarbitrated(&config, PARTITIONS);
    let principals =
        Principals::new(&crate::api::auth::Principals::new(&config.principals_by_token).all());
    let mut misshapen = intent("misshapen", "k-2");
    misshapen.as_object_mut().expect("object").remove("holder");
    let partition_of =
        |r: &Polled| partition_for(r.key.as_slice().try_into().expect("32"), PARTITIONS);
    let records = [
        record(
            0,
            "agent-a",
            "not-the-token",
            "k-1",
            &intent("forged", "k-1"),
        ),
        record(1, "agent-a", TOKEN, "k-2", &misshapen),
        record(
            2,
            "ops",
            "token-operator-0002",
            "k-3",
            &intent("no-agent", "k-3"),
        ),
        // Not JSON: there is no address to answer.
        Polled {
            value: b"{not json".to_vec(),
            ..record(3, "agent-a", TOKEN, "k-4", &intent("x", "k-4"))
        },
    ];
    let mut answered = Vec::new();
    for r in &records {
        let poll = Poll {
            ledger: &ledger,
            principals: &principals,
            partition: partition_of(r),
            partitions: PARTITIONS,
            value_bytes_max: 4096,
            maybe_decided_below: 0,
        };
        let Outcome::Decided(decided) = decide(&poll, std::slice::from_ref(r)).await else {
            panic!("refusals are decided")
        };
        answered.extend(decided);
    }
    assert_eq!(
        appended(&log).await,
        0,
        "nothing of a refused record is appended"
    );
    let codes: Vec<(String, String, u64, bool)> = answered
        .iter()
        .map(|d| {
            let v = value_of(d);
            (
                v["id"].as_str().unwrap_or("").to_owned(),
                v["error"]["code"].as_str().unwrap_or("").to_owned(),
                v["status"].as_u64().unwrap_or(0),
                d.signature.is_some(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("forged".into(), "unauthenticated".into(), 401, false),
            ("misshapen".into(), "invalid_body".into(), 400, true),
            ("no-agent".into(), "forbidden".into(), 403, true),
        ]
    );
    // Each signed under its own principal's key.
    let ops_key = IntakeKey::of_token("token-operator-0002");
    let agent_key = IntakeKey::of_token(TOKEN);
    for (d, key) in answered[1..].iter().zip([agent_key, ops_key]) {
        let expected = hex::encode(record::decision_signature(&key, "fleet/w-1", &d.value));
        assert_eq!(d.signature.as_deref(), Some(expected.as_str()));
        assert_eq!(d.reply_to, "fleet/w-1");
    }
}

#[test]
fn an_operations_intents_of_one_poll_go_in_successive_rounds_in_log_order() {
    let config = Config::parse(CONFIG).expect("config");
    let principals =
        Principals::new(&crate::api::auth::Principals::new(&config.principals_by_token).all());
    let principal = &principals.0["agent-a"];
    let valid = |index: usize, key: &str| Valid {
        index,
        offset: index as u64,
        principal,
        intent: serde_json::from_value(intent(&format!("i-{index}"), key)).expect("intent"),
        scope: ScopedHash::of(
            "agent-a",
            "pay.charge",
            &ClientKey::parse(key).expect("key"),
        ),
    };
    let rounds = rounds(vec![
        valid(0, "a"),
        valid(1, "b"),
        valid(2, "a"),
        valid(3, "a"),
        valid(4, "c"),
    ]);
    let indexes: Vec<Vec<usize>> = rounds
        .iter()
        .map(|r| r.iter().map(|v| v.index).collect())
        .collect();
    assert_eq!(indexes, [vec![0, 1, 4], vec![2], vec![3]]);
}

#[test]
fn a_decision_names_its_intent_then_carries_the_answer() {
    let config = Config::parse(CONFIG).expect("config");
    let (ledger, _) = unarbitrated(&config, PARTITIONS);
    let principals =
        Principals::new(&crate::api::auth::Principals::new(&config.principals_by_token).all());
    let poll = Poll {
        ledger: &ledger,
        principals: &principals,
        partition: 1,
        partitions: PARTITIONS,
        value_bytes_max: 4096,
        maybe_decided_below: 0,
    };
    let r = record(17, "agent-a", TOKEN, "k-1", &intent("i-1", "k-1"));
    let key = IntakeKey::of_token(TOKEN);
    let answer = json!({"status": 201, "decision": "execute"});
    let d = decided(&poll, &r, "i-1", "fleet/w-1", answer, Some(&key));
    assert_eq!(
        String::from_utf8(d.value.clone()).expect("UTF-8"),
        // Keys sorted (serde_json's map): the signature covers these exact bytes.
        r#"{"decision":"execute","id":"i-1","intent":{"offset":17,"partition":1},"status":201,"v":1}"#
    );
    let signature = hex::encode(record::decision_signature(&key, "fleet/w-1", &d.value));
    assert_eq!(d.signature, Some(signature));
    let unsigned = decided(&poll, &r, "i-1", "fleet/w-1", json!({}), None);
    assert_eq!(unsigned.signature, None);
}
