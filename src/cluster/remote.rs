//! A partition another node owns, asked over typed peer messages ([`super::peer`]), and the
//! endpoint that answers them on the owner.

use super::peer::{
    self, PEER_MESSAGE_BYTES_MAX, PEER_PATH, PeerKey, PeerRequest, PeerResponse, Refusal, SIGNATURE,
};
use super::router::Router;
use crate::core::event::EventBody;
use crate::core::key::ScopedHash;
use crate::core::operation::OperationRecord;
use crate::partition::{Answer, Lookup, Partition, PartitionError};
use crate::projection::QueueSlice;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// Longest wait for an owner's answer: its own decision wait plus a margin.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(15);

/// How a node asks its peers.
pub struct PeerClient {
    http: reqwest::Client,
    key: PeerKey,
}

impl PeerClient {
    /// A client signing with `key`.
    pub fn new(key: PeerKey) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(PEER_TIMEOUT)
                .build()
                .unwrap_or_default(),
            key,
        }
    }

    async fn ask(
        &self,
        base: &str,
        partition: u32,
        request: &PeerRequest,
    ) -> Result<PeerResponse, PartitionError> {
        let body = peer::encode(request);
        let failed = |what: String| PartitionError::Peer(what);
        let answer = self
            .http
            .post(format!("{base}{PEER_PATH}"))
            .header(SIGNATURE, self.key.sign(&body))
            .body(body)
            .send()
            .await
            .map_err(|e| failed(format!("asking {base}: {e}")))?;
        let status = answer.status();
        let signature = answer
            .headers()
            .get(SIGNATURE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = answer
            .bytes()
            .await
            .map_err(|e| failed(format!("reading {base}'s answer: {e}")))?;
        if !status.is_success() {
            return Err(failed(format!(
                "{base} answered {status}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            )));
        }
        self.key
            .verify(&bytes, signature.as_deref())
            .map_err(|e| failed(format!("{base}: {e}")))?;
        match peer::decode::<PeerResponse>(&bytes) {
            Ok(PeerResponse::Refused(refusal)) => Err(refusal.into_error(partition)),
            Ok(response) => Ok(response),
            Err(e) => Err(failed(format!("{base}: {e}"))),
        }
    }
}

/// A partition served by the node at `base`.
pub struct RemotePartition {
    /// The client.
    pub client: Arc<PeerClient>,
    /// The owner's base address (`http://host:port`).
    pub base: String,
    /// The partition.
    pub partition: u32,
}

fn unexpected(response: PeerResponse) -> PartitionError {
    PartitionError::Peer(format!("the owner answered something else: {response:?}"))
}

impl Partition for RemotePartition {
    fn submit(
        &self,
        scope: ScopedHash,
        body: EventBody,
    ) -> crate::BoxFuture<'_, Result<Answer, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Submit {
                partition: self.partition,
                scope,
                body,
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Decided(answer) => Ok(answer),
                other => Err(unexpected(other)),
            }
        })
    }

    fn read(
        &self,
        lookup: Lookup,
    ) -> crate::BoxFuture<'_, Result<Option<OperationRecord>, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Read {
                partition: self.partition,
                lookup,
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Record(record) => Ok(record),
                other => Err(unexpected(other)),
            }
        })
    }

    fn queue(&self, limit: usize) -> crate::BoxFuture<'_, Result<QueueSlice, PartitionError>> {
        Box::pin(async move {
            let request = PeerRequest::Queue {
                partition: self.partition,
                limit: u32::try_from(limit).unwrap_or(u32::MAX),
            };
            match self
                .client
                .ask(&self.base, self.partition, &request)
                .await?
            {
                PeerResponse::Queue(slice) => Ok(slice),
                other => Err(unexpected(other)),
            }
        })
    }
}

/// What the peer endpoint needs.
pub struct Inbound {
    /// This node's router (only its local partitions answer peers).
    pub router: Arc<Router>,
    /// The cluster's peer secret.
    pub key: PeerKey,
}

/// The peer endpoint's routes, to merge into the node's HTTP server.
pub fn routes(inbound: Arc<Inbound>) -> axum::Router {
    axum::Router::new()
        .route(PEER_PATH, axum::routing::post(answer))
        .layer(axum::extract::DefaultBodyLimit::max(PEER_MESSAGE_BYTES_MAX))
        .with_state(inbound)
}

async fn answer(State(inbound): State<Arc<Inbound>>, headers: HeaderMap, body: Bytes) -> Response {
    let signature = headers.get(SIGNATURE).and_then(|v| v.to_str().ok());
    if let Err(e) = inbound.key.verify(&body, signature) {
        tracing::warn!(error = %e, "refused a peer request");
        return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
    }
    let request = match peer::decode::<PeerRequest>(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let response = serve(&inbound.router, request).await;
    let bytes = peer::encode(&response);
    let signature = inbound.key.sign(&bytes);
    (StatusCode::OK, [(SIGNATURE, signature)], bytes).into_response()
}

/// Serves a peer's request from this node's own partitions only: a node never asks a third.
async fn serve(router: &Router, request: PeerRequest) -> PeerResponse {
    let refused = |e: PartitionError| PeerResponse::Refused(Refusal::of(&e));
    match request {
        PeerRequest::Submit {
            partition,
            scope,
            body,
        } => match router.local(partition) {
            Ok(p) => p
                .submit(scope, body)
                .await
                .map_or_else(refused, PeerResponse::Decided),
            Err(e) => refused(e),
        },
        PeerRequest::Read { partition, lookup } => match router.local(partition) {
            Ok(p) => p
                .read(lookup)
                .await
                .map_or_else(refused, PeerResponse::Record),
            Err(e) => refused(e),
        },
        PeerRequest::Queue { partition, limit } => match router.local(partition) {
            Ok(p) => p
                .queue(limit as usize)
                .await
                .map_or_else(refused, PeerResponse::Queue),
            Err(e) => refused(e),
        },
    }
}
