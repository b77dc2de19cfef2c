//! Fingerprints safe by default, through the real binary: a field the contract does not name
//! counts (as `other`) unless the tool ignores it, amounts must be decimals, required fields
//! must be there — and operations accepted under the earlier rules keep replaying.

mod common;

use common::{Server, TOKEN_A, config_text};
use opledger::config::Config;
use serde_json::{Value, json};

const PAYOUT: &str = r#"
[[tool]]
name = "payouts.send"
class = "keyed"
required = ["amount", "account.iban"]
ignore = ["trace_id"]
[tool.fingerprint]
amount = ["amount"]
recipient = ["account.iban"]
other = ["currency"]
"#;

fn payout(request: Value) -> Value {
    json!({"tool": "payouts.send", "holder": "w", "request": request})
}

fn base() -> Value {
    json!({"amount": "10.00", "currency": "EUR", "account": {"iban": "DE00 1"}, "trace_id": "t-1"})
}

fn with(mut request: Value, field: &str, value: Value) -> Value {
    request[field] = value;
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unnamed_fields_count_amounts_are_decimals_and_required_fields_are_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), PAYOUT, &[]);

    // A misspelled field is part of the request: another value under the same key conflicts.
    let typo = with(base(), "ammount", json!("99"));
    let (status, first) = server
        .claim(TOKEN_A, "payout-1", payout(typo.clone()))
        .await;
    assert_eq!(status, 201, "{first}");
    let (status, other) = server
        .claim(
            TOKEN_A,
            "payout-1",
            payout(with(typo.clone(), "ammount", json!("100"))),
        )
        .await;
    assert_eq!(status, 422, "{other}");
    assert_eq!(other["decision"], "conflict", "{other}");
    assert_eq!(other["conflict"], json!(["other"]), "{other}");
    // So does a sibling of a listed nested field, and a field that was not there at first.
    let mut sibling = typo.clone();
    sibling["account"]["bic"] = json!("X");
    let (status, answer) = server.claim(TOKEN_A, "payout-1", payout(sibling)).await;
    assert_eq!(
        (status, &answer["conflict"]),
        (422, &json!(["other"])),
        "{answer}"
    );
    // The ignored trace id changes nothing; another amount spelling neither.
    let same = with(with(typo, "trace_id", json!("t-2")), "amount", json!(10));
    let (status, answer) = server.claim(TOKEN_A, "payout-1", payout(same)).await;
    // (The same holder re-claiming its live operation carries on with it.)
    assert_eq!(
        (status, answer["decision"].as_str()),
        (201, Some("execute")),
        "{answer}"
    );
    assert_eq!(answer["operation_id"], first["operation_id"], "{answer}");
    let before = common::operation_events(&server.cli_json("audit"));

    // Refused before anything is appended, naming the field (never its value).
    let cases = [
        (
            "amount as a word",
            with(base(), "amount", json!("ten")),
            "amount",
        ),
        ("amount null", with(base(), "amount", json!(null)), "amount"),
        (
            "amount an object",
            with(base(), "amount", json!({"value": 10})),
            "amount",
        ),
        (
            "amount missing",
            {
                let mut r = base();
                r.as_object_mut().expect("object").remove("amount");
                r
            },
            "amount",
        ),
        (
            "iban missing",
            with(base(), "account", json!({"bic": "X"})),
            "account.iban",
        ),
        (
            "iban null",
            with(base(), "account", json!({"iban": null})),
            "account.iban",
        ),
    ];
    for (what, request, field) in cases {
        let (status, answer) = server.claim(TOKEN_A, "payout-2", payout(request)).await;
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(
            answer["error"]["code"], "invalid_request",
            "{what}: {answer}"
        );
        let message = answer["error"]["message"].as_str().expect("message");
        assert!(message.contains(&format!("`{field}`")), "{what}: {message}");
        assert!(
            !message.contains("ten") && !message.contains("DE00"),
            "{what}: {message}"
        );
    }
    assert_eq!(
        common::operation_events(&server.cli_json("audit")),
        before,
        "nothing appended for refused claims"
    );
    // The same key with a good request is a fresh operation: the refusals left no trace.
    let (status, answer) = server.claim(TOKEN_A, "payout-2", payout(base())).await;
    assert_eq!(
        (status, answer["decision"].as_str()),
        (201, Some("execute")),
        "{answer}"
    );
    server.stop();
}

/// A config that both lists and ignores a field, ignores a required one or names a malformed
/// path is refused with the tool named.
#[test]
fn contradictory_ignore_and_required_lists_fail_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (extra, says) in [
        (
            PAYOUT.replace(r#"ignore = ["trace_id"]"#, r#"ignore = ["amount"]"#),
            "listed more than once",
        ),
        (
            PAYOUT
                .replace(r#"ignore = ["trace_id"]"#, r#"ignore = ["memo"]"#)
                .replace(
                    r#"required = ["amount", "account.iban"]"#,
                    r#"required = ["amount", "memo"]"#,
                ),
            "both required and ignored",
        ),
        (
            PAYOUT.replace(r#"ignore = ["trace_id"]"#, r#"ignore = ["a..b"]"#),
            "empty segment",
        ),
    ] {
        let text = config_text(&dir.path().join("data"), &extra);
        let e = Config::parse(&text).expect_err("refused").to_string();
        assert!(e.contains("payouts.send") && e.contains(says), "{e}");
    }
}

/// An operation accepted under the earlier rules (only named fields counted, nothing checked)
/// keeps replaying an unchanged retry — even one the current rules would refuse or count
/// differently — while a new key gets the current rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_fingerprinted_under_the_earlier_rules_keep_replaying() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = config_text(&dir.path().join("data"), PAYOUT);
    let config_path = dir.path().join("opledger.toml");
    std::fs::write(&config_path, &text).expect("writes the config");
    let config = Config::parse(&text).expect("valid config");
    let old_request =
        json!({"amount": "ten", "currency": "EUR", "account": {"iban": "DE00 1"}, "note": "a"});
    let old =
        common::earlier::write_completed(&config, "payouts.send", "payout-old", &old_request).await;
    // One the current rules accept too: compared under them first it is no match (another
    // rules version), so the ledger asks again under the stored rules.
    let valid =
        json!({"amount": "10", "currency": "EUR", "account": {"iban": "DE00 1"}, "note": "a"});
    let valid_old =
        common::earlier::write_completed(&config, "payouts.send", "payout-valid", &valid).await;

    let server = Server::start_existing(dir.path(), &config_path);
    let (status, replay) = server
        .claim(TOKEN_A, "payout-old", payout(old_request.clone()))
        .await;
    assert_eq!(
        (status, replay["decision"].as_str()),
        (200, Some("replay")),
        "{replay}"
    );
    assert_eq!(replay["operation_id"], old.to_string(), "{replay}");
    // Under the earlier rules the unnamed `note` did not count, so it still does not.
    let renoted = with(old_request.clone(), "note", json!("b"));
    let (status, replay) = server.claim(TOKEN_A, "payout-old", payout(renoted)).await;
    assert_eq!(
        (status, replay["decision"].as_str()),
        (200, Some("replay")),
        "{replay}"
    );
    // A named field still conflicts.
    let other_iban = with(old_request.clone(), "account", json!({"iban": "DE00 2"}));
    let (status, conflict) = server
        .claim(TOKEN_A, "payout-old", payout(other_iban))
        .await;
    assert_eq!(status, 422, "{conflict}");
    assert_eq!(conflict["conflict"], json!(["recipient"]), "{conflict}");
    for (request, decision, status) in [
        (valid.clone(), "replay", 200),
        (with(valid.clone(), "note", json!("b")), "replay", 200),
        (with(valid.clone(), "amount", json!("11")), "conflict", 422),
    ] {
        let (got, answer) = server.claim(TOKEN_A, "payout-valid", payout(request)).await;
        assert_eq!(
            (got, answer["decision"].as_str()),
            (status, Some(decision)),
            "{answer}"
        );
        assert_eq!(answer["operation_id"], valid_old.to_string(), "{answer}");
    }
    // A new key is fingerprinted under the current rules.
    let (status, refused) = server
        .claim(TOKEN_A, "payout-new", payout(old_request))
        .await;
    assert_eq!(status, 400, "{refused}");
    server.stop();
}
