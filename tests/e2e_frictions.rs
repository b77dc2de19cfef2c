//! What a new user trips over, each fixed (and kept fixed) through the real binary: a wrong
//! method gets the API's JSON error, a missing role is named as the config spells it, times
//! have a fixed number of fractional digits, and `export` takes a date and refuses a tool
//! nobody declared instead of exporting nothing; `demo` keeps its ledger when asked and refuses
//! one that is there.

mod common;

use common::{Server, TOKEN_A, TOKEN_B, charge};
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_roles_and_times_read_as_the_rest_of_the_api() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());

    // A method the claims path does not take is a 405 in the API's own shape.
    let path = format!("{}/v1/operations", server.base);
    let (s, body) = common::send(server.raw().delete(&path).bearer_auth(TOKEN_A)).await;
    assert_eq!(s, 405, "{body}");
    assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");

    let (s, claimed) = server
        .claim(TOKEN_A, "friction-1", charge("w", "5", "c"))
        .await;
    assert_eq!(s, 201, "{claimed}");
    // Every time has exactly three fractional digits.
    let times = [
        &claimed["created_at"],
        &claimed["updated_at"],
        &claimed["lease"]["expires_at"],
    ];
    for t in times {
        let t = t.as_str().unwrap_or_else(|| panic!("a time in {claimed}"));
        let fraction = t
            .strip_suffix('Z')
            .and_then(|t| t.rsplit_once('.'))
            .map(|(_, f)| f);
        assert_eq!(fraction.map(str::len), Some(3), "{t}");
    }

    // A misspelt tool is answered with the nearest declared name and the declared ones.
    let typo = serde_json::json!({"tool": "payments.charg", "holder": "w", "request": {}});
    let (s, refused) = server.claim(TOKEN_A, "friction-typo", typo).await;
    assert_eq!(
        (s, refused["error"]["code"].as_str()),
        (400, Some("unknown_tool")),
        "{refused}"
    );
    let message = refused["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("did you mean `payments.charge`?"),
        "{message}"
    );

    // An agent-only principal asking for an operator's action is told the role as the config
    // spells it.
    let id = claimed["operation_id"].as_str().expect("id");
    let (s, refused) = server
        .post(
            TOKEN_B,
            &format!("/v1/operations/{id}/takeover"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(s, 403, "{refused}");
    let message = refused["error"]["message"].as_str().expect("message");
    assert!(message.contains("`operator` role"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_takes_a_date_refuses_a_tool_nobody_declared_and_filters_by_either_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let (s, claimed) = server
        .claim(TOKEN_A, "export-1", charge("w", "5", "c"))
        .await;
    assert_eq!(s, 201, "{claimed}");
    let (s, done) = server
        .claim(TOKEN_A, "export-2", charge("w", "6", "c"))
        .await;
    assert_eq!(s, 201, "{done}");
    let done_id = done["operation_id"].as_str().expect("id").to_owned();
    let (s, b) = server.complete(TOKEN_A, &done_id, "w", "ch-2").await;
    assert_eq!(s, 200, "{b}");
    let config = server.config.clone();
    server.stop();
    let export = |filters: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_opledger"))
            .arg("export")
            .arg("--config")
            .arg(&config)
            .args(filters)
            .output()
            .expect("runs opledger")
    };
    let dated = export(&["--since", "2020-01-01", "--tool", "payments.charge"]);
    assert!(
        dated.status.success(),
        "{}",
        String::from_utf8_lossy(&dated.stderr)
    );
    assert!(String::from_utf8_lossy(&dated.stdout).contains("\"claimed\""));
    let later = export(&["--since", "2999-01-01"]);
    assert!(later.status.success());
    assert!(later.stdout.is_empty(), "nothing after 2999");
    let typo = export(&["--tool", "payments.charg"]);
    let said = String::from_utf8_lossy(&typo.stderr);
    assert!(!typo.status.success(), "{said}");
    assert!(
        said.contains("not declared") && said.contains("payments.charge"),
        "{said}"
    );
    assert!(typo.stdout.is_empty(), "nothing exported");

    // The state after each event, or the operation's state now.
    let lines = |out: std::process::Output| -> Vec<serde_json::Value> {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect()
    };
    let after = lines(export(&["--state", "completed"]));
    let types: Vec<&str> = after
        .iter()
        .map(|l| l["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["completed"], "{after:?}");
    let now = lines(export(&["--state-now", "completed"]));
    let types: Vec<&str> = now
        .iter()
        .map(|l| l["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["claimed", "completed"], "{now:?}");
    assert!(
        now.iter().all(|l| l["operation_id"] == done_id.as_str()),
        "{now:?}"
    );
}

/// A log-reading command given neither `--config` nor `--data-dir` says where it looked and how
/// to look elsewhere.
#[test]
fn a_reading_command_without_a_config_says_where_it_looked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for command in ["audit", "verify", "export", "rebuild"] {
        let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .arg(command)
            .current_dir(tmp.path())
            .env_remove("OPLEDGER_CONFIG")
            // Said whatever the log filter.
            .env("OPLEDGER_LOG", "error")
            .output()
            .expect("runs opledger");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command}: no ledger there: {said}");
        assert!(
            said.contains("opledger-data")
                && said.contains("--data-dir DIR")
                && said.contains("--config FILE"),
            "{command}: {said}"
        );
    }
}

/// `--help` lists each command on one short line; a command's own help has the long text and
/// an example.
#[test]
fn the_command_list_is_one_short_line_each_and_each_command_has_an_example() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(args)
            .output()
            .expect("runs opledger");
        assert!(out.status.success());
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let top = help(&["--help"]);
    let commands = [
        "serve", "audit", "verify", "export", "history", "rebuild", "demo", "check", "init",
    ];
    for command in commands {
        let line = top
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{command} ")))
            .unwrap_or_else(|| panic!("{command} listed: {top}"));
        assert!(line.len() <= 100, "one short line: {line}");
        let own = help(&[command, "--help"]);
        assert!(own.contains("Example: `opledger "), "{command}: {own}");
        assert!(
            own.len() > line.len() * 2,
            "{command}: the long text is in its own help"
        );
    }
}

/// Every file under `dir` with its length: what a refused command must leave as it was.
fn files_of(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)
            .expect("reads the directory")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                found.push((path, len));
            }
        }
    }
    found.sort();
    found
}

/// `demo --data-dir` keeps its ledger with a config that reads it, and says so; a second run
/// into the same directory is refused and changes nothing; the table counts the claims made,
/// the denominator of "duplicates prevented".
#[test]
fn the_demo_keeps_its_ledger_when_asked_refuses_an_existing_one_and_counts_its_claims() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("demo");
    let demo = || {
        Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["demo", "--agents", "3", "--intents", "4", "--data-dir"])
            .arg(&dir)
            .output()
            .expect("runs the demo")
    };
    let first = demo();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&first.stdout),
        String::from_utf8_lossy(&first.stderr),
    );
    assert!(first.status.success(), "{stdout}\n{stderr}");
    let row = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` row: {stdout}"));
        line[line.find(name).expect("found") + name.len()..]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("`{name}` has no count: {line}"))
    };
    let (intents, claims, prevented) = (
        row("intents"),
        row("claims made"),
        row("duplicates prevented"),
    );
    assert_eq!(intents, 12, "{stdout}");
    assert!(claims >= intents && prevented <= claims, "{stdout}");
    let config = dir.join("opledger.toml");
    assert!(
        stdout.contains("kept in") && stdout.contains(&config.display().to_string()),
        "{stdout}"
    );
    // The config beside the ledger reads it.
    let export = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["export", "--config"])
        .arg(&config)
        .output()
        .expect("runs export");
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let events = String::from_utf8_lossy(&export.stdout).lines().count() as u64;
    assert!(events >= intents, "{events} events");

    let before = files_of(&dir);
    let again = demo();
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success(),
        "a second demo into a ledger is refused"
    );
    assert!(
        said.contains("already holds a ledger") && said.contains("--data-dir"),
        "{said}"
    );
    assert_eq!(files_of(&dir), before, "the refused demo changed nothing");
}

fn check(config: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["check", "--config"])
        .arg(config)
        .output()
        .expect("runs check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `check` reports every error at once, keeps the parser's own hints, warns on values that
/// parse but make no sense, and shows each tool's full terms; `init` writes a starting file
/// that `check` accepts, and never overwrites one.
#[test]
fn check_says_everything_at_once_and_init_writes_a_starting_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let many = tmp.path().join("many.toml");
    std::fs::write(
        &many,
        concat!(
            "listen = \"nope\"\n[log]\npartitions = 0\n",
            "[[tool]]\nname = \"x\"\nclass = \"keyed\"\nloss = \"high\"\nlease = \"ten\"\n",
            "[[tool]]\nname = \"y\"\nclass = \"keyed\"\nloss = \"high\"\ncompensation = \"z\"\n",
            "[[tool]]\nname = \"u\"\nclass = \"sometimes\"\nloss = \"huge\"\nretention = \"forever\"\n",
            "[[tool]]\nname = \"v\"\nclass = \"idempotent\"\n",
            "[[principal]]\nid = \"p1\"\ntoken = \"long-enough-1\"\nroles = [\"king\"]\n",
            "[[principal]]\nid = \"p2\"\ntoken = \"long-enough-2\"\ntools = [\"nope\", \"x\"]\n",
            "[[tool]]\nname = \"w\"\nclass = \"keyed\"\nlease = \"0s\"\naccept_unknown_risk = true\nstatus_url = \"http://x/status\"\n",
            "[[tool]]\nname = \"w\"\nclass = \"keyd\"\n",
            "[[principal]]\nid = \"p3\"\ntoken = \"long-enough-1\"\n",
        ),
    )
    .expect("writes");
    let (ok, _, said) = check(&many);
    assert!(!ok, "{said}");
    let wrong = [
        "line 1: listen",
        "line 3: [log] partitions = 0",
        "line 8: tool `x`: lease = \"ten\"",
        "line 13: tool `y`: compensation = \"z\"",
        "line 16: tool `u`: class = \"sometimes\" is not one of read, natural, keyed, unsafe",
        "line 17: tool `u`: loss = \"huge\" is not one of low, high",
        "line 18: tool `u`: retention = \"forever\"",
        "line 21: tool `v`: class = \"idempotent\"",
        "line 25: principal `p1`: role \"king\"",
        "line 29: principal `p2`: tools lists \"nope\",",
        // The rules between settings, each on its own setting's line.
        "line 33: tool `w`: lease must be longer than zero",
        "line 34: tool `w`: accept_unknown_risk is only allowed with loss",
        "line 34: tool `w`: accept_unknown_risk is only meaningful for class",
        "line 35: tool `w`: status_url must contain",
        // A second entry of a name is said even when it is wrong in itself too.
        "line 37: tool `w` is declared twice",
        "line 38: tool `w`: class = \"keyd\"",
        "line 41: principal `p3`: shares its token",
    ];
    let mut at = 0;
    for w in wrong {
        // Every one, in the file's order.
        let found = said[at..].find(w);
        assert!(found.is_some(), "{w} missing (or out of order) in: {said}");
        at += found.unwrap_or(0) + w.len();
    }
    assert!(said.contains(&format!("{} errors", wrong.len())), "{said}");

    let header = tmp.path().join("header.toml");
    std::fs::write(&header, "[log\npartitions = 4\n").expect("writes");
    let (ok, _, said) = check(&header);
    assert!(!ok && said.contains("expected `.`, `]`"), "{said}");

    let config = tmp.path().join("opledger.toml");
    let init = |path: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["init", "--config"])
            .arg(path)
            .output()
            .expect("runs init")
    };
    let wrote = init(&config);
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let written = std::fs::read_to_string(&config).expect("init wrote the file");
    let (ok, said, warned) = check(&config);
    assert!(ok, "{said}{warned}");
    assert!(
        said.contains(
            "payments.charge: class keyed, loss high, lease 30s, retention 48h, status query no, compensation none, fingerprint amount"
        ),
        "{said}"
    );
    assert!(!warned.contains("warning"), "{warned}");
    let again = init(&config);
    assert!(!again.status.success(), "init never overwrites");
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));
    assert_eq!(std::fs::read_to_string(&config).expect("reads"), written);

    // A lease of 100,000,000 hours parses, and is almost surely a mistake.
    std::fs::write(
        &config,
        written.replacen("lease = \"30s\"", "lease = \"100000000h\"", 1),
    )
    .expect("writes");
    let (ok, _, warned) = check(&config);
    assert!(ok, "a warning, not an error: {warned}");
    assert!(
        warned.contains("warning: tool `payments.charge`: lease")
            && warned.contains("longer than a day"),
        "{warned}"
    );
}

/// An operation is found by its tool and key without claiming it: nothing is appended, a key
/// nobody claimed and another principal's are 404, bad input is the API's JSON 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_is_found_by_tool_and_key_without_appending() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start(tmp.path());
    let (s, claimed) = server
        .claim(TOKEN_A, "lookup-1", charge("w1", "5.00", "c-1"))
        .await;
    assert_eq!(s, 201, "{claimed}");
    let config = server.config.clone();
    let events = || {
        let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["audit", "--config"])
            .arg(&config)
            .output()
            .expect("runs audit");
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        common::operation_events(&summary)
    };
    let lookup = |token: &'static str, tool: &'static str, key: Option<&'static str>| {
        let mut request = server
            .raw()
            .get(format!("{}/v1/operations/lookup?tool={tool}", server.base))
            .bearer_auth(token);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        common::send(request)
    };
    let (s, found) = lookup(TOKEN_A, "payments.charge", Some("lookup-1")).await;
    assert_eq!(s, 200, "{found}");
    assert_eq!(found["operation_id"], claimed["operation_id"]);
    assert_eq!(found["state"], "processing", "{found}");
    let before = events();
    for (token, tool, key, status, code) in [
        (
            TOKEN_A,
            "payments.charge",
            Some("never-claimed"),
            404,
            "not_found",
        ),
        (
            TOKEN_B,
            "payments.charge",
            Some("lookup-1"),
            404,
            "not_found",
        ),
        (TOKEN_A, "payments.charge", None, 400, "missing_key"),
        (
            TOKEN_A,
            "payments.charg",
            Some("lookup-1"),
            400,
            "unknown_tool",
        ),
    ] {
        let (s, b) = lookup(token, tool, key).await;
        assert_eq!(
            (s, b["error"]["code"].as_str()),
            (status, Some(code)),
            "{b}"
        );
    }
    let (s, b) = common::send(
        server
            .raw()
            .get(format!(
                "{}/v1/operations/lookup?tool=payments.charge&x=1",
                server.base
            ))
            .bearer_auth(TOKEN_A)
            .header("Idempotency-Key", "lookup-1"),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{b}"
    );
    server.stop();
    assert_eq!(events(), before, "lookups append nothing");
}
