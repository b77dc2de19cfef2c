//! One upstream MCP server: started (stdio) or reached (Streamable HTTP), its tools listed, and
//! reconnected when it goes away. The node keeps serving while an upstream is down: the tools
//! it listed last stay listed, and a call of one is answered `not_executed`; before it has
//! listed any, a call under its name is answered `not_executed` too (it is still connecting).

use crate::config::{UpstreamSettings, UpstreamTransport};
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ServiceExt, service::ClientCacheConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// An upstream as the gateway sees it: its peer while connected, and the tools it listed
/// last — kept while it is down, so a call of one is answered `not_executed`, not "no tool".
pub(super) struct Upstream {
    /// Its settings.
    pub settings: UpstreamSettings,
    peer: RwLock<Option<Peer<RoleClient>>>,
    tools: RwLock<Arc<Vec<Tool>>>,
    /// Whether it has listed its tools at least once: until then nobody knows which tools it
    /// has, and a call of one of its names is "still connecting", not "no such tool".
    listed: AtomicBool,
}

impl ToolServer for Upstream {
    fn call(
        &self,
        params: CallToolRequestParams,
    ) -> crate::BoxFuture<'_, Result<CallToolResult, CallError>> {
        Box::pin(self.call_upstream(params))
    }

    fn result_bytes_max(&self) -> usize {
        self.settings.result_bytes_max
    }
}

/// How long connecting and listing may take before the attempt counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection that lasted this long was healthy: the next reconnect starts without delay.
const HEALTHY_AFTER: Duration = Duration::from_secs(10);

/// Where a recorded call goes: an upstream MCP server reached through rmcp ([`Upstream`]), or
/// one in memory (the simulator's).
pub trait ToolServer: Send + Sync + 'static {
    /// Calls `params` (its `_meta` carries the operation id) and waits at most the upstream's
    /// call timeout. Only [`CallError::Down`] and [`CallError::Refused`] say the tool never ran.
    fn call(
        &self,
        params: CallToolRequestParams,
    ) -> crate::BoxFuture<'_, Result<CallToolResult, CallError>>;

    /// Largest result, in bytes of JSON, kept in the log (a larger one is kept as its hash).
    fn result_bytes_max(&self) -> usize;
}

/// Why a call to an upstream has no answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The upstream is not connected.
    #[error("upstream is not connected")]
    Down,
    /// It answered that it has no such tool or that the arguments are invalid: not run.
    #[error("{0}")]
    Refused(String),
    /// It did not answer within `call_timeout`.
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection failed during the call, or the answer was not a tool result.
    #[error("upstream call failed: {0}")]
    Failed(String),
}

impl Upstream {
    /// An upstream that is not connected yet.
    pub fn new(settings: UpstreamSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            peer: RwLock::new(None),
            tools: RwLock::new(Arc::default()),
            listed: AtomicBool::new(false),
        })
    }

    /// Whether it has never listed its tools yet (it is still connecting for the first time).
    pub fn connecting(&self) -> bool {
        !self.listed.load(Ordering::Acquire)
    }

    /// The tools it listed last.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Calls `params` and waits at most `call_timeout`. Dropping the call on a timeout sends
    /// the upstream a cancellation, which is only advisory: the effect may still happen.
    async fn call_upstream(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, CallError> {
        let peer = self
            .peer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(CallError::Down)?;
        // The supervisor notices a closed connection only at its next look: until then the
        // peer is kept, and a call sent to it would fail unsent yet be taken for unknown.
        if peer.is_transport_closed() {
            return Err(CallError::Down);
        }
        let timeout = self.settings.call_timeout;
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(CallError::Timeout(timeout)),
            Ok(Ok(result)) => Ok(result),
            // Only "no such method" and "invalid params" say the tool never ran; an internal
            // error may come after its effect, so it stays unknown.
            Ok(Err(ServiceError::McpError(data)))
                if data.code == ErrorCode::METHOD_NOT_FOUND
                    || data.code == ErrorCode::INVALID_PARAMS =>
            {
                Err(CallError::Refused(format!(
                    "{} ({})",
                    data.message, data.code.0
                )))
            }
            Ok(Err(e)) => Err(CallError::Failed(describe(&e))),
        }
    }

    /// Keeps the upstream connected until `stop`: connects, lists its tools, waits for the
    /// connection to end, and starts again after a pause that grows to 30 s.
    pub async fn supervise(self: Arc<Self>, stop: CancellationToken) {
        let name = self.settings.name.clone();
        let mut pause = Duration::from_millis(200);
        loop {
            let attempt = async {
                let service = connect(&self.settings).await?;
                // A stale cached list would show a dead upstream's tools as alive.
                service
                    .peer()
                    .set_response_cache_config(ClientCacheConfig::disabled())
                    .await;
                let tools = service
                    .peer()
                    .list_all_tools()
                    .await
                    .map_err(|e| describe(&e))?;
                Ok::<_, String>((service, tools))
            };
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = tokio::time::timeout(CONNECT_TIMEOUT, attempt) => {
                    outcome.unwrap_or_else(|_| Err(format!("no answer within {CONNECT_TIMEOUT:?}")))
                }
            };
            match outcome {
                Ok((service, tools)) => {
                    tracing::info!(upstream = %name, tools = tools.len(), "MCP upstream connected");
                    *self.tools.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(tools);
                    self.listed.store(true, Ordering::Release);
                    *self.peer.write().unwrap_or_else(|p| p.into_inner()) =
                        Some(service.peer().clone());
                    let since = std::time::Instant::now();
                    let ended = wait_closed(service, &stop).await;
                    *self.peer.write().unwrap_or_else(|p| p.into_inner()) = None;
                    if !ended {
                        return;
                    }
                    if since.elapsed() >= HEALTHY_AFTER {
                        pause = Duration::from_millis(200);
                    }
                    tracing::warn!(upstream = %name, "MCP upstream went away; reconnecting");
                }
                Err(reason) => {
                    tracing::warn!(upstream = %name, %reason, retry_in = ?pause, "cannot reach MCP upstream");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(Duration::from_secs(30));
        }
    }
}

/// Waits until the connection ends (`true`) or the node stops (`false`, after closing it).
async fn wait_closed(
    mut service: RunningService<RoleClient, ()>,
    stop: &CancellationToken,
) -> bool {
    // A child that exits closes the transport; `waiting` returns then.
    let closed = async {
        loop {
            if service.peer().is_transport_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        () = stop.cancelled() => {
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
            false
        }
        () = closed => true,
    }
}

async fn connect(settings: &UpstreamSettings) -> Result<RunningService<RoleClient, ()>, String> {
    match &settings.transport {
        UpstreamTransport::Command(command) => {
            let mut cmd = tokio::process::Command::new(&command[0]);
            cmd.args(&command[1..]);
            crate::node::open_files::restore_in_child(&mut cmd);
            // The child's diagnostics go to the node's own stderr.
            let transport = TokioChildProcess::new(cmd)
                .map_err(|e| format!("cannot start {:?}: {e}", command[0]))?;
            ().serve(transport).await.map_err(|e| e.to_string())
        }
        UpstreamTransport::Url(url) => {
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            ().serve(transport).await.map_err(|e| e.to_string())
        }
    }
}

fn describe(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) => format!("{} ({})", data.message, data.code.0),
        other => other.to_string(),
    }
}
