//! `opledger export`: every event of the log, decoded, as JSON Lines, with filters, and nothing
//! secret in it — run as a user would, on the real binary's log.

mod common;

use common::{Server, TOKEN_A, charge};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

fn export(config: &Path, filters: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .arg("export")
        .arg("--config")
        .arg(config)
        .args(filters)
        .output()
        .expect("runs opledger");
    assert!(
        out.status.success(),
        "export {filters:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_streams_every_event_decoded_filtered_and_without_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    const KEY: &str = "order-7f3a-secret-key-text";
    const CUSTOMER: &str = "cus_very_private_customer";
    let (status, claimed) = server
        .claim(TOKEN_A, KEY, charge("w1", "12.50", CUSTOMER))
        .await;
    assert_eq!(status, 201, "{claimed}");
    let id = claimed["operation_id"].as_str().expect("id").to_owned();
    let done = json!({"holder": "w1", "result": {"resource_ref": "ch_1", "status": 201}});
    let (status, _) = server
        .post(TOKEN_A, &format!("/v1/operations/{id}/complete"), done)
        .await;
    assert_eq!(status, 200);
    // The same key with another amount: a conflict, decided and logged.
    let (status, _) = server
        .claim(TOKEN_A, KEY, charge("w2", "99.00", CUSTOMER))
        .await;
    assert_eq!(status, 422, "a conflict");
    let message = json!({"tool": "messages.send", "holder": "w3", "request": {"to": "+15550100", "text": "your code is 424242"}});
    let (status, _) = server.claim(TOKEN_A, "msg-1", message).await;
    assert_eq!(status, 201);
    // Enough events that their export outgrows a pipe's buffer (64 KiB).
    for n in 0..300 {
        let body = json!({"tool": "tickets.create", "holder": "w4", "request": {"project": "OPS", "title": format!("t{n}")}});
        let (status, _) = server.claim(TOKEN_A, &format!("ticket-{n}"), body).await;
        assert_eq!(status, 201);
    }
    let config = server.config.clone();
    server.stop();

    let all = export(&config, &[]);
    let audit = common::cli_json(&config, "audit");
    assert_eq!(
        all.len() as u64,
        audit["events"].as_u64().expect("events"),
        "every event once"
    );
    // Without the log times: a time such as 18:12:12.503 contains the amount's digits.
    let text = all
        .iter()
        .map(|line| {
            let mut line = line.clone();
            line.as_object_mut().expect("an object").remove("at");
            line.to_string()
        })
        .collect::<String>();
    for secret in [
        KEY,
        CUSTOMER,
        "12.50",
        "+15550100",
        "424242",
        common::TOKEN_A,
    ] {
        assert!(!text.contains(secret), "{secret} must never be exported");
    }
    // Nor a fingerprint's per-category hash, against which a guessed value could be checked.
    let hex_runs = text
        .split(|c: char| !c.is_ascii_hexdigit())
        .filter(|run| run.len() >= 64)
        .count();
    assert_eq!(hex_runs, 0, "no SHA-256 in the export");
    let first = &all
        .iter()
        .find(|l| l["operation_id"] == id.as_str())
        .expect("the claim")["event"];
    assert_eq!(
        first["fingerprint"]["categories"],
        json!(["amount", "recipient", "body", "other"]),
        "{first}"
    );
    assert_eq!(
        first["fingerprint"]["summary"].as_str().map(str::len),
        Some(16),
        "{first}"
    );

    // An owner taking a partition over is the partition's event, of no operation.
    let owners = export(&config, &["--type", "owner_changed"]);
    assert!(!owners.is_empty(), "every start records its ownership");
    for line in &owners {
        assert_eq!(line["partition_event"], true, "{line}");
        assert!(line["operation_id"].is_null(), "{line}");
    }
    assert!(
        all.iter()
            .filter(|l| l["type"] != "owner_changed")
            .all(|l| l["partition_event"] == false)
    );

    let completed = export(&config, &["--type", "completed"]);
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert_eq!(completed[0]["operation_id"], id.as_str());
    assert_eq!(completed[0]["tool"], "payments.charge");
    assert_eq!(completed[0]["state"], "completed");
    assert_eq!(completed[0]["decision"], "accepted");
    assert_eq!(completed[0]["event"]["result"]["resource_ref"], "ch_1");

    let conflicts: Vec<Value> =
        export(&config, &["--tool", "payments.charge", "--type", "claimed"]);
    assert_eq!(
        conflicts
            .iter()
            .map(|l| l["decision"].as_str().expect("code"))
            .collect::<Vec<_>>(),
        ["execute", "conflict"]
    );
    let messages = export(
        &config,
        &["--tool", "messages.send", "--state", "processing"],
    );
    assert_eq!(messages[0]["event"]["holder"], "w3");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(export(&config, &["--until", "2000-01-01T00:00:00Z"]).is_empty());
    assert_eq!(
        export(&config, &["--since", "2000-01-01T00:00:00Z"]).len(),
        all.len()
    );

    // A reader that stops early (`| head -1`) is not an error.
    assert!(text.len() > 64 << 10, "the export outgrows a pipe");
    let piped = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} export --config {} | head -1",
            env!("CARGO_BIN_EXE_opledger"),
            config.display()
        ))
        .output()
        .expect("runs sh");
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&piped.stdout).lines().count(), 1);
    // A reader gone before anything is written (what `| head` does to a short export when it
    // exits first): the final flush meets the closed pipe, quietly too.
    let mut child = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["export", "--type", "completed", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs opledger");
    drop(child.stdout.take());
    let gone = child.wait_with_output().expect("waits");
    assert!(
        gone.status.success(),
        "{}",
        String::from_utf8_lossy(&gone.stderr)
    );
}
