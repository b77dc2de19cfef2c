//! Serving reads from the partition's owner.
//!
//! A node's projection is current only for the partitions it owns; for any other partition it
//! may be stale or empty. Requests that read the projection — by operation id, a claim naming a
//! parent, the operator queue — are therefore answered by the owner: this middleware finds the
//! owner (from the local copy of the record if there is one, else by asking every live node)
//! and forwards the request there, marked so that the owner never forwards it again. Claims
//! without a parent need nothing from the projection: any node appends them and the owner's
//! answer comes back on the replies topic.

use crate::api::error::ApiError;
use crate::cluster::Ownership;
use crate::cluster::directory::{Directory, Peer};
use crate::core::key::OperationId;
use crate::log::model::partition_for;
use crate::projection::Projection;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Marks a forwarded request (its value: the forwarding node's id); the receiver serves it
/// locally or says `not_owner`.
pub const FORWARDED: &str = "x-opledger-forwarded";

/// Longest wait for a forwarded request: the owner's own decision wait plus a margin.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(15);

/// What the routing middleware needs.
pub struct Cluster {
    /// This node's incarnation id.
    pub node: u64,
    /// Which partitions this node owns.
    pub ownership: Arc<Ownership>,
    /// Who owns the others.
    pub directory: Arc<Directory>,
    /// This node's projection.
    pub projection: Projection,
    /// Largest accepted body.
    pub body_bytes_max: usize,
    /// HTTP client for forwarding.
    pub client: reqwest::Client,
}

/// Where a request must be answered.
enum Route {
    /// Anywhere: it reads nothing from the projection.
    Here,
    /// By the owner of this operation's partition.
    Operation(OperationId),
    /// By every owner, merged (the operator queue).
    Everyone,
}

fn route_of(method: &Method, path: &str, body: &Bytes) -> Route {
    let rest = path.strip_prefix("/v1/operations");
    match rest {
        Some("") if method == Method::POST => {
            // A claim with a parent reads the parent's record.
            let parent = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| OperationId::parse(v.get("parent")?.as_str()?));
            parent.map_or(Route::Here, Route::Operation)
        }
        Some(rest) => {
            let id = rest.trim_start_matches('/').split('/').next().unwrap_or("");
            OperationId::parse(id).map_or(Route::Here, Route::Operation)
        }
        None if path == "/v1/reconciliation" => Route::Everyone,
        None => Route::Here,
    }
}

fn not_owner() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_owner",
        "this node does not own the operation's partition",
    )
    .into_response()
}

fn owner_unavailable() -> Response {
    let mut response = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "owner_unavailable",
        "the partition of this operation has no live owner right now (a node joined or left); retry shortly",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

impl Cluster {
    /// `Some(true)`: the record is here and current; `Some(false)`: a copy is here but another
    /// node owns its partition; `None`: no copy here.
    fn local(&self, id: &OperationId) -> Option<(bool, u32)> {
        let record = self.projection.get(id).ok()??;
        let partition = partition_for(&record.scope.0, self.ownership.partition_count());
        Some((self.ownership.owns(partition), partition))
    }

    async fn forward(
        &self,
        peer: &Peer,
        method: &Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, reqwest::Error> {
        let url = format!("{}{}", peer.advertise, path_and_query);
        let mut request = self
            .client
            .request(method.clone(), url)
            .timeout(FORWARD_TIMEOUT)
            .header(FORWARDED, self.node.to_string())
            .body(body);
        for (name, value) in headers {
            if ![header::HOST, header::CONTENT_LENGTH, header::CONNECTION].contains(name) {
                request = request.header(name, value);
            }
        }
        let answer = request.send().await?;
        let status = answer.status();
        let mut out_headers = HeaderMap::new();
        // What the owner's answer says besides its body (the trace headers it echoed too).
        for name in ["content-type", "retry-after", "traceparent", "x-request-id"] {
            if let Some(v) = answer.headers().get(name) {
                out_headers.insert(header::HeaderName::from_static(name), v.clone());
            }
        }
        let bytes = answer.bytes().await?;
        Ok((status, out_headers, bytes).into_response())
    }
}

/// Whether a forwarded answer says "not here".
async fn is_not_owner(response: Response) -> Result<(), Response> {
    if response.status() != StatusCode::NOT_FOUND {
        return Err(response);
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let code = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.pointer("/error/code")?.as_str().map(str::to_owned));
    if code.as_deref() == Some("not_owner") {
        Ok(())
    } else {
        Err(Response::from_parts(parts, Body::from(bytes)))
    }
}

/// The routing middleware of a node on a shared (Kafka) log.
pub async fn route(State(cluster): State<Arc<Cluster>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    if !path.starts_with("/v1/operations") && path != "/v1/reconciliation" {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let body = match crate::api::bounded(body, cluster.body_bytes_max).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let forwarded = parts.headers.contains_key(FORWARDED);
    let route = route_of(&parts.method, &path, &body);
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    let local = |parts, body| next.run(Request::from_parts(parts, Body::from(body)));
    match route {
        Route::Here => local(parts, body).await,
        Route::Everyone if forwarded => local(parts, body).await,
        Route::Everyone => {
            let now = Instant::now();
            // A partition without a live owner would be missing from the list: say so instead.
            if !cluster.directory.covers_all(
                cluster.ownership.partition_count(),
                &cluster.ownership.owned(),
                now,
            ) {
                return owner_unavailable();
            }
            let peers = cluster.directory.peers(now);
            let mut lists = vec![local(parts.clone(), body.clone()).await];
            for peer in peers.iter().filter(|p| p.node != cluster.node) {
                match cluster
                    .forward(
                        peer,
                        &parts.method,
                        &path_and_query,
                        &parts.headers,
                        body.clone(),
                    )
                    .await
                {
                    Ok(r) => lists.push(r),
                    Err(e) => {
                        tracing::warn!(peer = peer.node, error = %e, "operator queue: a node did not answer");
                        return owner_unavailable();
                    }
                }
            }
            merge_queues(lists).await
        }
        Route::Operation(id) => {
            match cluster.local(&id) {
                Some((true, _)) => return local(parts, body).await,
                _ if forwarded => return not_owner(),
                Some((false, partition)) => {
                    return match cluster.directory.owner(partition, Instant::now()) {
                        Some(peer) if peer.node != cluster.node => cluster
                            .forward(&peer, &parts.method, &path_and_query, &parts.headers, body)
                            .await
                            .unwrap_or_else(|e| {
                                tracing::warn!(peer = peer.node, error = %e, "forwarding failed");
                                owner_unavailable()
                            }),
                        _ => owner_unavailable(),
                    };
                }
                None => {}
            }
            // No copy here: ask every live node; the owner answers, the others say not_owner.
            let now = Instant::now();
            let peers: Vec<Peer> = cluster
                .directory
                .peers(now)
                .into_iter()
                .filter(|p| p.node != cluster.node)
                .collect();
            let mut asked = tokio::task::JoinSet::new();
            let cluster2 = cluster.clone();
            for peer in peers {
                let (c, method, pq, headers, body) = (
                    cluster2.clone(),
                    parts.method.clone(),
                    path_and_query.clone(),
                    parts.headers.clone(),
                    body.clone(),
                );
                asked.spawn(async move { c.forward(&peer, &method, &pq, &headers, body).await });
            }
            let mut all_answered = true;
            while let Some(joined) = asked.join_next().await {
                match joined {
                    Ok(Ok(response)) => {
                        if let Err(owner_answer) = is_not_owner(response).await {
                            return owner_answer;
                        }
                    }
                    _ => all_answered = false,
                }
            }
            let covered = cluster.directory.covers_all(
                cluster.ownership.partition_count(),
                &cluster.ownership.owned(),
                now,
            );
            if all_answered && covered {
                // Nobody has it: the local handler gives the ordinary answer (404, unknown parent).
                local(parts, body).await
            } else {
                owner_unavailable()
            }
        }
    }
}

/// Merges the operator queues of several nodes, oldest first, as one answer.
async fn merge_queues(lists: Vec<Response>) -> Response {
    let mut items = Vec::new();
    let mut total = 0u64;
    for response in lists {
        if !response.status().is_success() {
            return response;
        }
        let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024 * 1024)
            .await
            .unwrap_or_default();
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            return owner_unavailable();
        };
        total += v.get("total").and_then(|t| t.as_u64()).unwrap_or(0);
        if let Some(list) = v.get("items").and_then(|i| i.as_array()) {
            items.extend(list.iter().cloned());
        }
    }
    let key = |v: &serde_json::Value| {
        (
            v.get("requested_at")
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_owned(),
            v.get("operation_id")
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_owned(),
        )
    };
    items.sort_by_key(key);
    items.truncate(crate::api::RECONCILIATION_ITEMS_MAX);
    let body = serde_json::json!({
        "count": items.len(),
        "total": total,
        "truncated": total > items.len() as u64,
        "items": items,
    });
    (StatusCode::OK, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_read_the_projection_are_routed_by_operation() {
        let id = OperationId([7; 16]);
        let s = id.to_string();
        let none = Bytes::new();
        assert!(
            matches!(route_of(&Method::GET, &format!("/v1/operations/{s}"), &none), Route::Operation(x) if x == id)
        );
        assert!(
            matches!(route_of(&Method::POST, &format!("/v1/operations/{s}/complete"), &none), Route::Operation(x) if x == id)
        );
        assert!(matches!(
            route_of(&Method::GET, "/v1/reconciliation", &none),
            Route::Everyone
        ));
        let with_parent = Bytes::from(format!(r#"{{"tool":"t","holder":"h","parent":"{s}"}}"#));
        assert!(
            matches!(route_of(&Method::POST, "/v1/operations", &with_parent), Route::Operation(x) if x == id)
        );
        let plain = Bytes::from(r#"{"tool":"t","holder":"h"}"#);
        assert!(matches!(
            route_of(&Method::POST, "/v1/operations", &plain),
            Route::Here
        ));
        assert!(matches!(
            route_of(&Method::GET, "/v1/operations/not-an-id", &none),
            Route::Here
        ));
        assert!(matches!(
            route_of(&Method::GET, "/metrics", &none),
            Route::Here
        ));
    }
}
