//! Hostile and slow clients against the real binary: a half-sent request no longer keeps a
//! stopping node alive, connections that send nothing (at first, or between requests) are
//! closed, a body that does not arrive is answered 408, a body that cannot be read 400, and
//! connections beyond the limit wait; and `serve` raises its open-file limit.

mod common;

use common::{Server, TOKEN_A};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The usual test config with `limits` added to its `[limits]`.
fn with_limits(dir: &Path, limits: &str) -> String {
    let text = common::config_text(&dir.join("data"), "").replace(
        "[limits]\nbody_bytes_max = 4096",
        &format!("[limits]\nbody_bytes_max = 4096\n{limits}"),
    );
    assert!(
        text.contains(limits),
        "the test config has a [limits] section"
    );
    text
}

/// A server whose `[limits]` add `limits` to the usual test config.
fn start(dir: &Path, limits: &str) -> Server {
    std::fs::create_dir_all(dir).expect("dir");
    let config = dir.join("opledger.toml");
    std::fs::write(&config, with_limits(dir, limits)).expect("writes config");
    Server::start_existing(dir, &config)
}

/// What `opledger check` says of a config it must refuse.
fn check_refuses(dir: &Path, text: &str) -> String {
    let config = dir.join("bad.toml");
    std::fs::write(&config, text).expect("writes");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .expect("runs check");
    assert!(!out.status.success(), "check passed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The head of a claim whose body never comes, and the body's first bytes.
fn claim_without_its_body(key: &str) -> String {
    format!(
        "POST /v1/operations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN_A}\r\nIdempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"tool\":"
    )
}

async fn connect(server: &Server) -> TcpStream {
    let addr = server.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("connects")
}

/// Reads until the server closes the connection; what it sent, or `None` if it did not close
/// within `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await
        .ok()
        .map(|()| String::from_utf8_lossy(&seen).into_owned())
}

/// What the server sends for `request`, written whole on a connection of its own, by the
/// time it closes that connection (within 10 s).
async fn answer_to(server: &Server, request: &str) -> String {
    let mut stream = connect(server).await;
    stream.write_all(request.as_bytes()).await.expect("writes");
    until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("answered and closed")
}

/// That `answer` is the API's refusal: HTTP `status` with the error `code` in its JSON.
fn assert_refused(answer: &str, status: u16, code: &str) {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}"))
            && answer.contains(&format!("\"{code}\"")),
        "{answer}"
    );
}

/// Stops `server` and checks that its log holds no operation's event.
fn stop_with_nothing_appended(server: Server) {
    let config = server.config.clone();
    server.stop();
    let audit = common::cli_json(&config, "audit");
    assert_eq!(common::operation_events(&audit), 0, "{audit}");
}

#[tokio::test]
async fn a_half_sent_request_does_not_keep_a_stopping_node_alive() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Long read timeouts: only the stop's grace period can end these connections.
    let server = start(
        tmp.path(),
        "header_read_timeout = \"60s\"\nbody_read_timeout = \"60s\"\nshutdown_grace = \"1s\"",
    );
    let mut half_head = connect(&server).await;
    half_head
        .write_all(b"POST /v1/operations HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
        .await
        .expect("writes");
    let mut half_body = connect(&server).await;
    let head = claim_without_its_body("k");
    half_body.write_all(head.as_bytes()).await.expect("writes");
    // The body is being waited for: the node is inside the handler when the stop arrives.
    let (s, _) = server.get(TOKEN_A, "/healthz").await;
    assert_eq!(s, 200);
    let (config, stderr_path) = (server.config.clone(), server.stderr_path.clone());
    let exit = server.stop_within(Duration::from_secs(20));
    assert!(
        exit.is_some_and(|e| e.success()),
        "stopped cleanly within the grace period and the shutdown's own work: {exit:?}"
    );
    let stderr = std::fs::read_to_string(&stderr_path).expect("stderr");
    assert!(
        stderr.contains("cut off connections still open after the grace period"),
        "{stderr}"
    );
    // Stopped cleanly: the next start resumes the projection instead of replaying the log.
    let server = Server::start_existing(tmp.path(), &config);
    assert!(
        server
            .stderr()
            .contains("resuming from its applied offsets"),
        "{}",
        server.stderr()
    );
    server.stop();
}

#[tokio::test]
async fn silent_and_idle_connections_are_closed_and_a_body_that_does_not_come_is_answered_408() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start(
        tmp.path(),
        "header_read_timeout = \"300ms\"\nbody_read_timeout = \"300ms\"",
    );
    // A connection that never sends anything is closed.
    let mut silent = connect(&server).await;
    assert!(
        until_closed(&mut silent, Duration::from_secs(10))
            .await
            .is_some(),
        "a silent connection is closed"
    );
    // A kept-alive connection that goes idle after its request is closed too.
    let answered = answer_to(&server, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
    // A body that does not arrive in time: 408, and nothing appended.
    let answer = answer_to(&server, &claim_without_its_body("slow-1")).await;
    assert_refused(&answer, 408, "body_timeout");
    stop_with_nothing_appended(server);
}

/// A body that cannot be read as HTTP (a broken chunked encoding) is bad input, 400
/// `body_unreadable` — not 413, which says it was too large — and nothing is appended.
#[tokio::test]
async fn a_broken_chunked_body_is_answered_400_body_unreadable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start(tmp.path(), "body_read_timeout = \"10s\"");
    let request = format!(
        "POST /v1/operations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN_A}\r\nIdempotency-Key: chunked-1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"too\r\nzz\r\n"
    );
    let answer = answer_to(&server, &request).await;
    assert_refused(&answer, 400, "body_unreadable");
    stop_with_nothing_appended(server);
}

/// `/mcp` reads bodies under the API's rules too: a broken chunked body is 400
/// `body_unreadable` in the API's JSON, and a body that does not come is 408 `body_timeout`
/// (the SDK that serves `/mcp` would answer the first with a plain-text 500, and wait on the
/// second as long as the client likes).
#[tokio::test]
async fn mcp_bodies_are_read_under_the_api_rules() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(tmp.path()).expect("dir");
    let config = tmp.path().join("opledger.toml");
    // An upstream that never answers: the gateway serves /mcp all the same.
    let text = with_limits(tmp.path(), "body_read_timeout = \"1s\"")
        + "\n[mcp]\n[[mcp.upstream]]\nname = \"idle\"\ncommand = [\"sleep\", \"60\"]\n";
    std::fs::write(&config, text).expect("writes config");
    let server = Server::start_existing(tmp.path(), &config);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN_A}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    for (rest, status, code) in [
        (
            "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"jso\r\nzz\r\n",
            400,
            "body_unreadable",
        ),
        (
            "Content-Length: 100\r\n\r\n{\"jsonrpc\"",
            408,
            "body_timeout",
        ),
    ] {
        assert_refused(
            &answer_to(&server, &format!("{head}{rest}")).await,
            status,
            code,
        );
    }
    server.stop();
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_for_a_free_one() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start(
        tmp.path(),
        "connections_max = 2\nheader_read_timeout = \"60s\"",
    );
    let first = connect(&server).await;
    let mut second = connect(&server).await;
    // Both slots taken by connections that send nothing: a third request is not served...
    let third = server.raw().get(format!("{}/healthz", server.base)).send();
    tokio::pin!(third);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third)
            .await
            .is_err(),
        "served beyond the limit"
    );
    // ...until one of them goes away.
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("served once a slot is free")
        .expect("answered");
    assert_eq!(answer.status().as_u16(), 200);
    second.shutdown().await.expect("closes");
    server.stop();
}

#[test]
fn limits_that_make_no_sense_are_refused_by_check() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (limits, says) in [
        (
            "connections_max = 0",
            "connections_max = 0 would serve nobody",
        ),
        (
            "header_read_timeout = \"-5s\"",
            "header_read_timeout = \"-5s\" is not a positive duration",
        ),
        ("shutdown_grace = \"0s\"", "shutdown_grace = \"0s\""),
        (
            "send_timeout = \"2d\"",
            "send_timeout = \"2d\" is not a positive duration of at most a day",
        ),
        (
            "connections_max = 2000000",
            "connections_max = 2000000 is more than 1000000",
        ),
        (
            "projection_cache_mb = 0",
            "projection_cache_mb: 0 MiB is not a sled cache size: give 1 to 1048576",
        ),
        (
            // Once multiplied into bytes without a check, this overflowed.
            "projection_cache_mb = 9223372036854775807",
            "projection_cache_mb: 9223372036854775807 MiB is not a sled cache size",
        ),
    ] {
        let stderr = check_refuses(tmp.path(), &with_limits(tmp.path(), limits));
        assert!(stderr.contains(says), "{limits}: {stderr}");
    }
}

/// A principal over its rate gets 429 with Retry-After before anything is read or appended;
/// another principal is not slowed down by it.
#[tokio::test]
async fn a_principal_over_its_rate_is_answered_429_and_others_are_not_slowed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(tmp.path()).expect("dir");
    // agent-b, with a rate of 1 a second and a burst of 2.
    let text = common::config_text(&tmp.path().join("data"), "")
        .replace("id = \"agent-b\"", "id = \"agent-b\"\nrate = 1\nburst = 2");
    assert!(text.contains("rate = 1"));
    let config = tmp.path().join("opledger.toml");
    std::fs::write(&config, text).expect("writes config");
    let server = Server::start_existing(tmp.path(), &config);
    let claim = |key: &str| common::charge("w", "3", key);
    // Six claims at once against a burst of 2 and 1 a second: however slow this machine,
    // some are over the rate.
    let sent: Vec<_> = (0..6)
        .map(|i| {
            let request = server
                .raw()
                .post(format!("{}/v1/operations", server.base))
                .bearer_auth(common::TOKEN_B)
                .header("Idempotency-Key", format!("r-{i}"))
                .json(&claim("c"))
                .send();
            tokio::spawn(request)
        })
        .collect();
    let mut created = 0;
    let mut limited = None;
    for answer in sent {
        let answer = answer.await.expect("joined").expect("answered");
        match answer.status().as_u16() {
            201 => created += 1,
            429 => limited = Some(answer),
            other => panic!("unexpected {other}"),
        }
    }
    let limited = limited.expect("some claims over the rate");
    assert!((2..6).contains(&created), "{created}");
    let retry_after: u64 = limited.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!((1..=6).contains(&retry_after), "{retry_after}");
    let body: serde_json::Value = limited.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert_eq!(body["error"]["retriable"], true, "{body}");
    // Another principal is not limited by agent-b's rate.
    for i in 0..5 {
        let (s, _) = server.claim(TOKEN_A, &format!("a-{i}"), claim("c")).await;
        assert_eq!(s, 201);
    }
    server.stop();
    let audit = common::cli_json(&config, "audit");
    assert_eq!(
        common::operation_events(&audit),
        created + 5,
        "the limited claims appended nothing: {audit}"
    );
}

#[test]
fn rates_that_make_no_sense_are_refused_by_check() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (rate, says) in [
        ("rate = 0", "rate and burst must be at least 1"),
        ("burst = 5", "burst needs a rate"),
        ("rate = 5\nburst = 0", "rate and burst must be at least 1"),
    ] {
        let text = common::config_text(&tmp.path().join("data"), "")
            .replace("id = \"agent-b\"", &format!("id = \"agent-b\"\n{rate}"));
        let stderr = check_refuses(tmp.path(), &text);
        assert!(
            stderr.contains("principal `agent-b`") && stderr.contains(says),
            "{rate}: {stderr}"
        );
    }
}

/// A client that sends requests and never reads the answers holds its connection only until
/// the answers stop moving for the send timeout; then its slot serves someone else.
#[tokio::test]
async fn a_client_that_never_reads_its_answers_gives_its_connection_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = start(tmp.path(), "connections_max = 1\nsend_timeout = \"300ms\"");
    let stream = connect(&server).await;
    let (_unread, mut writer) = stream.into_split();
    // Pipelined requests, written until the server stops taking them and closes.
    let flood = tokio::spawn(async move {
        let request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1024);
        while writer.write_all(&request).await.is_ok() {}
    });
    // The only slot is taken; once the flooder is cut off, this request is served.
    let answer = server
        .raw()
        .get(format!("{}/healthz", server.base))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("served once the stalled connection is closed");
    assert_eq!(answer.status().as_u16(), 200);
    flood.abort();
    server.stop();
}

/// The soft open-file limit of process `pid`, from `/proc`.
#[cfg(target_os = "linux")]
fn soft_file_limit(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("an open-files line");
    line.split_whitespace()
        .nth(3)
        .expect("soft")
        .parse()
        .expect("a number")
}

/// The pid of a child of `parent`, waited for up to 20 s.
#[cfg(target_os = "linux")]
fn child_of(parent: u32) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        for entry in std::fs::read_dir("/proc").expect("proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid ...: comm may hold spaces, so split after its ')'.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if ppid == Some(&parent.to_string()) {
                return pid;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no child of {parent} started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a node whose gateway runs one stdio upstream, with the open-file limits `soft` and
/// `hard` set in the node before it runs; returns the node's soft limit once it listens, its
/// upstream child's, and the node's stderr.
#[cfg(target_os = "linux")]
fn serve_with_file_limits(dir: &Path, soft: u64, hard: u64) -> (u64, u64, String) {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    std::fs::create_dir_all(dir).expect("dir");
    let config = dir.join("opledger.toml");
    let text = with_limits(dir, "")
        + "\n[mcp]\n[[mcp.upstream]]\nname = \"idle\"\ncommand = [\"sleep\", \"60\"]\n";
    std::fs::write(&config, text).expect("writes config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_opledger"));
    command
        .args(["serve", "--log-level", "info", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit is async-signal-safe and touches nothing but the child's limits.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut child = command.spawn().expect("starts");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (listening_tx, listening_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if line.starts_with("opledger listening on ") {
                let _ = listening_tx.send(());
            }
        }
    });
    let listening = listening_rx.recv_timeout(Duration::from_secs(60));
    let (node, upstream) = match listening {
        Ok(()) => (
            soft_file_limit(child.id()),
            soft_file_limit(child_of(child.id())),
        ),
        Err(_) => (0, 0),
    };
    // A clean stop, which ends the upstream child too: it holds the node's stderr open.
    // SAFETY: kill only sends a signal to the node started above.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let _ = child.wait();
    let mut stderr = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr);
    assert!(
        listening.is_ok(),
        "the node did not start listening\n{stderr}"
    );
    (node, upstream, stderr)
}

/// `serve` raises its soft open-file limit to the hard one, and says so, while the children
/// it starts get the limit it started with; with a hard limit below `connections_max` plus its
/// own files it warns, naming what to do.
#[cfg(target_os = "linux")]
#[test]
fn serve_raises_its_open_file_limit_and_warns_when_even_the_hard_one_is_too_low() {
    let mut ours = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct passed.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut ours) },
        0
    );
    assert!(
        ours.rlim_max >= 2048,
        "this test needs a hard open-file limit of 2048 or more (ulimit -Hn), not {}",
        ours.rlim_max
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // The default connections_max is 1024: 2048 leaves room for the node's own files.
    let (node, upstream, stderr) = serve_with_file_limits(&dir.path().join("a"), 256, 2048);
    assert_eq!(
        node, 2048,
        "the soft limit is raised to the hard one\n{stderr}"
    );
    assert_eq!(
        upstream, 256,
        "a child gets the limit the node started with\n{stderr}"
    );
    assert!(stderr.contains("open-file limit raised"), "{stderr}");
    assert!(!stderr.contains("below connections_max"), "{stderr}");
    let (node, _, stderr) = serve_with_file_limits(&dir.path().join("b"), 256, 1024);
    assert_eq!(node, 1024, "{stderr}");
    assert!(
        stderr.contains("below connections_max") && stderr.contains("ulimit -Hn"),
        "a hard limit below connections_max is said, with what to do\n{stderr}"
    );
}
