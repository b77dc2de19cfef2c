//! `opledger ops` through the real binary, against a real node: the whole reconciliation flow
//! (queue, list, show, takeover, resolve) with its confirmations and exit codes; the token read
//! from the environment or a file and never printed. Also `completions` and `--version`.

mod common;

use common::{Server, TOKEN_A, TOKEN_B};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `opledger ops ARGS` against `server` with `token` in OPLEDGER_TOKEN and `stdin` as
/// its input.
fn ops(server: &Server, token: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .arg("ops")
        .args(args)
        .env("OPLEDGER_URL", &server.base)
        .env("OPLEDGER_TOKEN", token)
        .env_remove("OPLEDGER_TOKEN_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs opledger ops");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writes stdin");
    let out = child.wait_with_output().expect("waits");
    for said in [&out.stdout, &out.stderr] {
        let said = String::from_utf8_lossy(said);
        assert!(
            !said.contains(token) || token.is_empty(),
            "the token was printed: {said}"
        );
    }
    out
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("an exit code")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_settles_a_case_from_the_terminal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let id = server.waiting_for_a_person("ops-msg-1").await;

    // The queue, as a table with guidance and as the API's JSON.
    let out = ops(&server, TOKEN_A, &["queue"], "");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(shown.starts_with("REQUESTED"), "{shown}");
    assert!(
        shown.contains(&id)
            && shown.contains("take it over")
            && shown.contains("1 shown of 1 waiting"),
        "{shown}"
    );
    let out = ops(&server, TOKEN_A, &["queue", "--json"], "");
    let queue: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(queue["count"], 1, "{queue}");

    let out = ops(
        &server,
        TOKEN_A,
        &["list", "--state", "manual", "--json"],
        "",
    );
    let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(listed["items"][0]["operation_id"], id.as_str(), "{listed}");
    let out = ops(&server, TOKEN_A, &["list", "--tool", "messages.send"], "");
    assert!(stdout(&out).contains("manual") && stdout(&out).contains(&id));
    let out = ops(&server, TOKEN_A, &["list", "--state", "nonsense"], "");
    assert_eq!(code(&out), 3, "bad input is a refusal: {}", stderr(&out));
    assert!(stderr(&out).contains("invalid_query"), "{}", stderr(&out));

    // One operation with its timeline: the move to a person and its reason.
    let out = ops(&server, TOKEN_A, &["show", &id], "");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown = stdout(&out);
    for part in [
        "state manual",
        "timeline:",
        "unknown_reported",
        "moved_to_manual",
        "holder_reported",
        "w1",
    ] {
        assert!(shown.contains(part), "{part} missing: {shown}");
    }
    // An agent without the auditor role sees its own operation, not the timeline.
    let (_, own) = server
        .claim(TOKEN_B, "ops-b-1", common::charge("wb", "3", "c"))
        .await;
    let own = own["operation_id"].as_str().expect("id");
    let out = ops(&server, TOKEN_B, &["show", own], "");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("timeline: needs the auditor, operator or viewer role"));

    // Not confirmed: nothing happens, and the history is as it was.
    let (_, before) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    let out = ops(&server, TOKEN_A, &["takeover", &id], "");
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Take over operation")
            && stderr(&out).contains("only you can resolve it"),
        "the prompt restates what will happen: {}",
        stderr(&out)
    );
    let out = ops(&server, TOKEN_A, &["takeover", &id], "no\n");
    assert_eq!(code(&out), 6);
    let (_, after) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    assert_eq!(after, before, "nothing was appended");

    let out = ops(
        &server,
        TOKEN_A,
        &[
            "takeover",
            &id,
            "--reason",
            "the customer says no message came",
        ],
        "yes\n",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("manual"), "{}", stdout(&out));

    let out = ops(&server, TOKEN_A, &["resolve", &id, "completed"], "");
    assert_eq!(
        code(&out),
        2,
        "completed needs its result: {}",
        stderr(&out)
    );
    let out = ops(&server, TOKEN_A, &["resolve", &id, "not-executed"], "");
    assert_eq!(code(&out), 6);
    assert!(
        stderr(&out).contains("its key is released"),
        "{}",
        stderr(&out)
    );
    let out = ops(
        &server,
        TOKEN_A,
        &[
            "resolve",
            &id,
            "not-executed",
            "--reason",
            "not in the provider's log",
            "--yes",
        ],
        "",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("released"), "{}", stdout(&out));
    // The reasons are in the history, each on its action.
    let (_, history) = server
        .get(TOKEN_A, &format!("/v1/operations/{id}/history"))
        .await;
    let reason_of = |kind: &str| {
        history["events"]
            .as_array()
            .expect("events")
            .iter()
            .find(|e| e["type"] == kind)
            .map(|e| {
                let action = &e["event"];
                match &action["reason"] {
                    Value::Null => action["by"]["reason"].clone(),
                    reason => reason.clone(),
                }
            })
    };
    assert_eq!(
        reason_of("taken_over"),
        Some(json!("the customer says no message came")),
        "{history}"
    );
    assert_eq!(
        reason_of("resolved"),
        Some(json!("not in the provider's log")),
        "{history}"
    );
    let out = ops(&server, TOKEN_A, &["show", &id], "");
    assert!(
        stdout(&out).contains("reason: the customer says no message came")
            && stdout(&out).contains("reason: not in the provider's log"),
        "{}",
        stdout(&out)
    );
    let (_, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
    assert_eq!(now["state"], "released", "{now}");
    // The same resolution again is a repeat (nothing new); another one is rejected.
    let out = ops(
        &server,
        TOKEN_A,
        &["resolve", &id, "not-executed", "--yes"],
        "",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = ops(
        &server,
        TOKEN_A,
        &[
            "resolve",
            &id,
            "completed",
            "--resource-ref",
            "msg-9",
            "--status",
            "200",
            "--yes",
        ],
        "",
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(stderr(&out).contains("rejected ("), "{}", stderr(&out));

    // Exit codes scripts rely on.
    let nobody = "00000000-0000-4000-8000-000000000000";
    assert_eq!(code(&ops(&server, TOKEN_A, &["show", nobody], "")), 4);
    let out = ops(&server, TOKEN_B, &["queue"], "");
    assert_eq!(code(&out), 3, "an agent has no queue: {}", stderr(&out));
    let out = ops(&server, "token-nobody-has-0000", &["queue"], "");
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains("OPLEDGER_TOKEN"), "{}", stderr(&out));
    assert_eq!(code(&ops(&server, "", &["queue"], "")), 2, "no token");

    // The token from a file (its first line), the tools with their contracts.
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN_B}\n")).expect("writes");
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["ops", "tools", "--url", &server.base, "--token-file"])
        .arg(&token_file)
        .env_remove("OPLEDGER_TOKEN")
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(shown.starts_with("TOOL"), "{shown}");
    assert!(shown.contains("payments.charge") && shown.contains("recovery_asks"));
    assert!(
        !shown.contains("messages.send"),
        "not granted to agent-b: {shown}"
    );
    server.stop();
}

/// What is not the node's API is never taken for an answer: a wrong `--url` path, a proxy's
/// page, an id with URL syntax in it; a closed pipe is no crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_that_are_not_the_apis_are_refused_by_exit_code() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let with_url = |url: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_opledger"))
            .arg("ops")
            .args(args)
            .args(["--url", url])
            .env("OPLEDGER_TOKEN", TOKEN_A)
            .output()
            .expect("runs")
    };
    let out = with_url(&format!("{}/prefix", server.base), &["queue"]);
    assert_eq!(code(&out), 1, "a route the node lacks: {}", stderr(&out));
    assert!(stderr(&out).contains("--url"), "{}", stderr(&out));
    let out = with_url("127.0.0.1:7070", &["queue"]);
    assert_eq!(code(&out), 2, "no scheme: {}", stderr(&out));
    // An id is one path segment: `?` and `/` in it name no other resource.
    let (_, c) = server
        .claim(TOKEN_A, "ops-seg-1", common::charge("w", "1", "c"))
        .await;
    let id = c["operation_id"].as_str().expect("id");
    let out = ops(&server, TOKEN_A, &["show", &format!("{id}?x")], "");
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    let out = ops(&server, TOKEN_A, &["show", &format!("{id}/history")], "");
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    // The principal is shown, and not-executed takes no result.
    let out = ops(&server, TOKEN_A, &["show", id], "");
    assert!(
        stdout(&out).contains("principal agent-a"),
        "{}",
        stdout(&out)
    );
    let out = ops(
        &server,
        TOKEN_A,
        &["resolve", id, "not-executed", "--status", "200"],
        "",
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // A reader that goes away early.
    let mut child = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["completions", "zsh"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    assert_eq!(child.wait().expect("waits").code(), Some(0));
    server.stop();

    // A proxy answering 502 with a page of its own, then nothing there at all.
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let url = format!("http://{}", proxy.local_addr().expect("address"));
    let page = std::thread::spawn(move || {
        use std::io::Read;
        let (mut conn, _) = proxy.accept().expect("accepts");
        let mut buf = [0u8; 4096];
        let _ = conn.read(&mut buf);
        let body = "<html>Bad Gateway</html>";
        let _ = write!(
            conn,
            "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let out = with_url(&url, &["queue"]);
    page.join().expect("the proxy answered");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("HTTP 502"), "{}", stderr(&out));

    // A node that is not there.
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["ops", "queue", "--url", "http://127.0.0.1:9"])
        .env("OPLEDGER_TOKEN", TOKEN_A)
        .output()
        .expect("runs");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
}

#[test]
fn completions_load_in_bash_and_the_version_names_the_commit() {
    let script = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["completions", "bash"])
        .output()
        .expect("runs");
    assert!(script.status.success());
    let mut bash = Command::new("bash")
        .args(["-c", "source /dev/stdin && complete -p opledger"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs bash");
    bash.stdin
        .take()
        .expect("stdin")
        .write_all(&script.stdout)
        .expect("writes");
    let registered = bash.wait_with_output().expect("waits");
    assert!(registered.status.success(), "bash did not load the script");
    assert!(String::from_utf8_lossy(&registered.stdout).contains("opledger"));
    let text = String::from_utf8_lossy(&script.stdout);
    assert!(
        text.contains("ops") && text.contains("takeover"),
        "subcommands complete"
    );
    for shell in ["zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert!(out.status.success() && out.stdout.len() > 100, "{shell}");
    }

    let version = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .arg("--version")
        .output()
        .expect("runs");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs git");
    // Outside a checkout (a tarball) the build says so.
    let head = match String::from_utf8_lossy(&head.stdout).trim() {
        "" => "unknown".to_owned(),
        commit => commit.to_owned(),
    };
    assert_eq!(
        version,
        format!("opledger {} (commit {head})", env!("CARGO_PKG_VERSION"))
    );
}
