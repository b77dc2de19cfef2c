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
use crate::api::{ApiState, auth};
use crate::cluster::Ownership;
use crate::cluster::directory::{Directory, Peer};
use crate::core::key::{ClientKey, OperationId, ScopedHash};
use crate::log::model::{EventLog, partition_for};
use crate::projection::SharedStore;
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
    pub projection: SharedStore,
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
            ClaimRouting::of(body)
                .parent()
                .map_or(Route::Here, Route::Operation)
        }
        Some(rest) => {
            let segment = rest.trim_start_matches('/').split('/').next().unwrap_or("");
            // The handler sees the percent-decoded segment; so must the routing.
            percent_decoded(segment)
                .and_then(|id| OperationId::parse(&id))
                .map_or(Route::Here, Route::Operation)
        }
        None if path == "/v1/reconciliation" => Route::Everyone,
        None => Route::Here,
    }
}

/// The fields of a claim body that decide where it is answered; the rest (the business
/// request) is skipped, not built into a JSON tree, and the handler parses it once.
#[derive(serde::Deserialize, Default)]
struct ClaimRouting {
    tool: Option<serde_json::Value>,
    parent: Option<serde_json::Value>,
}

impl ClaimRouting {
    fn of(body: &Bytes) -> Self {
        serde_json::from_slice(body).unwrap_or_default()
    }

    /// A claim with a parent reads the parent's record.
    fn parent(&self) -> Option<OperationId> {
        OperationId::parse(self.parent.as_ref()?.as_str()?)
    }

    /// A claim by a principal that may no longer use the tool is answered from the operation's
    /// record (a replay with the result withheld, R20), so its owner must answer it: the id of
    /// that operation, if this is such a claim.
    fn without_grant(
        &self,
        principal: &crate::config::Principal,
        headers: &HeaderMap,
    ) -> Option<OperationId> {
        let tool = self.tool.as_ref()?.as_str()?;
        if principal.may_use(tool) {
            return None;
        }
        let key = ClientKey::parse(headers.get("idempotency-key")?.to_str().ok()?).ok()?;
        Some(OperationId::for_scope(&ScopedHash::of(
            &principal.id,
            tool,
            &key,
        )))
    }
}

/// Decodes `%XX` escapes; `None` if the result is not UTF-8 or an escape is malformed.
fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Header of a `not_owner` answer: the partitions the answering node serves, so the asking
/// node can tell "nobody has it" from "its owner was not asked".
const SERVES: &str = "x-opledger-serves";

fn not_owner(serves: &[u32]) -> Response {
    let mut response = ApiError::new(
        StatusCode::NOT_FOUND,
        "not_owner",
        "this node does not own the operation's partition",
    )
    .into_response();
    let list: Vec<String> = serves.iter().map(u32::to_string).collect();
    if let Ok(value) = HeaderValue::from_str(&list.join(",")) {
        response.headers_mut().insert(SERVES, value);
    }
    response
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

/// Request headers a forwarded request carries (the owner authenticates it again).
const FORWARDED_REQUEST_HEADERS: [&str; 6] = [
    "authorization",
    "idempotency-key",
    "content-type",
    "traceparent",
    "x-request-id",
    "accept",
];

impl Cluster {
    /// `Some((true, p))`: the record is here and current; `Some((false, p))`: a copy is here
    /// but this node does not serve its partition `p`; `None`: no copy here.
    fn local(&self, id: &OperationId) -> Option<(bool, u32)> {
        let record = self.projection.get(id).ok()??;
        let partition = partition_for(&record.scope.0, self.ownership.partition_count());
        Some((self.ownership.owns(partition), partition))
    }

    /// Whether a request really comes from a live peer (a client may send the header too).
    fn sent_by_peer(&self, headers: &HeaderMap) -> bool {
        let sender = headers
            .get(FORWARDED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        sender.is_some_and(|node| {
            self.directory
                .peers(Instant::now())
                .iter()
                .any(|p| p.node == node)
        })
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
        for name in FORWARDED_REQUEST_HEADERS {
            if let Some(value) = headers.get(name) {
                request = request.header(name, value);
            }
        }
        let answer = request.send().await?;
        let status = answer.status();
        let mut out_headers = HeaderMap::new();
        // What the owner's answer says besides its body (the trace headers it echoed too).
        for name in [
            "content-type",
            "retry-after",
            "traceparent",
            "x-request-id",
            SERVES,
        ] {
            if let Some(v) = answer.headers().get(name) {
                out_headers.insert(header::HeaderName::from_static(name), v.clone());
            }
        }
        let bytes = answer.bytes().await?;
        Ok((status, out_headers, bytes).into_response())
    }
}

/// A forwarded answer: `Ok(served partitions)` if it says "not here", else the answer itself.
async fn not_here(response: Response) -> Result<Vec<u32>, Response> {
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
    if code.as_deref() != Some("not_owner") {
        return Err(Response::from_parts(parts, Body::from(bytes)));
    }
    let serves = parts
        .headers
        .get(SERVES)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect();
    Ok(serves)
}

/// The routing middleware of a node on a shared (Kafka) log.
pub async fn route<L: EventLog>(
    State((cluster, api)): State<(Arc<Cluster>, Arc<ApiState<L>>)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    if !path.starts_with("/v1/operations") && path != "/v1/reconciliation" {
        return next.run(Request::from_parts(parts, body)).await;
    }
    // Nobody unauthenticated makes this node ask the others.
    let principal = match auth::authenticate(&api.principals, &parts.headers) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let body = match crate::api::bounded(body, cluster.body_bytes_max).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let forwarded = cluster.sent_by_peer(&parts.headers);
    if !forwarded {
        parts.headers.remove(FORWARDED);
    }
    let route = if parts.method == Method::POST && path == "/v1/operations" {
        // One look at the claim body decides both cases that need an owner.
        let claim = ClaimRouting::of(&body);
        claim
            .parent()
            .or_else(|| claim.without_grant(&principal, &parts.headers))
            .map_or(Route::Here, Route::Operation)
    } else {
        route_of(&parts.method, &path, &body)
    };
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_owned());
    let local = |parts, body| next.run(Request::from_parts(parts, Body::from(body)));
    let count = cluster.ownership.partition_count();
    match route {
        Route::Here => local(parts, body).await,
        Route::Everyone if forwarded => local(parts, body).await,
        Route::Everyone => {
            let now = Instant::now();
            // A partition without a live owner would be missing from the list: say so instead.
            if !cluster
                .directory
                .all_served(count, &cluster.ownership.owned(), now)
            {
                return owner_unavailable();
            }
            let mine = local(parts.clone(), body.clone()).await;
            if !mine.status().is_success() {
                return mine;
            }
            let mut lists = vec![mine];
            for peer in cluster.directory.peers(now) {
                let asked = cluster
                    .forward(
                        &peer,
                        &parts.method,
                        &path_and_query,
                        &parts.headers,
                        body.clone(),
                    )
                    .await;
                match asked {
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
                _ if forwarded => return not_owner(&cluster.ownership.owned()),
                Some((false, partition)) => {
                    let Some(peer) = cluster.directory.owner(partition, Instant::now()) else {
                        return owner_unavailable();
                    };
                    return match cluster
                        .forward(&peer, &parts.method, &path_and_query, &parts.headers, body)
                        .await
                    {
                        // The owner moved on since it announced: ask again shortly.
                        Ok(answer) => not_here(answer)
                            .await
                            .map_or_else(|a| a, |_| owner_unavailable()),
                        Err(e) => {
                            tracing::warn!(peer = peer.node, error = %e, "forwarding failed");
                            owner_unavailable()
                        }
                    };
                }
                None => {}
            }
            // No copy here: ask every live node; the owner answers, the others say not_owner
            // and which partitions they serve.
            let mut asked = tokio::task::JoinSet::new();
            for peer in cluster.directory.peers(Instant::now()) {
                let (c, method, pq, headers, body) = (
                    cluster.clone(),
                    parts.method.clone(),
                    path_and_query.clone(),
                    parts.headers.clone(),
                    body.clone(),
                );
                asked.spawn(async move { c.forward(&peer, &method, &pq, &headers, body).await });
            }
            let mut served = cluster.ownership.owned();
            while let Some(joined) = asked.join_next().await {
                if let Ok(Ok(response)) = joined {
                    match not_here(response).await {
                        Ok(theirs) => served.extend(theirs),
                        Err(owner_answer) => return owner_answer,
                    }
                }
            }
            if (0..count).all(|p| served.contains(&p)) {
                // Every partition's owner said it has no such record: the local handler gives
                // the ordinary answer (404, unknown parent).
                local(parts, body).await
            } else {
                owner_unavailable()
            }
        }
    }
}

/// Merges the operator queues of several nodes as one answer, oldest first. An operation listed
/// twice (two owners for a moment during a handover) is listed once.
async fn merge_queues(lists: Vec<Response>) -> Response {
    let mut items: std::collections::BTreeMap<(i128, String), serde_json::Value> =
        std::collections::BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
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
        for item in v
            .get("items")
            .and_then(|i| i.as_array())
            .into_iter()
            .flatten()
        {
            let at = item
                .get("requested_at")
                .and_then(|s| s.as_str())
                .and_then(|s| {
                    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .map_or(0, |t| t.unix_timestamp_nanos());
            let id = item
                .get("operation_id")
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_owned();
            if !seen.insert(id.clone()) {
                total = total.saturating_sub(1);
                continue;
            }
            items.insert((at, id), item.clone());
        }
    }
    let items: Vec<serde_json::Value> = items
        .into_values()
        .take(crate::api::RECONCILIATION_ITEMS_MAX)
        .collect();
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
