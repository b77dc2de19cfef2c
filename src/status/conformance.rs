//! The conformance suite every [`StatusClient`] passes, and a scripted external system over
//! HTTP for the HTTP client to be checked against.
//!
//! Each check scripts what the external system says about a fresh operation and asserts the
//! evidence the client reports. The suite takes the client, a way to script its system, and the
//! `status_url` template that reaches that system.

use super::StatusClient;
use super::interpret::VERSION_HEADER;
use super::memory::Scripted;
use crate::core::contract::{LossLevel, ToolClass, ToolContract};
use crate::core::event::Evidence;
use crate::core::fingerprint::{Category, FingerprintSpec, fingerprint_v1};
use crate::core::key::OperationId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A queryable payment tool whose amount and recipient enter the fingerprint.
pub fn contract(status_url: Option<&str>) -> ToolContract {
    let mut fingerprint = FingerprintSpec::default();
    fingerprint
        .fields
        .insert(Category::Amount, vec!["amount".into(), "currency".into()]);
    fingerprint
        .fields
        .insert(Category::Recipient, vec!["customer".into()]);
    ToolContract {
        name: "payments.charge".into(),
        class: ToolClass::Keyed,
        loss: LossLevel::High,
        lease_ms: 30_000,
        retention_ms: 3_600_000,
        status_url: status_url.map(str::to_owned),
        compensation: None,
        accept_unknown_risk: false,
        fingerprint,
    }
}

fn id(n: u8) -> OperationId {
    OperationId([n; 16])
}

fn inconclusive(reason: &str, retry_after_ms: Option<u64>) -> Evidence {
    Evidence::Inconclusive {
        reason: reason.into(),
        retry_after_ms,
    }
}

/// Runs every check. `script` sets what the system behind `url_template` says about an
/// operation. The client's timeout must be short (the silent system is waited out).
pub async fn run_all(
    client: &dyn StatusClient,
    script: impl Fn(OperationId, Scripted),
    url_template: &str,
) {
    let tool = contract(Some(url_template));
    let ask = |n: u8| client.query(&tool, id(n));

    script(
        id(1),
        Scripted::Succeeded {
            resource_ref: "ch_1".into(),
            version: Some("v3".into()),
            fields: Some(r#"{"amount":"10.50","currency":"EUR"}"#.into()),
        },
    );
    let Evidence::Found { result, fields } = ask(1).await else {
        panic!("a succeeded answer is evidence that the effect exists");
    };
    assert_eq!(result.resource_ref, "ch_1");
    assert_eq!(result.status, 200);
    assert_eq!(
        result.headers.get(VERSION_HEADER).map(String::as_str),
        Some("v3")
    );
    let intent = fingerprint_v1(
        &tool.fingerprint,
        &serde_json::json!({"amount": "10.5", "currency": "EUR", "customer": "c-1"}),
        None,
    )
    .expect("fingerprints");
    let fields = fields.expect("reported fields are fingerprinted");
    assert_eq!(
        fields.parts.len(),
        1,
        "only the reported category is compared"
    );
    assert_eq!(Some(&fields.parts[0].1), intent.part(Category::Amount));

    script(
        id(2),
        Scripted::Failed {
            code: "declined".into(),
        },
    );
    assert_eq!(
        ask(2).await,
        Evidence::Failed {
            code: "declined".into()
        }
    );

    script(id(3), Scripted::Absent);
    assert_eq!(ask(3).await, Evidence::Absent);
    // Nobody scripted 4: the system never heard of it.
    assert_eq!(ask(4).await, Evidence::Absent);

    script(
        id(5),
        Scripted::RateLimited {
            retry_after_s: Some(7),
        },
    );
    assert_eq!(ask(5).await, inconclusive("rate_limited", Some(7_000)));

    script(id(6), Scripted::Status(503));
    assert_eq!(ask(6).await, inconclusive("http_503", None));

    script(id(7), Scripted::Body(b"not json".to_vec()));
    assert_eq!(ask(7).await, inconclusive("malformed_answer", None));

    script(id(8), Scripted::Silent);
    assert_eq!(ask(8).await, inconclusive("timeout", None));

    script(
        id(9),
        Scripted::Body(vec![b' '; super::interpret::STATUS_BODY_BYTES_MAX + 1]),
    );
    assert_eq!(ask(9).await, inconclusive("answer_too_large", None));

    let unqueryable = contract(None);
    assert_eq!(
        client.query(&unqueryable, id(1)).await,
        inconclusive("no_status_url", None)
    );
}

/// An external system on loopback that answers `GET /status/{operation_id}` as scripted.
pub struct ScriptedServer {
    /// Its address.
    pub addr: std::net::SocketAddr,
    answers: Arc<Mutex<HashMap<String, Scripted>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        use axum::extract::{Path, State};
        use axum::response::IntoResponse;
        type Answers = Arc<Mutex<HashMap<String, Scripted>>>;
        async fn status(
            State(answers): State<Answers>,
            Path(id): Path<String>,
        ) -> axum::response::Response {
            let answer = answers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id)
                .cloned()
                .unwrap_or(Scripted::Absent);
            let Some((status, retry_after, body)) = answer.render() else {
                // Never answers; the client's timeout ends the wait.
                return std::future::pending().await;
            };
            let mut response = (
                axum::http::StatusCode::from_u16(status)
                    .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
                body,
            )
                .into_response();
            if let Some(after) = retry_after.and_then(|a| a.parse().ok()) {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, after);
            }
            response
        }
        let answers: Answers = Arc::default();
        let app = axum::Router::new()
            .route("/status/{id}", axum::routing::get(status))
            .with_state(answers.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds a loopback port");
        let addr = listener.local_addr().expect("has an address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            answers,
            task,
        }
    }

    /// The `status_url` template that reaches it.
    pub fn url_template(&self) -> String {
        format!("http://{}/status/{{operation_id}}", self.addr)
    }

    /// Scripts what it says about `id`.
    pub fn script(&self, id: OperationId, answer: Scripted) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::http::HttpStatusClient;
    use crate::status::memory::MemoryStatus;
    use std::time::Duration;

    #[tokio::test]
    async fn the_http_client_passes_the_conformance_suite() {
        let server = ScriptedServer::start().await;
        let client = HttpStatusClient::new(Duration::from_millis(300));
        run_all(
            &client,
            |id, a| server.script(id, a),
            &server.url_template(),
        )
        .await;
    }

    #[tokio::test]
    async fn the_memory_system_passes_the_conformance_suite() {
        let system = MemoryStatus::default();
        run_all(
            &system,
            |id, a| system.script(id, a),
            "mem://status/{operation_id}",
        )
        .await;
        assert!(
            system
                .asked()
                .contains(&format!("mem://status/{}", OperationId([1; 16]))),
            "it asks about the operation's own id"
        );
    }

    #[tokio::test]
    async fn an_unreachable_system_is_inconclusive() {
        // Port 9 (discard) on loopback: nothing listens.
        let client = HttpStatusClient::new(Duration::from_millis(300));
        let tool = contract(Some("http://127.0.0.1:9/status/{operation_id}"));
        assert_eq!(
            client.query(&tool, id(1)).await,
            inconclusive("unreachable", None)
        );
    }
}
