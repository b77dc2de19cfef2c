//! Storage faults through the real binary: an fsync that fails stops the log for good (the
//! node refuses new work and says why, and a restart recovers from what is on disk), and a
//! full disk answers retriable 503 with nothing acknowledged until space is back, when the
//! node goes on by itself.

mod common;

use common::{Server, TOKEN_A, charge};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn verify(config: &Path) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["verify", "--config"])
        .arg(config)
        .output()
        .expect("runs verify");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "verify printed no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().expect("exited"), json)
}

fn config_in(dir: &Path) -> PathBuf {
    let config = dir.join("opledger.toml");
    std::fs::write(&config, common::config_text(&dir.join("data"), "")).expect("writes config");
    config
}

/// The 30th fsync of the log fails once (later ones would succeed: that must not make the log
/// trust them). The claim it covered is answered 503, and so is every later one, with the
/// reason; `/healthz` says the node cannot take new work. After a restart, every acknowledged
/// claim is there and the refused one's key answers consistently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_stops_the_log_for_good_and_a_restart_recovers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = config_in(tmp.path());
    let server = Server::start_existing_with_env(
        tmp.path(),
        &config,
        &[("OPLEDGER_FAULTS", "fsync_fails_at=30")],
    );
    let (s, _) = server.get(TOKEN_A, "/healthz").await;
    assert_eq!(s, 200);
    let mut acknowledged = Vec::new();
    let mut refused = None;
    for i in 0..100 {
        let key = format!("fsync-{i}");
        let (s, body) = server.claim(TOKEN_A, &key, charge("w", "3", "c")).await;
        match s {
            201 => acknowledged.push((key, body["operation_id"].as_str().expect("id").to_owned())),
            503 => {
                refused = Some((key, body));
                break;
            }
            other => panic!("claim {i}: {other} {body}"),
        }
    }
    let (refused_key, answer) = refused.expect("the failing fsync was reached");
    assert!(acknowledged.len() >= 10, "{}", acknowledged.len());
    assert_eq!(answer["error"]["code"], "unavailable", "{answer}");
    let message = answer["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("failed fsync") && message.contains("restart the node"),
        "{message}"
    );
    // For good: the next fsync would succeed, but nothing new is accepted.
    for i in 0..3 {
        let (s, body) = server
            .claim(TOKEN_A, &format!("after-{i}"), charge("w", "3", "c"))
            .await;
        assert_eq!(s, 503, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .expect("message")
                .contains("failed fsync")
        );
    }
    let health = server
        .raw()
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .expect("answers");
    assert_eq!(health.status().as_u16(), 503);
    let health: Value = health.json().await.expect("JSON");
    assert_eq!(health["error"]["code"], "log_failed", "{health}");
    assert!(
        server
            .stderr()
            .contains("the log stopped accepting appends after a failed fsync"),
        "{}",
        server.stderr()
    );
    server.stop_within(std::time::Duration::from_secs(60));
    let (_, verified) = verify(&config);
    assert_ne!(
        verified["node"], "stopped cleanly",
        "a log that failed is never marked clean"
    );

    let server = Server::start_existing(tmp.path(), &config);
    for (key, id) in &acknowledged {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(s, 200, "{key} lost: {now}");
        assert_eq!(now["state"], "processing");
    }
    // The refused claim may or may not be on disk; either way its key now answers the same
    // operation every time, and new claims are taken again.
    let (s1, first) = server
        .claim(TOKEN_A, &refused_key, charge("other", "3", "c"))
        .await;
    let (s2, second) = server
        .claim(TOKEN_A, &refused_key, charge("other", "3", "c"))
        .await;
    assert!(s1 < 500 && s2 < 500, "{first} {second}");
    assert_eq!(first["operation_id"], second["operation_id"]);
    let (s, _) = server
        .claim(TOKEN_A, "after-restart", charge("w", "3", "c"))
        .await;
    assert_eq!(s, 201);
    server.stop();
}

/// A tmpfs mounted over the log directory: gone when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .expect("runs mount (the tests run as root)");
        assert!(
            status.success(),
            "mount failed: the storage tests need root"
        );
        Self(at.to_owned())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system holding `dir` to the last byte; returns the filler.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("filler");
    let chunk = vec![0u8; 4096];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling: {e}"),
        }
    }
    // And the last bytes a short write left.
    while let Ok(n) = file.write(&chunk[..1]) {
        if n == 0 {
            break;
        }
    }
    path
}

/// The log on a small disk: once it is full, claims answer retriable 503 and nothing of them
/// is kept; once space is back the same node takes them again, and the refused key was never
/// decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_answers_retriable_503_and_the_node_goes_on_once_space_is_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = config_in(tmp.path());
    let log_dir = tmp.path().join("data").join("log");
    let disk = SmallDisk::mount(&log_dir, "2m");
    let server = Server::start_existing(tmp.path(), &config);
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let (s, body) = server
            .claim(TOKEN_A, &format!("space-{i}"), charge("w", "3", "c"))
            .await;
        assert_eq!(s, 201, "{body}");
        acknowledged.push(body["operation_id"].as_str().expect("id").to_owned());
    }
    let filler = fill(&log_dir);
    // The last page a segment already has may take a claim or two more.
    let mut refused = None;
    for i in 0..100 {
        let key = format!("full-{i}");
        let (s, body) = server.claim(TOKEN_A, &key, charge("w", "3", "c")).await;
        match s {
            201 => acknowledged.push(body["operation_id"].as_str().expect("id").to_owned()),
            _ => {
                refused = Some(key);
                break;
            }
        }
    }
    let refused = refused.expect("the disk filled up");
    for i in 0..3 {
        let (s, body) = server.claim(TOKEN_A, &refused, charge("w", "3", "c")).await;
        assert_eq!(s, 503, "attempt {i}: {body}");
        assert_eq!(body["error"]["code"], "unavailable");
        assert_eq!(body["error"]["retriable"], true);
        let message = body["error"]["message"].as_str().expect("message");
        assert!(message.contains("no space left"), "{message}");
    }
    // Not a failure of the log: the node still says it takes work.
    let (s, _) = server.get(TOKEN_A, "/healthz").await;
    assert_eq!(s, 200);
    std::fs::remove_file(&filler).expect("frees space");
    // Another holder: had the refused claim been kept, this would be `in_progress`.
    let (s, body) = server
        .claim(TOKEN_A, &refused, charge("other", "3", "c"))
        .await;
    assert_eq!(
        (s, body["decision"].as_str()),
        (201, Some("execute")),
        "{body}"
    );
    acknowledged.push(body["operation_id"].as_str().expect("id").to_owned());
    let config = server.config.clone();
    server.stop();
    let (code, verified) = verify(&config);
    assert_eq!(code, 0, "{verified}");
    assert_eq!(verified["node"], "stopped cleanly");
    let server = Server::start_existing(tmp.path(), &config);
    for id in &acknowledged {
        let (s, now) = server.get(TOKEN_A, &format!("/v1/operations/{id}")).await;
        assert_eq!(s, 200, "{now}");
    }
    server.stop();
    drop(disk);
}

/// How `serve` with the N-th fsync failing ended: it exited during start (code and stderr), or
/// it started listening.
enum Started {
    Exited(Option<i32>, String),
    Listening,
}

fn serve_with_fsync_failing_at(dir: &Path, config: &Path, n: u32) -> Started {
    use std::io::BufRead;
    let stderr_path = dir.join(format!("stderr-fsync-{n}.log"));
    let stderr = std::fs::File::create(&stderr_path).expect("creates stderr file");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["serve", "--config"])
        .arg(config)
        .env("OPLEDGER_FAULTS", format!("fsync_fails_at={n}"))
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("starts opledger");
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let listening = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.starts_with("opledger listening on "));
        let _ = tx.send(listening);
    });
    // A bound for a failure, not a pause: before the fix the node retried for ever.
    let listening = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("with fsync {n} failing, serve neither listened nor exited"));
    if listening {
        let _ = child.kill();
        let _ = child.wait();
        return Started::Listening;
    }
    let status = child.wait().expect("exited");
    Started::Exited(
        status.code(),
        std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    )
}

/// An fsync that fails while the node starts (recording its ownership of a partition) stops
/// it with the reason, instead of retrying for ever without serving; once the fault is gone,
/// it starts on what is on disk.
#[test]
fn an_fsync_that_fails_while_starting_stops_the_node_with_the_reason() {
    let mut exited = 0;
    for n in 1..=6 {
        let tmp = tempfile::tempdir().expect("tempdir");
        let config = config_in(tmp.path());
        match serve_with_fsync_failing_at(tmp.path(), &config, n) {
            Started::Listening => {}
            Started::Exited(code, stderr) => {
                exited += 1;
                assert_ne!(code, Some(0), "fsync {n}: {stderr}");
                assert!(
                    stderr.contains("fsync") && stderr.contains("restart the node"),
                    "fsync {n}: {stderr}"
                );
                let server = Server::start_existing(tmp.path(), &config);
                server.stop();
            }
        }
    }
    assert!(exited > 0, "no fsync of the start was hit");
}
