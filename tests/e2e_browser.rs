//! The operator console in a real browser: Debian's headless Chromium driven by Playwright for
//! Python (`scripts/browser` installs both, and axe-core, on first use), against the real
//! binary. `tests/browser/console.py` does what an operator does — an agent's token refused, the
//! queue, one operation's timeline, a takeover and a resolution through the confirmation dialogs,
//! a bulk takeover by selector after a dry run — keeping a screenshot of every screen under
//! `target/browser-screenshots/` and failing on any serious accessibility violation. This test
//! then checks, through the API, that the ledger changed as the page said, with the reasons typed.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, TOKEN_OPS};
use serde_json::{Value, json};
use std::process::Command;

/// The venv's python, chromium and axe-core, from `scripts/browser`.
fn browser_tools() -> (String, String, String) {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/scripts/browser"))
        .output()
        .expect("runs scripts/browser");
    assert!(
        out.status.success(),
        "scripts/browser failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("paths");
    let mut lines = text.lines().map(str::to_owned);
    let mut next = || lines.next().expect("three paths");
    (next(), next(), next())
}

/// The reason on the event of type `kind` in `history`.
fn reason_of(history: &Value, kind: &str) -> Value {
    let event = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {history}"));
    match &event["event"]["reason"] {
        Value::Null => event["event"]["by"]["reason"].clone(),
        reason => reason.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_settles_a_case_in_the_console() {
    let (python, chromium, axe) = browser_tools();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let resolve = server.waiting_for_a_person("browser-1").await;
    let bulk = server.waiting_for_a_person("browser-2").await;
    let root = env!("CARGO_MANIFEST_DIR");
    let shots = format!("{root}/target/browser-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let out = Command::new(&python)
        .arg(format!("{root}/tests/browser/console.py"))
        .current_dir(format!("{root}/tests/browser"))
        .env("URL", &server.base)
        .env("OPERATOR_TOKEN", TOKEN_OPS)
        .env("AGENT_TOKEN", TOKEN_B)
        .env("RESOLVE_ID", &resolve)
        .env("BULK_ID", &bulk)
        .env("OUT_DIR", &shots)
        .env("AXE_JS", &axe)
        .env("CHROMIUM", &chromium)
        .output()
        .expect("runs the browser test");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the console test failed:\n{said}");
    assert!(said.contains("every step passed"), "{said}");
    let kept = std::fs::read_dir(&shots)
        .expect("screenshots")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "png"))
        })
        .count();
    assert!(kept >= 10, "{kept} screenshots in {shots}");

    // The ledger changed as the page said.
    let (_, first) = server
        .get(TOKEN_A, &format!("/v1/operations/{resolve}"))
        .await;
    assert_eq!(first["state"], "completed", "{first}");
    assert_eq!(first["result"]["resource_ref"], "msg-found-7", "{first}");
    let (_, history) = server
        .get(TOKEN_A, &format!("/v1/operations/{resolve}/history"))
        .await;
    assert_eq!(
        reason_of(&history, "taken_over"),
        "checking the provider's log by hand"
    );
    assert_eq!(
        reason_of(&history, "resolved"),
        "the provider's log shows msg-found-7"
    );
    let (_, second) = server.get(TOKEN_A, &format!("/v1/operations/{bulk}")).await;
    assert_eq!(
        (second["state"].clone(), second["taken_over_by"].clone()),
        (json!("manual"), json!("ops-2")),
        "{second}"
    );
    let (_, history) = server
        .get(TOKEN_A, &format!("/v1/operations/{bulk}/history"))
        .await;
    assert_eq!(
        reason_of(&history, "taken_over"),
        "batch: provider outage of 7 December"
    );
    let logged = server.stderr() + &server.stdout();
    assert!(
        !logged.contains(TOKEN_OPS),
        "the token in the node's output"
    );
    server.stop();
}
