//! The README's curl walk-through, run as pasted: its shell blocks, in order, against the real
//! `opledger serve` on the development default, with only what a reader fills in replaced
//! (the printed token, the port a test must pick, the operation id the first answer gave).
//! Every `"key":value` the README shows in an answer's comment must be in the real answer.
//! After it, the Python quick start runs as pasted, twice: it charges once, under its own key.

mod common;

use common::mcp_python;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));

/// The `sh` blocks of the section, in order.
fn blocks(section: &str) -> Vec<String> {
    fenced(section, "sh")
}

/// The blocks of the section fenced as `lang`, in order.
fn fenced(section: &str, lang: &str) -> Vec<String> {
    let fence = format!("```{lang}");
    let start = README.find(section).expect("the section is in the README");
    let body = &README[start + section.len()..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut blocks = Vec::new();
    // A block inside a list is indented like its fence; lines keep what is deeper (Python).
    let mut current: Option<(usize, String)> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match (&mut current, trimmed) {
            (None, open) if open == fence => current = Some((indent, String::new())),
            (Some(_), "```") => blocks.push(current.take().expect("open block").1),
            (Some((fence, block)), _) => {
                block.push_str(&line[indent.min(*fence)..]);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The `"key":value` pairs a block's `# {…}` comment shows (values elided with `…` skipped).
fn shown_pairs(block: &str) -> Vec<String> {
    let comment: String = block
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .collect::<Vec<_>>()
        .join("");
    let mut pairs = Vec::new();
    let mut rest = comment.as_str();
    while let Some(at) = rest.find("\":") {
        let key_start = rest[..at].rfind('"').expect("a quoted key");
        let value = &rest[at + 2..];
        let end = value.find([',', '}']).unwrap_or(value.len());
        let pair = format!("{}{}", &rest[key_start..at + 2], &value[..end]);
        if !pair.contains('…') && !value.starts_with('{') {
            pairs.push(pair.replace(' ', ""));
        }
        rest = &rest[at + 2..];
    }
    pairs
}

#[test]
fn the_readme_curl_walk_through_runs_as_pasted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("OPLEDGER_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let (mut token, mut address) = (None, None);
    for line in BufReader::new(serve.stdout.take().expect("stdout")).lines() {
        let line = line.expect("banner line");
        if let Some(t) = line.split_whitespace().find(|w| w.starts_with("dev-")) {
            token.get_or_insert_with(|| t.to_owned());
        }
        if let Some(a) = line.strip_prefix("opledger listening on ") {
            address = Some(a.split_whitespace().next().expect("address").to_owned());
            break;
        }
    }
    let (token, address) = (token.expect("a dev token"), address.expect("an address"));
    let base = if address.starts_with("http") {
        address
    } else {
        format!("http://{address}")
    };

    let blocks = blocks("## A walk through with curl");
    assert_eq!(blocks.len(), 5, "setup and four steps: {blocks:?}");
    let setup = blocks[0]
        .replace("TOKEN=dev-...", &format!("TOKEN={token}"))
        .replace("API=http://127.0.0.1:7070", &format!("API={base}"));
    assert!(setup.contains(&token) && setup.contains(&base), "{setup}");
    let mut id: Option<String> = None;
    for (step, block) in blocks[1..].iter().enumerate() {
        let commands = match &id {
            Some(id) => block.replace("<operation_id>", id),
            None => block.clone(),
        };
        assert!(
            !commands.contains('<'),
            "step {step}: nothing left to fill in: {commands}"
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("set -eu\n{setup}\n{commands}"))
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "step {step}: {out:?}");
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let parsed: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("step {step}: not JSON ({e}): {answer}"));
        if id.is_none() {
            id = parsed["operation_id"].as_str().map(str::to_owned);
        }
        let shown = shown_pairs(block);
        assert!(!shown.is_empty(), "step {step} shows an answer: {block}");
        for pair in shown {
            assert!(
                answer.contains(&pair),
                "step {step}: {pair} not in {answer}"
            );
        }
    }
    // Then the Python quick start, as pasted (the token and address filled in), twice.
    let python = fenced("## From Python", "python");
    assert_eq!(python.len(), 1, "one quick start: {python:?}");
    let script = python[0]
        .replace("token=\"dev-...\"", &format!("token=\"{token}\""))
        .replace("http://127.0.0.1:7070", &base);
    assert!(
        script.contains(&token) && script.contains(&base),
        "{script}"
    );
    let run = || {
        let out = Command::new("python3")
            .arg("-c")
            .arg(&script)
            .env(
                "PYTHONPATH",
                concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python/src"),
            )
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let first = run();
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), 2, "it charged, then printed the id: {first}");
    assert!(lines[0].starts_with("charging 10.50"), "{first}");
    let charge_id = lines[1];
    assert!(
        charge_id.starts_with("ch_py_"),
        "its own key, not the curl walk-through's: {first}"
    );
    assert_eq!(run(), charge_id, "a second run replays without charging");
    let _ = serve.kill();
    let _ = serve.wait();
}

/// The README's MCP run, as pasted: its config written by the first block (only `/tmp` moved
/// into a folder of the test's own), the node started as `cargo run … serve` would (the built
/// binary, on a port the test picks), then the official SDK's two calls of the second block:
/// an execution and a replay, one effect upstream.
#[test]
fn the_readme_mcp_run_works_as_pasted() {
    let python = mcp_python();
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = format!("{}/", dir.path().display());
    let blocks = blocks("## Agents over MCP");
    assert_eq!(blocks.len(), 2, "config and agent: {blocks:?}");
    let first = blocks[0].replace("/tmp/", &tmp);
    let serve_line = format!("cargo run --release -- serve --config {tmp}gateway.toml &\n");
    let setup = first
        .strip_suffix(&serve_line)
        .unwrap_or_else(|| panic!("the first block ends by starting the node: {first}"));
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -eu\n{setup}\necho \"$py\""))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "the config block: {out:?}");
    let py = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(py, python, "the block's Python is the SDK's");

    let log = dir.path().join("serve.log");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(format!("{tmp}gateway.toml"))
        .env_remove("OPLEDGER_CONFIG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("serve starts");
    let mut lines = BufReader::new(serve.stdout.take().expect("stdout")).lines();
    let address = loop {
        let line = lines.next().expect("a listening line").expect("a line");
        if let Some(a) = line.strip_prefix("opledger listening on ") {
            break a.split_whitespace().next().expect("address").to_owned();
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("MCP upstream connected")
    {
        assert!(Instant::now() < deadline, "the upstream did not connect");
        std::thread::sleep(Duration::from_millis(50));
    }
    let base = if address.starts_with("http") {
        address
    } else {
        format!("http://{address}")
    };
    let agent = blocks[1].replace("http://127.0.0.1:7070", &base);
    assert!(agent.contains(&base), "{agent}");
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("set -eu\npy={py}\n{agent}"))
        .output()
        .expect("bash runs");
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(out.status.success(), "the agent block: {out:?}");
    let printed = String::from_utf8_lossy(&out.stdout);
    let decisions: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(decisions, ["execute", "replay"], "{printed}");
    let effects = std::fs::read_to_string(format!("{tmp}pay-effects.jsonl")).expect("effects");
    assert_eq!(effects.lines().count(), 1, "{effects}");
}

/// Every error code the API answers and every rejection code is in the README's tables, each
/// with what to do.
#[test]
fn every_error_and_rejection_code_is_documented() {
    // The codes the OpenAPI document declares (which Schemathesis holds the server to).
    let spec = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/schemas/openapi.yaml"));
    let enum_line = spec
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("enum: [malformed_json"))
        .expect("the Error schema's code enum");
    let codes: Vec<&str> = enum_line
        .trim_start_matches("enum: [")
        .trim_end_matches(']')
        .split(',')
        .map(str::trim)
        .collect();
    assert!(codes.len() >= 28, "{codes:?}");
    let rows: Vec<&str> = README.lines().filter(|l| l.starts_with("| ")).collect();
    let documented = |code: &str| {
        rows.iter()
            .any(|row| row.contains(&format!("`{code}`")) && row.len() > code.len() + 20)
    };
    for code in codes {
        assert!(
            documented(code),
            "error code {code} is not in the README's table"
        );
    }
    for rejection in opledger::core::decision::Rejection::ALL {
        let code = rejection.code();
        assert!(
            rows.iter()
                .any(|row| row.starts_with(&format!("| `{code}` |"))),
            "rejection {code} is not in the README's table"
        );
        assert!(!rejection.message().is_empty());
    }
}
