use super::*;

const TOKEN: &str = "agent-a-intake-token-0001";
const PRINCIPAL: &str = "agent-a";
const PARTITIONS: u32 = 8;
const MAX: usize = 4096;

fn key_of(principal: &str) -> Option<IntakeKey> {
    (principal == PRINCIPAL).then(|| IntakeKey::of_token(TOKEN))
}

fn value(key: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "v": 1, "id": "intent-1", "reply_to": "fleet-7/worker-3",
        "tool": "payments.charge", "key": key, "holder": "worker-3",
        "request": {"amount": "10.50", "currency": "EUR", "customer": "c-7"}
    }))
    .expect("JSON")
}

/// A record as a client signs it: keyed and partitioned by its scope.
struct Signed {
    key: Vec<u8>,
    value: Vec<u8>,
    partition: u32,
    signature: String,
}

fn signed(client_key: &str, value: Vec<u8>) -> Signed {
    let scope = ScopedHash::of(
        PRINCIPAL,
        "payments.charge",
        &ClientKey::parse(client_key).expect("key"),
    );
    let signature = intent_signature(&IntakeKey::of_token(TOKEN), PRINCIPAL, &scope.0, &value);
    Signed {
        key: scope.0.to_vec(),
        partition: partition_for(&scope.0, PARTITIONS),
        value,
        signature: hex::encode(signature),
    }
}

fn read(s: &Signed, principal: Option<&str>) -> Result<(String, Intent), Refused> {
    read_intent(
        IntentRecord {
            partition: s.partition,
            key: &s.key,
            value: &s.value,
            principal: principal.map(str::as_bytes),
            signature: Some(s.signature.as_bytes()),
        },
        key_of,
        PARTITIONS,
        MAX,
    )
}

fn refusal(r: Result<(String, Intent), Refused>) -> (Refusal, Option<(String, String)>) {
    let refused = r.expect_err("refused");
    (refused.refusal, refused.reply)
}

fn address() -> Option<(String, String)> {
    Some(("intent-1".into(), "fleet-7/worker-3".into()))
}

#[test]
fn a_signed_intent_routed_by_its_scope_is_read() {
    let s = signed("order-42-charge", value("order-42-charge"));
    let (principal, intent) = read(&s, Some(PRINCIPAL)).expect("read");
    assert_eq!(principal, PRINCIPAL);
    assert_eq!(
        (
            intent.id.as_str(),
            intent.reply_to.as_str(),
            intent.key.as_str()
        ),
        ("intent-1", "fleet-7/worker-3", "order-42-charge")
    );
    assert_eq!(intent.request["amount"], "10.50");
}

#[test]
fn an_unsigned_forged_or_unknown_principals_record_is_unauthenticated() {
    let s = signed("order-42-charge", value("order-42-charge"));
    let (r, reply) = refusal(read(&s, None));
    assert_eq!((r.code(), reply), ("unauthenticated", address()));
    assert_eq!(
        refusal(read(&s, Some("agent-b"))).0,
        Refusal::Unauthenticated("no such principal")
    );
    // One byte of the value changed after signing.
    let mut forged = signed("order-42-charge", value("order-42-charge"));
    let at = forged.value.len() - 3;
    forged.value[at] ^= 1;
    assert_eq!(
        refusal(read(&forged, Some(PRINCIPAL))).0,
        Refusal::Unauthenticated("the signature does not verify")
    );
    // Signed as another principal's record: the principal is part of what is signed.
    let mut other = signed("order-42-charge", value("order-42-charge"));
    other.signature = hex::encode(intent_signature(
        &IntakeKey::of_token(TOKEN),
        "agent-b",
        &other.key,
        &other.value,
    ));
    assert_eq!(
        refusal(read(&other, Some(PRINCIPAL))).0.code(),
        "unauthenticated"
    );
    let mut garbage = signed("order-42-charge", value("order-42-charge"));
    garbage.signature = "not hex".into();
    assert_eq!(
        refusal(read(&garbage, Some(PRINCIPAL))).0.code(),
        "unauthenticated"
    );
}

#[test]
fn a_record_keyed_or_partitioned_otherwise_than_its_scope_is_misrouted() {
    // Signed with the key of another operation: the signature holds, the routing does not.
    let mut s = signed("order-43-charge", value("order-42-charge"));
    assert_eq!(refusal(read(&s, Some(PRINCIPAL))).0, Refusal::Misrouted);
    s = signed("order-42-charge", value("order-42-charge"));
    s.partition = (s.partition + 1) % PARTITIONS;
    assert_eq!(refusal(read(&s, Some(PRINCIPAL))).0, Refusal::Misrouted);
}

#[test]
fn oversized_malformed_and_misshapen_values_are_refused_by_code() {
    let big = signed("k", vec![b' '; MAX + 1]);
    assert_eq!(
        refusal(read(&big, Some(PRINCIPAL))),
        (Refusal::TooLarge { max: MAX }, None)
    );
    // An oversized intent that names its address is answered there, once its signature holds;
    // unsigned, it is unauthenticated first (the ledger signs no answer to a forged record).
    let mut padded: serde_json::Value = serde_json::from_slice(&value("k")).expect("JSON");
    padded["request"]["memo"] = serde_json::json!("x".repeat(MAX));
    let mut big = signed("k", serde_json::to_vec(&padded).expect("JSON"));
    assert_eq!(
        refusal(read(&big, Some(PRINCIPAL))),
        (Refusal::TooLarge { max: MAX }, address())
    );
    big.signature = "00".repeat(32);
    assert_eq!(
        refusal(read(&big, Some(PRINCIPAL))).0.code(),
        "unauthenticated"
    );
    let not_json = signed("k", b"{not json".to_vec());
    assert_eq!(
        refusal(read(&not_json, Some(PRINCIPAL))).0.code(),
        "malformed_json"
    );
    let shapes = [
        (
            serde_json::json!({"v": 1, "id": "i", "reply_to": "r"}),
            "the field `tool` is missing",
        ),
        (
            serde_json::json!({"v": 1, "id": "i", "reply_to": "r", "tool": "t", "key": "k", "holder": "h", "extra": 1}),
            "the field `extra` is not part of an intent",
        ),
        (
            serde_json::json!({"v": 2, "id": "i", "reply_to": "r", "tool": "t", "key": "k", "holder": "h"}),
            "`v` is 2",
        ),
        (
            serde_json::json!({"v": 1, "id": "i", "reply_to": "r\n", "tool": "t", "key": "k", "holder": "h"}),
            "reply_to",
        ),
    ];
    for (shape, says) in shapes {
        let s = signed("k", serde_json::to_vec(&shape).expect("JSON"));
        let (r, _) = refusal(read(&s, Some(PRINCIPAL)));
        assert_eq!(r.code(), "invalid_body", "{shape}");
        assert!(r.to_string().contains(says), "{shape}: {r}");
    }
    let bad_key = signed("k", value("not a key\n"));
    assert_eq!(
        refusal(read(&bad_key, Some(PRINCIPAL))).0,
        Refusal::InvalidKey
    );
}

#[test]
fn a_reply_address_lands_in_one_partition_and_decisions_are_signed_per_principal() {
    let p = reply_partition("fleet-7/worker-3", 12);
    assert!(p < 12);
    assert_eq!(
        p,
        reply_partition("fleet-7/worker-3", 12),
        "the same every time"
    );
    let spread: std::collections::BTreeSet<u32> = (0..200)
        .map(|i| reply_partition(&format!("worker-{i}"), 12))
        .collect();
    assert_eq!(spread.len(), 12, "addresses spread over every partition");
    let key = IntakeKey::of_token(TOKEN);
    let other = IntakeKey::of_token("another-token-of-length");
    let signed = decision_signature(&key, "fleet-7/worker-3", b"{}");
    assert_ne!(
        signed,
        decision_signature(&other, "fleet-7/worker-3", b"{}")
    );
    assert_ne!(signed, decision_signature(&key, "fleet-7/worker-4", b"{}"));
    assert_ne!(signed, decision_signature(&key, "fleet-7/worker-3", b"{ }"));
    assert_eq!(
        format!("{key:?}"),
        "IntakeKey(..)",
        "a key is never printed"
    );
}

#[test]
fn the_refusal_codes_are_pinned() {
    let pinned = [
        (Refusal::Unauthenticated("x"), "unauthenticated"),
        (Refusal::TooLarge { max: 1 }, "body_too_large"),
        (Refusal::MalformedJson, "malformed_json"),
        (Refusal::InvalidBody("x".into()), "invalid_body"),
        (Refusal::Misrouted, "misrouted"),
        (Refusal::InvalidKey, "invalid_key"),
    ];
    for (refusal, code) in pinned {
        assert_eq!(refusal.code(), code);
    }
}

/// The frozen fixture: what a client of any language must compute for one intent and its
/// decision (the Python client's tests check the same file).
#[derive(serde::Deserialize, serde::Serialize)]
struct Fixture {
    token: String,
    principal: String,
    tool: String,
    key: String,
    value: String,
    intents_partitions: u32,
    record_key_hex: String,
    partition: u32,
    signature_hex: String,
    reply_to: String,
    decisions_partitions: u32,
    reply_partition: u32,
    decision_value: String,
    decision_signature_hex: String,
}

const FIXTURE: &str = include_str!("../../schemas/fixtures/intake-v1.json");

fn computed(f: &Fixture) -> Fixture {
    let key = IntakeKey::of_token(&f.token);
    let scope = ScopedHash::of(
        &f.principal,
        &f.tool,
        &ClientKey::parse(&f.key).expect("key"),
    );
    Fixture {
        token: f.token.clone(),
        principal: f.principal.clone(),
        tool: f.tool.clone(),
        key: f.key.clone(),
        value: f.value.clone(),
        intents_partitions: f.intents_partitions,
        record_key_hex: hex::encode(scope.0),
        partition: partition_for(&scope.0, f.intents_partitions),
        signature_hex: hex::encode(intent_signature(
            &key,
            &f.principal,
            &scope.0,
            f.value.as_bytes(),
        )),
        reply_to: f.reply_to.clone(),
        decisions_partitions: f.decisions_partitions,
        reply_partition: reply_partition(&f.reply_to, f.decisions_partitions),
        decision_value: f.decision_value.clone(),
        decision_signature_hex: hex::encode(decision_signature(
            &key,
            &f.reply_to,
            f.decision_value.as_bytes(),
        )),
    }
}

#[test]
fn the_frozen_fixture_is_what_this_build_computes_and_reads() {
    let f: Fixture = serde_json::from_str(FIXTURE).expect("fixture");
    let now = computed(&f);
    assert_eq!(
        serde_json::to_value(&now).expect("JSON"),
        serde_json::to_value(&f).expect("JSON")
    );
    let record_key = hex::decode(&f.record_key_hex).expect("hex");
    let key_of = |p: &str| (p == f.principal).then(|| IntakeKey::of_token(&f.token));
    let (principal, intent) = read_intent(
        IntentRecord {
            partition: f.partition,
            key: &record_key,
            value: f.value.as_bytes(),
            principal: Some(f.principal.as_bytes()),
            signature: Some(f.signature_hex.as_bytes()),
        },
        key_of,
        f.intents_partitions,
        MAX,
    )
    .expect("the fixture's record is read");
    assert_eq!(
        (principal.as_str(), intent.reply_to.as_str()),
        (f.principal.as_str(), f.reply_to.as_str())
    );
}

#[test]
#[ignore = "writes the intake fixture once"]
fn write_intake_fixture() {
    let path = "schemas/fixtures/intake-v1.json";
    let frozen = std::fs::read_to_string(path).unwrap_or_default();
    assert!(frozen.trim().is_empty(), "{path} is frozen");
    let seed = Fixture {
        token: TOKEN.into(),
        principal: PRINCIPAL.into(),
        tool: "payments.charge".into(),
        key: "order-42-charge".into(),
        value: String::from_utf8(value("order-42-charge")).expect("UTF-8"),
        intents_partitions: 8,
        record_key_hex: String::new(),
        partition: 0,
        signature_hex: String::new(),
        reply_to: "fleet-7/worker-3".into(),
        decisions_partitions: 12,
        reply_partition: 0,
        decision_value: r#"{"v":1,"id":"intent-1","intent":{"partition":5,"offset":17},"status":201,"decision":"execute"}"#.into(),
        decision_signature_hex: String::new(),
    };
    let text = serde_json::to_string_pretty(&computed(&seed)).expect("JSON");
    std::fs::write(path, text + "\n").expect("writes");
}
