//! What an earlier build left in a log, written the way it wrote it.
#![allow(dead_code)]

use opledger::config::Config;
use opledger::core::event::{
    self, BusinessResult, Claim, Completion, Envelope, EventBody, OwnerChange, Transition,
};
use opledger::core::fingerprint::fingerprint_v1;
use opledger::core::key::{ClientKey, OperationId, ScopedHash};
use opledger::log::embedded::EmbeddedLog;
use opledger::log::model::{EventLog, NewRecord, partition_for};

/// Appends, as an earlier build would have, a claim of `key` for `tool` by agent-a and its
/// completion (`OPS-41`), both as event schema version 1 with `request` fingerprinted under
/// rules version 1; returns the operation id.
pub async fn write_completed(
    config: &Config,
    tool: &str,
    key: &str,
    request: &serde_json::Value,
) -> OperationId {
    let log = EmbeddedLog::open(
        &config.data_dir.join("log"),
        opledger::node::embedded_options(config).expect("options"),
    )
    .expect("log opens");
    let contract = &config.tools[tool];
    let scope = ScopedHash::of("agent-a", tool, &ClientKey::parse(key).expect("key"));
    let id = OperationId::for_scope(&scope);
    let claim = EventBody::Claimed(Claim {
        principal: "agent-a".into(),
        tool: tool.into(),
        holder: "w1".into(),
        fingerprint: fingerprint_v1(&contract.fingerprint, request, None).expect("fingerprint"),
        parent: None,
        terms: contract.terms(),
        intake: None,
    });
    let completed = EventBody::Completed(Completion {
        by: Transition {
            holder: "w1".into(),
            expected_version: Some(1),
        },
        result: BusinessResult {
            resource_ref: "OPS-41".into(),
            status: 201,
            headers: Default::default(),
            body: None,
        },
    });
    let partition = partition_for(&scope.0, log.partition_count());
    // The earlier build took the partition over first (its ownership change names no rules).
    let own = ScopedHash::of_partition(partition);
    let owner = EventBody::OwnerChanged(OwnerChange {
        owner: "earlier-build".into(),
        rules: 1,
    });
    for (scope, id, body) in [
        (own, OperationId::for_scope(&own), owner),
        (scope, id, claim),
        (scope, id, completed),
    ] {
        let envelope = Envelope {
            scope,
            operation_id: id,
            reply_to: None,
            body,
        };
        let payload = event::encode_as(&envelope, 1).expect("encodes");
        assert_eq!(&payload[..2], &1u16.to_le_bytes());
        log.append(
            partition,
            vec![NewRecord {
                key: scope.0,
                payload,
            }],
        )
        .await
        .expect("appends");
    }
    log.close().expect("closes");
    id
}
