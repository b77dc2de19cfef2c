//! The command line through the real binary: the development default, config errors, help.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn opledger() -> Command {
    Command::new(env!("CARGO_BIN_EXE_opledger"))
}

#[test]
fn serve_without_config_starts_the_embedded_default_and_prints_a_token_and_a_curl_example() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = opledger()
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("OPLEDGER_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts");
    let mut banner = String::new();
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let line = line.expect("line");
        banner.push_str(&line);
        banner.push('\n');
        if line.starts_with("opledger listening on ") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(banner.contains("dev token: dev-"), "{banner}");
    assert!(
        banner.contains("curl -s -X POST http://127.0.0.1:"),
        "{banner}"
    );
    assert!(banner.contains("payments.charge"), "{banner}");
    assert!(
        dir.path()
            .join("data")
            .join("log")
            .join("log.meta")
            .exists()
    );
}

#[test]
fn a_bad_config_fails_with_the_setting_named_and_nothing_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[tool]]\nname = \"t\"\nclass = \"keyed\"\nlease = \"soonish\"\n",
    )
    .expect("writes");
    for command in ["serve", "check", "audit"] {
        let out = opledger()
            .arg(command)
            .arg("--config")
            .arg(&path)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{command} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("lease") && err.contains("soonish"),
            "{command}: {err}"
        );
    }
    let out = opledger()
        .args(["check", "--config"])
        .arg(dir.path().join("missing.toml"))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read config file"), "{err}");
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause is said once: {err}"
    );
}

/// Every config error names the file, the line, the setting (and its value when it is no
/// secret), says what is allowed in the file's words — never in Rust's — and is said once;
/// a config that is valid setting by setting but could serve nobody fails `check` too.
#[test]
fn config_errors_name_file_line_setting_and_what_is_allowed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let principal = "[[principal]]\nid = \"a\"\ntoken = \"a-long-token\"\nroles = [\"agent\"]\n";
    let tool = "[[tool]]\nname = \"t\"\nclass = \"keyed\"\n";
    let cases: Vec<(String, Vec<&str>)> = vec![
        (
            format!("{principal}{tool}[limits]\nheader_read_timeout = \"-5s\"\n"),
            vec![
                "line 9",
                "header_read_timeout",
                "\"-5s\"",
                "positive duration",
            ],
        ),
        (
            format!("{principal}{tool}[log]\npartitions = \"four\"\n"),
            vec!["line 9", "[log] partitions", "whole number"],
        ),
        (
            format!("data_dir = 5\n{principal}{tool}"),
            vec!["line 1", "data_dir", "a path in quotes"],
        ),
        (
            format!("{principal}{tool}lease = \"forever\"\n"),
            vec!["line 8", "lease = \"forever\"", "a duration like \"30s\""],
        ),
        (
            format!("{principal}tools = [\"nope\"]\n{tool}"),
            vec!["line 5", "principal `a`", "\"nope\"", "not a declared tool"],
        ),
        (
            format!("{principal}{tool}[tool.fingerprint]\nprice = [\"p\"]\n"),
            vec!["line 9", "price", "one of amount"],
        ),
        (String::new(), vec!["no [[principal]]"]),
        (principal.to_owned(), vec!["no [[tool]]"]),
        (
            format!("{}{tool}", principal.replace("agent", "auditor")),
            vec!["no principal has the agent role"],
        ),
    ];
    for (n, (text, says)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case-{n}.toml"));
        std::fs::write(&path, text).expect("writes");
        let out = opledger()
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "case {n} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("opledger: error: config file {}", path.display())),
            "case {n}: {err}"
        );
        for said in says {
            assert_eq!(
                err.matches(said).count(),
                1,
                "case {n}: {said:?} once in {err}"
            );
        }
        for rust in ["expected u32", "expected usize", "path string", "at 0"] {
            assert!(!err.contains(rust), "case {n}: {err}");
        }
    }
}

/// `opledger check` on `path`, which must pass; what it printed.
fn check_passes(path: &std::path::Path) -> String {
    let out = opledger()
        .args(["check", "--config"])
        .arg(path)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn check_accepts_the_deploy_config() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/opledger.toml");
    assert!(check_passes(path.as_ref()).contains("payments.refund: class keyed"));
}

#[test]
fn check_accepts_the_kafka_node_configs_of_deploy() {
    for n in 1..=3 {
        let path = format!("{}/deploy/kafka/node-{n}.toml", env!("CARGO_MANIFEST_DIR"));
        let stdout = check_passes(path.as_ref());
        assert!(
            stdout.contains("Kafka log on kafka-1:9092")
                && stdout.contains("members opledger.members"),
            "{stdout}"
        );
    }
}

/// The README's config reference, as a reader would paste it, passes `check` and declares
/// every setting it shows (a tool of its own for the compensation it names).
#[test]
fn the_readme_config_reference_passes_check_as_pasted() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("reads the README");
    let section = readme
        .split("## Config reference")
        .nth(1)
        .expect("a config reference");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("readme.toml");
    std::fs::write(&path, block).expect("writes");
    let stdout = check_passes(&path);
    assert!(
        stdout.contains("payments.charge: class keyed") && stdout.contains("1 principal,"),
        "{stdout}"
    );
}

#[test]
fn help_explains_every_command() {
    let out = opledger().arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    for command in [
        "serve", "audit", "verify", "history", "export", "rebuild", "check",
    ] {
        assert!(help.contains(command), "{help}");
    }
}

#[test]
fn the_demo_runs_a_fleet_and_reports_no_second_side_effect() {
    let out = opledger()
        .args(["demo", "--agents", "5", "--intents", "6", "--seed", "3"])
        .output()
        .expect("runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = |name: &str| -> u64 {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .and_then(|l| {
                l[name.len() + 2..]
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
            })
            .unwrap_or_else(|| panic!("no row {name}: {table}"))
    };
    assert_eq!(row("intents"), 30, "{table}");
    assert_eq!(row("second side effects"), 0, "{table}");
    assert_eq!(
        row("side effects performed"),
        30,
        "every intent ran exactly once: {table}"
    );
}

/// A config in `dir` and its empty embedded ledger (built with `rebuild`); the config's path.
fn empty_ledger(dir: &std::path::Path) -> std::path::PathBuf {
    // A node started and stopped: the log exists, with only its partitions' ownership events.
    let server = common::Server::start(dir);
    let config = server.config.clone();
    server.stop();
    config
}

/// `export` logs how many events it wrote at `info`: whether that line shows says which log
/// filter won. The command line beats the environment; `OPLEDGER_LOG` beats `RUST_LOG`; and
/// `RUST_LOG` is honoured when nothing else is set.
#[test]
fn log_filters_follow_the_usual_precedence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = empty_ledger(dir.path());
    let shows_info = |env: &[(&str, &str)], flag: Option<&str>| {
        let mut command = opledger();
        command
            .args(["export", "--config"])
            .arg(&config)
            .env_remove("OPLEDGER_LOG")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied());
        if let Some(level) = flag {
            command.args(["--log-level", level]);
        }
        let out = command.output().expect("runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).contains("exported")
    };
    assert!(shows_info(&[], None), "info by default");
    assert!(
        !shows_info(&[("RUST_LOG", "warn")], None),
        "RUST_LOG is honoured"
    );
    assert!(
        shows_info(&[("RUST_LOG", "warn"), ("OPLEDGER_LOG", "info")], None),
        "OPLEDGER_LOG before RUST_LOG"
    );
    assert!(
        shows_info(&[("OPLEDGER_LOG", "warn")], Some("info")),
        "the flag before the environment"
    );
    assert!(!shows_info(&[], Some("warn")));
}

/// `--log-format json` (or `OPLEDGER_LOG_FORMAT=json`, the flag winning) writes every log line
/// as one JSON object a collector can parse; text is the default.
#[test]
fn json_log_lines_parse_one_object_per_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = empty_ledger(dir.path());
    let stderr = |env: Option<&str>, flag: Option<&str>| {
        let mut command = opledger();
        command
            .args(["export", "--log-level", "info", "--config"])
            .arg(&config)
            .env_remove("OPLEDGER_LOG_FORMAT");
        if let Some(format) = env {
            command.env("OPLEDGER_LOG_FORMAT", format);
        }
        if let Some(format) = flag {
            command.args(["--log-format", format]);
        }
        let out = command.output().expect("runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for (env, flag) in [(None, Some("json")), (Some("json"), None)] {
        let text = stderr(env, flag);
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines.is_empty(), "{text}");
        for line in &lines {
            let object: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            assert!(
                object["level"].is_string() && object["timestamp"].is_string(),
                "{line}"
            );
        }
        assert!(
            lines
                .iter()
                .any(|l| l.contains("\"message\"") && l.contains("exported")),
            "{text}"
        );
    }
    let text = stderr(Some("json"), Some("text"));
    assert!(text.contains("exported"), "{text}");
    assert!(
        text.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()),
        "the flag wins over the environment: {text}"
    );
    let bad = opledger()
        .args(["export", "--log-format", "yaml", "--config"])
        .arg(&config)
        .output()
        .expect("runs");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("text, json"));
}

/// The error that ends a process is a JSON line too when the log is JSON, said once, at any
/// log filter; under text it stays the plain `opledger: error:` line.
#[test]
fn a_fatal_error_is_a_json_line_under_the_json_log_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let address = taken.local_addr().expect("address").to_string();
    let serve = |format: &str| {
        let out = opledger()
            .args(["serve", "--log-level", "off", "--log-format", format])
            .args(["--listen", &address, "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("OPLEDGER_CONFIG")
            .output()
            .expect("runs");
        assert!(!out.status.success(), "the port is taken: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let text = serve("json");
    let errors: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .filter(|o: &serde_json::Value| o["level"] == "ERROR")
        .collect();
    assert_eq!(errors.len(), 1, "{text}");
    let message = errors[0]["fields"]["message"].as_str().expect("a message");
    assert!(message.contains(&address), "{message}");
    assert!(errors[0]["timestamp"].is_string(), "{text}");
    let text = serve("text");
    assert!(
        text.lines()
            .any(|l| l.starts_with("opledger: error: ") && l.contains(&address)),
        "{text}"
    );
}

/// `audit … | head -1`: the reader goes away before the summary is printed, and the command
/// still ends well (it used to panic on the closed pipe).
#[test]
fn audit_into_a_closed_pipe_ends_well() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = empty_ledger(dir.path());
    let mut child = opledger()
        .args(["audit", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("waits");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// A mistyped data directory is an error for `rebuild`, never a new, empty ledger.
#[test]
fn rebuild_on_a_data_directory_without_a_log_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = dir.path().join("no-such-data");
    let config = dir.path().join("opledger.toml");
    std::fs::write(&config, common::config_text(&dir.path().join("data"), "")).expect("writes");
    let out = opledger()
        .args(["rebuild", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&typo)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("there is no log in"),
        "{stderr}"
    );
    assert!(!typo.exists(), "nothing created at {}", typo.display());
}

/// How many partitions a node serves, by its `/metrics`.
async fn partitions_serving(server: &common::Server) -> u64 {
    let text = server
        .raw()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|l| l.strip_prefix("opledger_partitions_serving "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no opledger_partitions_serving in {text}"))
}

/// Without `[log] partitions` a new embedded log gets one partition per core (at most 8), and
/// an existing log keeps its own count: a default that depends on the machine never makes a
/// data directory unreadable. A count the config names must still match.
#[tokio::test]
async fn without_partitions_in_the_config_an_existing_log_keeps_its_own_count() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let with = |partitions: &str| common::config_text_log(&data, partitions, "");
    let config = tmp.path().join("opledger.toml");
    // Created with 8 partitions, named in the config.
    std::fs::write(&config, with("partitions = 8")).expect("config");
    let server = common::Server::start_existing(tmp.path(), &config);
    assert_eq!(partitions_serving(&server).await, 8);
    server.stop();
    // The same data directory, a config that names no count: still 8, and check says so.
    std::fs::write(&config, with("")).expect("config");
    let checked = check_passes(&config);
    assert!(
        checked.contains("8 partitions (the existing log's)"),
        "{checked}"
    );
    let server = common::Server::start_existing(tmp.path(), &config);
    assert_eq!(partitions_serving(&server).await, 8);
    server.stop();
    // A count that disagrees with the log is refused, naming both.
    std::fs::write(&config, with("partitions = 3")).expect("config");
    let out = opledger()
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains('8') && text.contains('3'), "{text}");
    // A new log without a count: one partition per core, at most 8.
    let fresh = tmp.path().join("fresh");
    std::fs::create_dir_all(&fresh).expect("dir");
    let fresh_config = fresh.join("opledger.toml");
    // writer_threads = 8 was valid with the old fixed default of 8: it is capped, not refused.
    std::fs::write(
        &fresh_config,
        common::config_text_log(&fresh.join("data"), "writer_threads = 8", ""),
    )
    .expect("config");
    let server = common::Server::start_existing(&fresh, &fresh_config);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    assert_eq!(partitions_serving(&server).await, cores.clamp(1, 8));
    server.stop();
}
