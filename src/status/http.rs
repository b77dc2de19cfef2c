//! The status client over HTTP (reqwest), with a bounded timeout and a bounded answer size.

use super::interpret::{STATUS_BODY_BYTES_MAX, inconclusive, interpret};
use super::{StatusClient, status_url};
use crate::core::contract::ToolContract;
use crate::core::event::Evidence;
use crate::core::key::OperationId;
use std::time::Duration;

/// Asks `status_url`s over HTTP.
#[derive(Clone)]
pub struct HttpStatusClient {
    client: reqwest::Client,
}

impl HttpStatusClient {
    /// A client whose every query ends within `timeout`.
    pub fn new(timeout: Duration) -> Self {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            // Building fails only without a TLS backend or resolver, which this build has.
            .unwrap_or_default();
        Self { client }
    }

    async fn ask(&self, template: &str, contract: &ToolContract, id: OperationId) -> Evidence {
        let response = match self.client.get(status_url(template, id)).send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return inconclusive("timeout", None),
            Err(_) => return inconclusive("unreachable", None),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut response = response;
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if body.len() + chunk.len() <= STATUS_BODY_BYTES_MAX => {
                    body.extend_from_slice(&chunk);
                }
                // An answer this large is not a status answer; read no further.
                Ok(Some(_)) => return inconclusive("answer_too_large", None),
                Ok(None) => break,
                Err(e) if e.is_timeout() => return inconclusive("timeout", None),
                Err(_) => return inconclusive("body_unreadable", None),
            }
        }
        interpret(status, retry_after.as_deref(), &body, &contract.fingerprint)
    }
}

impl StatusClient for HttpStatusClient {
    fn query<'a>(
        &'a self,
        contract: &'a ToolContract,
        id: OperationId,
    ) -> crate::BoxFuture<'a, Evidence> {
        Box::pin(async move {
            match contract.status_url.as_deref() {
                Some(template) => self.ask(template, contract, id).await,
                None => inconclusive("no_status_url", None),
            }
        })
    }
}
