//! The peer endpoint: where a partition's owner answers other nodes' signed peer messages
//! from its local partitions.

use super::auth::{PeerKey, ReplayGuard};
use super::peer::{
    self, NONCE, PEER_PATH, PEER_REQUEST_BYTES_MAX, PeerRequest, PeerResponse, Refusal, SIGNATURE,
    TIME,
};
use super::router::Router;
use crate::clock::SharedClock;
use crate::partition::PartitionError;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What the peer endpoint needs.
pub struct Inbound {
    /// This node's router (only its local partitions answer peers).
    pub router: Arc<Router>,
    /// The cluster's peer secret.
    pub key: PeerKey,
    /// This node's clock, to judge a request's time.
    pub clock: SharedClock,
    /// The requests seen within the window.
    pub replays: ReplayGuard,
}

/// The peer endpoint's routes, to merge into the node's HTTP server.
pub fn routes(inbound: Arc<Inbound>) -> axum::Router {
    axum::Router::new()
        .route(PEER_PATH, axum::routing::post(answer))
        .layer(axum::extract::DefaultBodyLimit::max(PEER_REQUEST_BYTES_MAX))
        .with_state(inbound)
}

async fn answer(State(inbound): State<Arc<Inbound>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let time = header(TIME).and_then(|t| t.parse::<u64>().ok());
    let nonce = header(NONCE)
        .and_then(|n| hex::decode(n).ok())
        .and_then(|n| <[u8; 16]>::try_from(n).ok());
    let signature = header(SIGNATURE)
        .and_then(|s| hex::decode(s).ok())
        .unwrap_or_default();
    let (Some(time), Some(nonce)) = (time, nonce) else {
        return refuse(crate::cluster::auth::AuthError::Signature);
    };
    if let Err(e) = inbound
        .key
        .verify("request", &[&time.to_be_bytes(), &nonce, &body], &signature)
        .and_then(|()| inbound.replays.admit(time, nonce, inbound.clock.now_ms()))
    {
        return refuse(e);
    }
    let request = match peer::decode::<PeerRequest>(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let response = serve(&inbound.router, request).await;
    let bytes = peer::encode(&response);
    let signature = inbound.key.sign("response", &[&nonce, &bytes]);
    (StatusCode::OK, [(SIGNATURE, hex::encode(signature))], bytes).into_response()
}

fn refuse(error: crate::cluster::auth::AuthError) -> Response {
    tracing::warn!(error = %error, "refused a peer request");
    (StatusCode::UNAUTHORIZED, error.to_string()).into_response()
}

/// Serves a peer's request from this node's own partitions only: a node never asks a third.
pub(crate) async fn serve(router: &Router, request: PeerRequest) -> PeerResponse {
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
        PeerRequest::Due {
            partition,
            until_ms,
            limit,
        } => match router.local(partition) {
            Ok(p) => p
                .due(until_ms, limit as usize)
                .await
                .map_or_else(refused, PeerResponse::Due),
            Err(e) => refused(e),
        },
        PeerRequest::History {
            partition,
            id,
            limit,
        } => match router.local(partition) {
            Ok(p) => p
                .history(id, limit as usize)
                .await
                .map_or_else(refused, PeerResponse::History),
            Err(e) => refused(e),
        },
        PeerRequest::List {
            partition,
            filter,
            limit,
        } => match router.local(partition) {
            Ok(p) => p
                .list(filter, limit as usize)
                .await
                .map_or_else(refused, PeerResponse::List),
            Err(e) => refused(e),
        },
        PeerRequest::Counts { partition } => match router.local(partition) {
            Ok(p) => p.counts().await.map_or_else(refused, PeerResponse::Counts),
            Err(e) => refused(e),
        },
        PeerRequest::SubmitMany { partition, events } => match router.local(partition) {
            Ok(p) => PeerResponse::DecidedMany(
                p.submit_many(events)
                    .await
                    .into_iter()
                    .map(|answer| answer.map_err(|e| Refusal::of(&e)))
                    .collect(),
            ),
            Err(e) => refused(e),
        },
    }
}
