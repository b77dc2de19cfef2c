//! The operator console through the real binary, at the HTTP level: its page and files with the
//! headers that keep it out of frames and other origins' reach; sign-in that turns an
//! operator's token into an HttpOnly, SameSite=Strict session cookie and is refused to agents;
//! the API taking that cookie only with the console's header; a viewer's session that cannot
//! act; signing out; and neither token nor cookie in any log line. (The page itself, in a real
//! browser: tests/e2e_browser.rs.)

mod common;

use common::{Server, TOKEN_A, TOKEN_B, TOKEN_OPS, send};
use reqwest::header::{HeaderMap, SET_COOKIE};
use serde_json::{Value, json};

const TOKEN_VIEWER: &str = "token-viewer-0004";
const CONSOLE: (&str, &str) = ("X-Opledger-Console", "1");

fn viewer_config() -> String {
    format!(
        "\n[[principal]]\nid = \"viewer-1\"\ntoken = \"{TOKEN_VIEWER}\"\nroles = [\"viewer\"]\n"
    )
}

/// Signs in with `token`: the status, the answer and the headers.
async fn sign_in(server: &Server, token: &str, console: bool) -> (u16, Value, HeaderMap) {
    let mut req = server
        .raw()
        .post(format!("{}/ui/session", server.base))
        .json(&json!({ "token": token }));
    if console {
        req = req.header(CONSOLE.0, CONSOLE.1);
    }
    let answer = req.send().await.expect("answers");
    let (status, headers) = (answer.status().as_u16(), answer.headers().clone());
    let body = answer.json().await.unwrap_or(Value::Null);
    (status, body, headers)
}

/// The cookie a sign-in set, as a browser sends it back (`opledger_ui=…`).
fn cookie_of(headers: &HeaderMap) -> String {
    let set = headers
        .get(SET_COOKIE)
        .expect("a cookie")
        .to_str()
        .expect("text");
    set.split(';').next().expect("a pair").to_owned()
}

async fn with_session(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    cookie: &str,
    console: bool,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = server
        .raw()
        .request(method, format!("{}{path}", server.base))
        .header("Cookie", cookie);
    if console {
        req = req.header(CONSOLE.0, CONSOLE.1);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    send(req).await
}

#[tokio::test]
async fn the_page_and_its_files_forbid_framing_and_foreign_scripts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let client = server.raw();
    let page = client
        .get(format!("{}/ui/", server.base))
        .send()
        .await
        .expect("answers");
    assert_eq!(page.status(), 200);
    let h = page.headers().clone();
    let csp = h["content-security-policy"].to_str().expect("text");
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'self'"),
        "{csp}"
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-store");
    let html = page.text().await.expect("text");
    // The page names its script and stylesheet by their content; each is served for ever.
    let named = |attribute: &str| -> String {
        let start = html.find(attribute).expect("named in the page") + attribute.len();
        let end = start + html[start..].find('"').expect("its end");
        html[start..end].to_owned()
    };
    for (path, kind) in [
        (named("<script src=\""), "text/javascript"),
        (named("<link rel=\"stylesheet\" href=\""), "text/css"),
    ] {
        assert!(path.starts_with("/ui/app."), "{path}");
        let file = client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .expect("answers");
        assert_eq!(file.status(), 200, "{path}");
        let h = file.headers();
        assert!(h["content-type"].to_str().expect("text").starts_with(kind));
        assert!(
            h["cache-control"]
                .to_str()
                .expect("text")
                .contains("immutable")
        );
        assert!(h["content-security-policy"].to_str().is_ok());
    }
    let (status, body) =
        send(client.get(format!("{}/ui/app.0000000000000000.js", server.base))).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("no_route"))
    );
    let bare = client
        .get(format!("{}/ui", server.base))
        .send()
        .await
        .expect("answers");
    assert_eq!(bare.url().path(), "/ui/", "/ui leads to the page");
    server.stop();
}

#[tokio::test]
async fn an_operator_signs_in_acts_through_the_session_and_signs_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_with(dir.path(), &viewer_config(), &[]);
    let id = server.waiting_for_a_person("console-1").await;
    let history_path = format!("/v1/operations/{id}/history");
    let (_, before) = server.get(TOKEN_A, &history_path).await;

    // Sign-in comes only from the console's own script, and never to an agent.
    let (status, body, headers) = sign_in(&server, TOKEN_OPS, false).await;
    assert_eq!((status, headers.get(SET_COOKIE)), (403, None), "{body}");
    let (status, body, headers) = sign_in(&server, TOKEN_B, true).await;
    assert_eq!((status, headers.get(SET_COOKIE)), (403, None), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("a message")
            .contains("the console is for operators"),
        "{body}"
    );
    let (status, _, headers) = sign_in(&server, "not-a-token", true).await;
    assert_eq!((status, headers.get(SET_COOKIE)), (401, None));

    let (status, who, headers) = sign_in(&server, TOKEN_OPS, true).await;
    assert_eq!(status, 200, "{who}");
    assert_eq!(who["principal"], "ops-2", "{who}");
    let set = headers[SET_COOKIE].to_str().expect("text");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(flag), "{flag} missing: {set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: {set}");
    let cookie = cookie_of(&headers);
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    // With the console's header the session reads and acts; without it, nothing.
    let (status, queue) = with_session(
        &server,
        get.clone(),
        "/v1/reconciliation",
        &cookie,
        true,
        None,
    )
    .await;
    assert_eq!((status, queue["count"].clone()), (200, json!(1)), "{queue}");
    let (status, me) = with_session(&server, get.clone(), "/ui/session", &cookie, true, None).await;
    assert_eq!((status, me["principal"].clone()), (200, json!("ops-2")));
    let takeover = format!("/v1/operations/{id}/takeover");
    let (status, refused) = with_session(
        &server,
        post.clone(),
        &takeover,
        &cookie,
        false,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 401, "a cookie alone is not enough: {refused}");
    let (_, after) = server.get(TOKEN_A, &history_path).await;
    assert_eq!(after, before, "nothing appended");
    let reason = "the provider shows no message to +1555";
    let (status, done) = with_session(
        &server,
        post.clone(),
        &takeover,
        &cookie,
        true,
        Some(json!({ "expected_version": before["version"], "reason": reason })),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    let (_, after) = server.get(TOKEN_A, &history_path).await;
    let taken = after["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["type"] == "taken_over")
        .expect("a takeover")
        .clone();
    assert_eq!(taken["event"]["operator"], "ops-2", "{taken}");
    assert_eq!(taken["event"]["reason"], reason, "{taken}");
    assert_eq!(taken["schema_version"], 5, "{taken}");

    // A session never acts as an agent, even for a principal that is one too.
    let (status, _, headers) = sign_in(&server, TOKEN_A, true).await;
    assert_eq!(status, 200);
    let both = cookie_of(&headers);
    let claim = server
        .raw()
        .post(format!("{}/v1/operations", server.base))
        .header("Cookie", &both)
        .header(CONSOLE.0, CONSOLE.1)
        .header("Idempotency-Key", "console-claim")
        .json(
            &json!({"tool": "messages.send", "holder": "w1", "request": {"to": "+1", "text": "x"}}),
        );
    let (status, refused) = send(claim).await;
    assert_eq!(status, 401, "{refused}");
    // Two session cookies are one too many.
    let (status, _) = with_session(
        &server,
        get.clone(),
        "/v1/reconciliation",
        &format!("{cookie}; {both}"),
        true,
        None,
    )
    .await;
    assert_eq!(status, 401);

    // A reason with a control character is refused, and nothing is appended.
    let (status, bad) = with_session(
        &server,
        post.clone(),
        &format!("/v1/operations/{id}/resolve"),
        &cookie,
        true,
        Some(json!({ "outcome": "not_executed", "reason": "two\nlines" })),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    let (_, unchanged) = server.get(TOKEN_A, &history_path).await;
    assert_eq!(unchanged, after);

    // A viewer's session looks and cannot act.
    let (status, _, headers) = sign_in(&server, TOKEN_VIEWER, true).await;
    assert_eq!(status, 200);
    let viewer = cookie_of(&headers);
    let (status, _) = with_session(&server, get.clone(), &history_path, &viewer, true, None).await;
    assert_eq!(status, 200);
    let (status, refused) = with_session(
        &server,
        post.clone(),
        &format!("/v1/operations/{id}/resolve"),
        &viewer,
        true,
        Some(json!({ "outcome": "not_executed" })),
    )
    .await;
    assert_eq!(status, 403, "{refused}");

    // Signed out, the session is gone on the node, not only in the browser.
    let (status, _) = with_session(
        &server,
        reqwest::Method::DELETE,
        "/ui/session",
        &cookie,
        true,
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, gone) = with_session(
        &server,
        get.clone(),
        "/v1/reconciliation",
        &cookie,
        true,
        None,
    )
    .await;
    assert_eq!(status, 401, "{gone}");
    assert!(
        gone["error"]["message"]
            .as_str()
            .expect("a message")
            .contains("sign in again"),
        "{gone}"
    );

    let said = server.stderr() + &server.stdout();
    server.stop();
    for secret in [
        TOKEN_OPS,
        TOKEN_VIEWER,
        TOKEN_B,
        &cookie[cookie.find('=').expect("=") + 1..],
    ] {
        assert!(!said.contains(secret), "a secret in the node's output");
    }
    assert!(said.contains("console session opened"), "{said}");
}

/// The console's data: the charts' samples (this node's decisions by kind, the minute so far
/// last) and the counts and queue answered with ETags, so that polling sends nothing new when
/// nothing changed.
#[tokio::test]
async fn the_charts_count_this_minutes_decisions_and_polls_of_unchanged_answers_are_304() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    for key in ["chart-1", "chart-2", "chart-3"] {
        server.waiting_for_a_person(key).await;
    }
    // A replay of a finished one and a conflict.
    let (_, c) = server
        .claim(
            TOKEN_A,
            "chart-4",
            json!({"tool": "messages.send", "holder": "w1", "request": {"to": "+1", "text": "a"}}),
        )
        .await;
    let id = c["operation_id"].as_str().expect("id").to_owned();
    server.complete(TOKEN_A, &id, "w1", "m-1").await;
    let again =
        json!({"tool": "messages.send", "holder": "w1", "request": {"to": "+1", "text": "a"}});
    assert_eq!(server.claim(TOKEN_A, "chart-4", again).await.0, 200);
    let other =
        json!({"tool": "messages.send", "holder": "w1", "request": {"to": "+1", "text": "b"}});
    assert_eq!(server.claim(TOKEN_A, "chart-4", other).await.0, 422);

    let (status, history) = server.get(TOKEN_OPS, "/v1/summary/history").await;
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["interval_seconds"], 60);
    let now = history["samples"]
        .as_array()
        .expect("samples")
        .last()
        .expect("the minute so far")
        .clone();
    assert_eq!(now["partial"], true, "{history}");
    // Unless the minute turned in between, this minute holds every decision above.
    let samples = history["samples"].as_array().expect("samples");
    let total = |kind: &str| {
        samples
            .iter()
            .map(|s| s[kind].as_u64().expect("a count"))
            .sum::<u64>()
    };
    assert_eq!(
        (
            total("execute"),
            total("replay"),
            total("conflict"),
            total("unknown")
        ),
        (4, 1, 1, 3),
        "{history}"
    );
    let (status, _) = server.get(TOKEN_B, "/v1/summary/history").await;
    assert_eq!(status, 403, "an agent sees no fleet-wide figures");

    for path in ["/v1/summary", "/v1/reconciliation"] {
        let first = server
            .raw()
            .get(format!("{}{path}", server.base))
            .bearer_auth(TOKEN_OPS)
            .send()
            .await
            .expect("answers");
        assert_eq!(first.status(), 200);
        let tag = first.headers()["etag"].to_str().expect("text").to_owned();
        let again = server
            .raw()
            .get(format!("{}{path}", server.base))
            .bearer_auth(TOKEN_OPS)
            .header("If-None-Match", &tag)
            .send()
            .await
            .expect("answers");
        assert_eq!(again.status(), 304, "{path}");
        assert!(again.bytes().await.expect("body").is_empty());
    }
    // A change is a new answer.
    server.waiting_for_a_person("chart-5").await;
    let (status, queue) = server.get(TOKEN_OPS, "/v1/reconciliation").await;
    assert_eq!((status, queue["count"].clone()), (200, json!(4)));
    server.stop();
}
