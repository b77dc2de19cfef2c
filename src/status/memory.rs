//! An in-memory external system answering status queries (`test-support` feature): a test
//! scripts what it says about each operation; its answers are rendered as the HTTP answer a
//! real system would give and read by the same [`interpret`], so it means what an HTTP client
//! would make of the same answer (the conformance suite checks that).

use super::interpret::{inconclusive, interpret};
use super::{StatusClient, status_url};
use crate::core::contract::ToolContract;
use crate::core::event::Evidence;
use crate::core::key::OperationId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What an external system says about one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scripted {
    /// 200 `succeeded`.
    Succeeded {
        /// The resource.
        resource_ref: String,
        /// Its version, if the system reports one.
        version: Option<String>,
        /// The key fields it reports, as JSON text.
        fields: Option<String>,
    },
    /// 200 `failed`.
    Failed {
        /// The external error code.
        code: String,
    },
    /// 404: never accepted (also what it says about an operation nobody scripted).
    Absent,
    /// 429, with `Retry-After` seconds if given.
    RateLimited {
        /// `Retry-After`, seconds.
        retry_after_s: Option<u64>,
    },
    /// Another HTTP status with an empty body.
    Status(u16),
    /// 200 with this body (for malformed answers).
    Body(Vec<u8>),
    /// No answer at all: the client times out.
    Silent,
}

impl Scripted {
    /// The HTTP answer: status, `Retry-After`, body. `None` for [`Scripted::Silent`].
    pub fn render(&self) -> Option<(u16, Option<String>, Vec<u8>)> {
        Some(match self {
            Self::Succeeded {
                resource_ref,
                version,
                fields,
            } => {
                let mut answer =
                    serde_json::json!({"state": "succeeded", "resource_ref": resource_ref});
                if let Some(v) = version {
                    answer["version"] = serde_json::json!(v);
                }
                if let Some(f) = fields {
                    answer["fields"] = serde_json::from_str(f).unwrap_or(serde_json::Value::Null);
                }
                (200, None, answer.to_string().into_bytes())
            }
            Self::Failed { code } => (
                200,
                None,
                serde_json::json!({"state": "failed", "code": code})
                    .to_string()
                    .into_bytes(),
            ),
            Self::Absent => (404, None, Vec::new()),
            Self::RateLimited { retry_after_s } => {
                (429, retry_after_s.map(|s| s.to_string()), Vec::new())
            }
            Self::Status(status) => (*status, None, Vec::new()),
            Self::Body(body) => (200, None, body.clone()),
            Self::Silent => return None,
        })
    }

    /// What a status client makes of this answer: rendered as HTTP and read by
    /// [`interpret`], as a real client reads the same answer (no answer is a timeout).
    pub fn evidence(&self, spec: &crate::core::fingerprint::FingerprintSpec) -> Evidence {
        match self.render() {
            Some((_, _, body)) if body.len() > super::interpret::STATUS_BODY_BYTES_MAX => {
                inconclusive("answer_too_large", None)
            }
            Some((status, retry_after, body)) => {
                interpret(status, retry_after.as_deref(), &body, spec)
            }
            None => inconclusive("timeout", None),
        }
    }
}

/// The in-memory external system and its client in one.
#[derive(Default)]
pub struct MemoryStatus {
    answers: Mutex<HashMap<OperationId, Scripted>>,
    /// Status URLs asked, in order (what a real system's access log would show).
    asked: Mutex<Vec<String>>,
    queries: AtomicU64,
}

impl MemoryStatus {
    /// Scripts what the system says about `id` from now on.
    pub fn script(&self, id: OperationId, answer: Scripted) {
        lock(&self.answers).insert(id, answer);
    }

    /// How many queries reached the system.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::SeqCst)
    }

    /// The URLs asked, in order.
    pub fn asked(&self) -> Vec<String> {
        lock(&self.asked).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StatusClient for MemoryStatus {
    fn query<'a>(
        &'a self,
        contract: &'a ToolContract,
        id: OperationId,
    ) -> crate::BoxFuture<'a, Evidence> {
        Box::pin(async move {
            let Some(template) = contract.status_url.as_deref() else {
                return inconclusive("no_status_url", None);
            };
            self.queries.fetch_add(1, Ordering::SeqCst);
            lock(&self.asked).push(status_url(template, id));
            let answer = lock(&self.answers)
                .get(&id)
                .cloned()
                .unwrap_or(Scripted::Absent);
            answer.evidence(&contract.fingerprint)
        })
    }
}
