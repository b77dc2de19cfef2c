//! TLS on the listener, with clients nobody here wrote: openssl makes the certificate, curl
//! talks to the real binary over HTTPS (and fails without trusting the certificate, or in
//! plain HTTP); `check` refuses certificates that cannot serve, naming the file.

mod common;

use common::{Server, TOKEN_A};
use std::path::Path;
use std::process::Command;

/// A self-signed certificate for 127.0.0.1 and its key, made by openssl.
fn certificate(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    certificate_with(dir, name, &[])
}

/// Like [`certificate`], with more `-addext` extensions.
fn certificate_with(
    dir: &Path,
    name: &str,
    extensions: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=opledger-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(extensions.iter().flat_map(|e| ["-addext", e]))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("runs openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

fn tls_section(cert: &Path, key: &Path) -> String {
    format!(
        "\n[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    )
}

fn curl(args: &[&str]) -> std::process::Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("runs curl")
}

#[test]
fn curl_claims_over_tls_and_plain_http_or_an_untrusted_certificate_get_nowhere() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(tmp.path(), "server");
    let server = Server::start_with(tmp.path(), &tls_section(&cert, &key), &[]);
    assert!(server.base.starts_with("https://"), "{}", server.base);
    let cacert = cert.to_str().expect("utf-8");
    let health = curl(&["--cacert", cacert, &format!("{}/healthz", server.base)]);
    assert_eq!(String::from_utf8_lossy(&health.stdout), "ok\n");
    let claim = curl(&[
        "--cacert",
        cacert,
        "-H",
        &format!("Authorization: Bearer {TOKEN_A}"),
        "-H",
        "Idempotency-Key: tls-1",
        "-H",
        "Content-Type: application/json",
        "--data",
        r#"{"tool":"payments.charge","holder":"w","request":{"amount":"3","currency":"EUR","customer":"c"}}"#,
        "-w",
        "\n%{http_code}",
        &format!("{}/v1/operations", server.base),
    ]);
    let answer = String::from_utf8_lossy(&claim.stdout);
    assert!(
        answer.ends_with("\n201") && answer.contains("\"execute\""),
        "{answer} {}",
        String::from_utf8_lossy(&claim.stderr)
    );
    // Over TLS the console's session cookie is marked Secure: a browser never sends it in the
    // clear.
    let signin = curl(&[
        "--cacert",
        cacert,
        "-i",
        "-H",
        "X-Opledger-Console: 1",
        "-H",
        "Content-Type: application/json",
        "--data",
        &format!(r#"{{"token":"{TOKEN_A}"}}"#),
        &format!("{}/ui/session", server.base),
    ]);
    let head = String::from_utf8_lossy(&signin.stdout).to_lowercase();
    let cookie = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie: {head}"));
    assert!(
        cookie.contains("; secure") && cookie.contains("httponly"),
        "{cookie}"
    );
    let untrusted = curl(&[&format!("{}/healthz", server.base)]);
    assert!(
        !untrusted.status.success(),
        "an unknown certificate is not trusted"
    );
    let plain = server.base.replace("https://", "http://");
    let cleartext = curl(&[&format!("{plain}/healthz")]);
    assert!(
        !cleartext.status.success() || !String::from_utf8_lossy(&cleartext.stdout).contains("ok"),
        "plain HTTP is not answered"
    );
    // The node still serves over TLS: the refusals above were about the clients.
    let again = curl(&["--cacert", cacert, &format!("{}/healthz", server.base)]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), "ok\n");
    server.stop();
}

#[test]
fn check_refuses_certificates_that_cannot_serve_and_tls_on_kafka() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(tmp.path(), "one");
    let (_, other_key) = certificate(tmp.path(), "two");
    let garbage = tmp.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").expect("writes");
    let missing = tmp.path().join("missing.pem");
    let data = tmp.path().join("data");
    // The keys' base64 lines, which no message may contain.
    let key_lines: Vec<String> = [&key, &other_key]
        .iter()
        .flat_map(|k| {
            let text = std::fs::read_to_string(k).expect("reads the key");
            text.lines().map(str::to_owned).collect::<Vec<_>>()
        })
        .filter(|l| !l.starts_with("-----") && l.len() > 16)
        .collect();
    assert!(!key_lines.is_empty());
    let kafka = common::kafka_log("127.0.0.1:9", "tls", 4);
    for (text, says) in [
        (common::config_text(&data, &tls_section(&cert, &key)), "ok"),
        (
            common::config_text(&data, &tls_section(&garbage, &key)),
            "[tls] cert = ",
        ),
        (
            common::config_text(&data, &tls_section(&cert, &missing)),
            "[tls] key = ",
        ),
        (
            common::config_text(&data, &tls_section(&cert, &other_key)),
            "do not go together",
        ),
        (
            common::config_text_log(&data, &kafka, &tls_section(&cert, &key)),
            "[tls] works on the embedded backend only",
        ),
    ] {
        let config = tmp.path().join("opledger.toml");
        std::fs::write(&config, &text).expect("writes");
        let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["check", "--config"])
            .arg(&config)
            .output()
            .expect("runs check");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.success(), says == "ok", "{said}");
        assert!(said.contains(says), "{says}: {said}");
        assert!(
            !key_lines.iter().any(|l| said.contains(l.as_str())),
            "never a key's bytes: {said}"
        );
    }
}

/// A client that opens a connection and never starts the handshake is dropped after the
/// header timeout, as on plain HTTP.
#[test]
fn a_silent_connection_never_gets_past_the_handshake_timeout() {
    use std::io::Read;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(tmp.path(), "server");
    std::fs::create_dir_all(tmp.path()).expect("dir");
    let text = common::config_text(&tmp.path().join("data"), &tls_section(&cert, &key)).replace(
        "[limits]\nbody_bytes_max = 4096",
        "[limits]\nbody_bytes_max = 4096\nheader_read_timeout = \"300ms\"",
    );
    assert!(text.contains("300ms"));
    let config = tmp.path().join("opledger.toml");
    std::fs::write(&config, text).expect("writes");
    let server = Server::start_existing(tmp.path(), &config);
    let addr = server.base.trim_start_matches("https://").to_owned();
    let mut silent = std::net::TcpStream::connect(&addr).expect("connects");
    silent
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let mut buf = [0u8; 64];
    let read = silent.read(&mut buf);
    assert!(
        matches!(read, Ok(0))
            || matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "closed by the server, not by the read timeout: {read:?}"
    );
    server.stop();
}

/// `serve --log kafka` cannot get around the refusal `check` gives a Kafka config with TLS.
#[test]
fn serve_refuses_tls_when_the_command_line_switches_to_kafka() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(tmp.path(), "server");
    let config = tmp.path().join("opledger.toml");
    let text = common::config_text(&tmp.path().join("data"), &tls_section(&cert, &key));
    std::fs::write(&config, text).expect("writes");
    let out = Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--log", "kafka", "--brokers", "127.0.0.1:9"])
        .output()
        .expect("runs serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("[tls] works on the embedded backend only"),
        "{stderr}"
    );
    assert!(
        !tmp.path().join("data").exists(),
        "refused before anything was created"
    );
}

/// `opledger ops` reaches a node over TLS when told to trust its certificate, and says why
/// not when it is not.
#[test]
fn ops_reaches_a_tls_node_with_its_certificate_trusted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Not a CA's (openssl's default): rustls's verifier takes no CA certificate for a server.
    let (cert, key) = certificate_with(
        tmp.path(),
        "server",
        &["basicConstraints=critical,CA:FALSE"],
    );
    let server = Server::start_with(tmp.path(), &tls_section(&cert, &key), &[]);
    let ops = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_opledger"))
            .args(["ops", "tools", "--url", &server.base])
            .args(extra)
            .env("OPLEDGER_TOKEN", TOKEN_A)
            .output()
            .expect("runs opledger ops")
    };
    let trusted = ops(&["--ca-file", cert.to_str().expect("utf-8")]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    assert!(String::from_utf8_lossy(&trusted.stdout).contains("payments.charge"));
    let untrusted = ops(&[]);
    assert_eq!(untrusted.status.code(), Some(1));
    let said = String::from_utf8_lossy(&untrusted.stderr);
    assert!(
        said.to_lowercase().contains("certificate"),
        "the cause is said: {said}"
    );
    server.stop();
}
