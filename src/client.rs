//! A Rust client of the HTTP API (v1): what an agent written in Rust uses to claim, report and
//! read operations, with every answer typed. The demo's fleet talks to its node through it.
//!
//! ```no_run
//! # async fn charge() -> Result<(), opledger::client::ClientError> {
//! use opledger::client::{Answer, Client, Claim, Outcome};
//! let ledger = Client::new("http://127.0.0.1:7070", "a-long-secret-token");
//! let request = serde_json::json!({"amount": "10.50", "customer": "c-7"});
//! let claim = Claim { tool: "payments.charge", key: "order-42", holder: "worker-1", request: &request };
//! match ledger.claim(&claim).await? {
//!     Answer::Execute(op) => {
//!         // … call the provider with op.operation_id as its idempotency key, then:
//!         ledger.report(&op.operation_id, "worker-1", Outcome::Complete { resource_ref: "ch_1", status: 201 }).await?;
//!     }
//!     Answer::Replay(op) => println!("already done: {:?}", op.resource_ref),
//!     other => println!("do not execute: {}", other.decision()),
//! }
//! # Ok(()) }
//! ```

use serde_json::{Value, json};
use std::time::Duration;

/// A client of one node's HTTP API, as one principal.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// A claim: the intent to run `tool` once for `key`.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The client's idempotency key.
    pub key: &'a str,
    /// The worker asking to execute.
    pub holder: &'a str,
    /// The business request (its fingerprint decides replay or conflict).
    pub request: &'a Value,
}

/// An operation as an answer shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Its id: the external system's idempotency key.
    pub operation_id: String,
    /// Its state (`processing`, `completed`, …).
    pub state: String,
    /// Its version.
    pub version: u64,
    /// A completed operation's result reference.
    pub resource_ref: Option<String>,
}

/// The ledger's answer to a claim or a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Execute now, then report.
    Execute(Operation),
    /// Finished before: its result.
    Replay(Operation),
    /// Another worker executes it: do not.
    InProgress(Operation),
    /// Nobody knows whether it happened: do not execute.
    OutcomeUnknown(Operation),
    /// An operator handles it: do not execute.
    Manual(Operation),
    /// Same key, another request: the categories that differ.
    Conflict(Operation, Vec<String>),
    /// The key's record expired: a new intent needs a new key.
    KeyExpired(Operation),
    /// A report was applied, or repeated one already applied.
    Accepted(Operation),
    /// A report was refused: the rejection code.
    Rejected(Option<Operation>, String),
    /// A read tool: nothing is recorded.
    NotRecorded,
}

impl Answer {
    /// The decision's code, as the API names it.
    pub fn decision(&self) -> &'static str {
        match self {
            Self::Execute(_) => "execute",
            Self::Replay(_) => "replay",
            Self::InProgress(_) => "in_progress",
            Self::OutcomeUnknown(_) => "outcome_unknown",
            Self::Manual(_) => "manual",
            Self::Conflict(..) => "conflict",
            Self::KeyExpired(_) => "key_expired",
            Self::Accepted(_) => "accepted",
            Self::Rejected(..) => "rejected",
            Self::NotRecorded => "not_recorded",
        }
    }
}

/// What an executor reports.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// The side effect happened.
    Complete {
        /// The resource it created or changed.
        resource_ref: &'a str,
        /// The business status.
        status: u16,
    },
    /// It definitely failed (`not_accepted`: provably never accepted, so the key is free).
    Fail {
        /// Whether the external system provably never accepted it.
        not_accepted: bool,
        /// The business error code.
        code: &'a str,
    },
    /// Nobody knows whether it happened.
    Unknown,
}

/// Why a call has no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API refused the request (`error.code`); `retriable` says whether the same request
    /// may be sent again as it was.
    #[error("{status} {code}: {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The API's error code.
        code: String,
        /// What to do about it.
        message: String,
        /// Safe to send again unchanged.
        retriable: bool,
    },
    /// The node could not be reached, or its answer not read: the request may or may not have
    /// arrived; sending the same claim again is safe (it replays or conflicts).
    #[error("no answer from the node: {0}")]
    Transport(#[from] reqwest::Error),
    /// An answer that is not the API's.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
}

impl Client {
    /// A client of the node at `base` (`http://host:port`, or `https://` with the system's
    /// roots) with bearer `token`.
    pub fn new(base: &str, token: &str) -> Self {
        let http = Self::http().build().unwrap_or_default();
        Self::with_http(base, token, http)
    }

    /// Like [`new`](Self::new), also trusting the PEM certificates in `pem` (a node with a
    /// certificate of its own CA, or a self-signed one).
    pub fn with_roots(base: &str, token: &str, pem: &[u8]) -> Result<Self, ClientError> {
        let roots = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ClientError::Unexpected(format!("not PEM certificates: {e}")))?;
        let http = Self::http().tls_certs_merge(roots).build()?;
        Ok(Self::with_http(base, token, http))
    }

    fn http() -> reqwest::ClientBuilder {
        reqwest::Client::builder().timeout(Duration::from_secs(30))
    }

    fn with_http(base: &str, token: &str, http: reqwest::Client) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http,
        }
    }

    /// Claims an operation: create-or-return.
    pub async fn claim(&self, claim: &Claim<'_>) -> Result<Answer, ClientError> {
        let body = json!({"tool": claim.tool, "holder": claim.holder, "request": claim.request});
        let request = self
            .http
            .post(format!("{}/v1/operations", self.base))
            .header("idempotency-key", claim.key)
            .json(&body);
        self.send(request).await
    }

    /// Claims many operations in one request (at most 1,000): one result per claim, in order,
    /// each what [`claim`](Self::claim) would have answered it alone — a refusal of one claim
    /// is its own `Err` and never fails the others. The whole call fails only when the batch
    /// itself is refused or has no answer (then sending it again is safe).
    pub async fn claim_many(
        &self,
        claims: &[Claim<'_>],
    ) -> Result<Vec<Result<Answer, ClientError>>, ClientError> {
        let intents: Vec<Value> = claims
            .iter()
            .map(
                |c| json!({"key": c.key, "tool": c.tool, "holder": c.holder, "request": c.request}),
            )
            .collect();
        self.batch(
            "/v1/operations/batch",
            json!({ "intents": intents }),
            claims.len(),
        )
        .await
    }

    /// Reports on many operations in one request (at most 1,000; each `(id, holder, outcome)`):
    /// one result per report, in order, each what [`report`](Self::report) would have
    /// answered it alone.
    pub async fn report_many(
        &self,
        reports: &[(&str, &str, Outcome<'_>)],
    ) -> Result<Vec<Result<Answer, ClientError>>, ClientError> {
        let items: Vec<Value> = reports
            .iter()
            .map(|(id, holder, outcome)| {
                let (kind, mut body) = report_body(holder, *outcome);
                body["operation_id"] = json!(id);
                body["report"] = json!(kind);
                body
            })
            .collect();
        self.batch(
            "/v1/reports/batch",
            json!({ "reports": items }),
            reports.len(),
        )
        .await
    }

    /// Sends a batch of `count` items to `path`: one result per item, in order.
    async fn batch(
        &self,
        path: &str,
        body: Value,
        count: usize,
    ) -> Result<Vec<Result<Answer, ClientError>>, ClientError> {
        let request = self.http.post(format!("{}{path}", self.base)).json(&body);
        let (_, value) = self.exchange(request).await?;
        let results = value["results"]
            .as_array()
            .filter(|r| r.len() == count)
            .ok_or_else(|| {
                ClientError::Unexpected("a batch answer without one result per item".into())
            })?;
        Ok(results.iter().map(result_of).collect())
    }

    /// Reports what happened to operation `id` as its holder.
    pub async fn report(
        &self,
        id: &str,
        holder: &str,
        outcome: Outcome<'_>,
    ) -> Result<Answer, ClientError> {
        let (path, body) = report_body(holder, outcome);
        let request = self
            .http
            .post(format!("{}/v1/operations/{id}/{path}", self.base))
            .json(&body);
        self.send(request).await
    }

    /// Reads operation `id`.
    pub async fn get(&self, id: &str) -> Result<Operation, ClientError> {
        let request = self.http.get(format!("{}/v1/operations/{id}", self.base));
        let (_, value) = self.exchange(request).await?;
        operation(&value).ok_or_else(|| ClientError::Unexpected(value.to_string()))
    }

    /// `GET path` (with its query), the answer's JSON as it came: for tools that show it, such
    /// as `opledger ops`.
    pub async fn get_json(&self, path: &str) -> Result<(u16, Value), ClientError> {
        self.exchange(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    /// `POST path` with a JSON body, the answer's JSON as it came (a decision of `rejected`
    /// included: it is an answer, not an error).
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<(u16, Value), ClientError> {
        self.exchange(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, ClientError> {
        let (_, value) = self.exchange(request).await?;
        answer(&value).ok_or_else(|| ClientError::Unexpected(value.to_string()))
    }

    /// Sends with the token; an API error becomes [`ClientError::Refused`].
    async fn exchange(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<(u16, Value), ClientError> {
        let response = request.bearer_auth(&self.token).send().await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        // A proxy's page, or nothing: the API always answers JSON.
        let value: Value = serde_json::from_slice(&bytes).map_err(|_| {
            ClientError::Unexpected(format!(
                "HTTP {status} with {} bytes that are not the API's JSON (is the URL the node's?)",
                bytes.len()
            ))
        })?;
        if let Some(error) = value.get("error") {
            let text = |k: &str| error[k].as_str().unwrap_or_default().to_owned();
            return Err(ClientError::Refused {
                status,
                code: text("code"),
                message: text("message"),
                retriable: error["retriable"].as_bool().unwrap_or(false),
            });
        }
        // Only a decision (a 409 `rejected`, say) may come with a status that is not a success.
        if !(200..300).contains(&status) && value.get("decision").is_none() {
            return Err(ClientError::Unexpected(format!(
                "HTTP {status} without the API's error or decision"
            )));
        }
        Ok((status, value))
    }
}

/// A report's endpoint (`complete`, `fail`, `unknown`) and its body.
fn report_body(holder: &str, outcome: Outcome<'_>) -> (&'static str, Value) {
    match outcome {
        Outcome::Complete {
            resource_ref,
            status,
        } => (
            "complete",
            json!({"holder": holder, "result": {"resource_ref": resource_ref, "status": status}}),
        ),
        Outcome::Fail { not_accepted, code } => (
            "fail",
            json!({"holder": holder, "kind": if not_accepted { "not_accepted" } else { "definite" }, "code": code}),
        ),
        Outcome::Unknown => ("unknown", json!({ "holder": holder })),
    }
}

/// One result of a batch: its answer, or its refusal.
fn result_of(v: &Value) -> Result<Answer, ClientError> {
    if let Some(error) = v.get("error") {
        let text = |k: &str| error[k].as_str().unwrap_or_default().to_owned();
        return Err(ClientError::Refused {
            status: v["status"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(0),
            code: text("code"),
            message: text("message"),
            retriable: error["retriable"].as_bool().unwrap_or(false),
        });
    }
    answer(v).ok_or_else(|| ClientError::Unexpected(v.to_string()))
}

fn operation(v: &Value) -> Option<Operation> {
    Some(Operation {
        operation_id: v["operation_id"].as_str()?.to_owned(),
        state: v["state"].as_str()?.to_owned(),
        version: v["version"].as_u64()?,
        resource_ref: v["result"]["resource_ref"].as_str().map(str::to_owned),
    })
}

/// The typed answer of a decision's JSON.
fn answer(v: &Value) -> Option<Answer> {
    let decision = v["decision"].as_str()?;
    if decision == "not_recorded" {
        return Some(Answer::NotRecorded);
    }
    if decision == "rejected" {
        let code = v["rejection"]["code"].as_str()?.to_owned();
        return Some(Answer::Rejected(operation(v), code));
    }
    let op = operation(v)?;
    Some(match decision {
        "execute" => Answer::Execute(op),
        "replay" => Answer::Replay(op),
        "in_progress" => Answer::InProgress(op),
        "outcome_unknown" => Answer::OutcomeUnknown(op),
        "manual" => Answer::Manual(op),
        "key_expired" => Answer::KeyExpired(op),
        "accepted" | "unchanged" => Answer::Accepted(op),
        "conflict" => {
            let categories = v["conflict"]
                .as_array()?
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            Answer::Conflict(op, categories)
        }
        _ => return None,
    })
}
