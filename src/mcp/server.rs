//! The gateway's MCP server at `/mcp`: authentication with the API's tokens, `tools/list`
//! (the upstreams' tools the principal is granted, each showing its effective class) and
//! `tools/call`.

use super::answer;
use super::call::{self, Call, CallRefused};
use super::catalog::{self, Hints};
use super::key::{META_KEY, META_RUN_ID, Scope};
use super::session;
use super::upstream::{ToolServer, Upstream};
use crate::api::ApiState;
use crate::config::{McpSettings, Principal};
use crate::core::contract::{ToolClass, ToolContract};
use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// `_meta` name of a listed tool's effective class.
pub const META_CLASS: &str = "io.opledger/class";

/// The running gateway: its upstreams (kept connected) and what calls need.
pub struct Gateway {
    pub(super) state: Arc<ApiState>,
    settings: McpSettings,
    upstreams: Vec<Arc<Upstream>>,
    streams: CancellationToken,
    /// Which principal opened each MCP session: a session id is no bearer credential, so
    /// another principal presenting it is told the session does not exist.
    pub(super) sessions: Mutex<HashMap<String, (String, Instant)>>,
}

impl Gateway {
    /// Starts keeping every upstream connected until `stop` is cancelled. `streams` ends the
    /// agents' open MCP streams: cancel it when the node is asked to stop, and `stop` once the
    /// requests in flight are done (their upstream calls still need the upstreams).
    pub fn start(
        settings: McpSettings,
        state: Arc<ApiState>,
        stop: CancellationToken,
        streams: CancellationToken,
    ) -> Arc<Self> {
        let upstreams: Vec<Arc<Upstream>> = settings
            .upstreams
            .iter()
            .map(|u| Upstream::new(u.clone()))
            .collect();
        for upstream in &upstreams {
            tokio::spawn(upstream.clone().supervise(stop.child_token()));
        }
        let watched = upstreams.clone();
        state.readiness.add(
            "mcp_upstreams",
            Arc::new(move || {
                // Until each has listed its tools once: an upstream that goes away later leaves
                // its tools listed and the ledger serving, so the node stays ready.
                let connecting: Vec<&str> = watched
                    .iter()
                    .filter(|u| u.connecting())
                    .map(|u| u.settings.name.as_str())
                    .collect();
                match connecting.as_slice() {
                    [] => Ok(()),
                    _ => Err(format!("still connecting: {}", connecting.join(", "))),
                }
            }),
        );
        Arc::new(Self {
            state,
            settings,
            upstreams,
            streams,
            sessions: Mutex::default(),
        })
    }

    /// The `/mcp` routes: Streamable HTTP behind the API's bearer-token authentication.
    pub fn router(self: &Arc<Self>) -> axum::Router {
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.settings.allowed_hosts.clone())
            .with_cancellation_token(self.streams.child_token());
        // The API's body bound holds here too.
        config.max_request_body_bytes = self.state.body_bytes_max;
        let handler = Handler(self.clone());
        let service: StreamableHttpService<Handler, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(handler.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
        axum::Router::new().nest_service("/mcp", service).layer(
            axum::middleware::from_fn_with_state(self.clone(), session::authenticate_agent),
        )
    }

    /// The upstream and the upstream's tool behind an exposed name, while it is connected.
    fn resolve(&self, exposed: &str) -> Option<(Arc<Upstream>, Tool)> {
        let (prefix, name) = exposed.split_once('.')?;
        let upstream = self.upstreams.iter().find(|u| u.settings.name == prefix)?;
        let tool = upstream.tools().iter().find(|t| t.name == name)?.clone();
        Some((upstream.clone(), tool))
    }

    /// The upstream an exposed name falls under, if it has not listed its tools yet.
    fn first_connecting(&self, exposed: &str) -> Option<&Arc<Upstream>> {
        let (prefix, _) = exposed.split_once('.')?;
        self.upstreams
            .iter()
            .find(|u| u.settings.name == prefix && u.connecting())
    }

    fn contract(&self, upstream: &Upstream, exposed: &str, tool: &Tool) -> ToolContract {
        let hints = tool
            .annotations
            .as_ref()
            .map(|a| Hints {
                read_only: a.read_only_hint == Some(true),
                idempotent: a.idempotent_hint == Some(true),
            })
            .unwrap_or_default();
        catalog::contract(
            exposed,
            self.state.ledger.tools().get(exposed),
            hints,
            upstream.settings.call_timeout,
        )
    }
}

#[derive(Clone)]
struct Handler(Arc<Gateway>);

fn principal_of(context: &RequestContext<RoleServer>) -> Result<Arc<Principal>, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<Arc<Principal>>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

fn header<'a>(
    context: &'a RequestContext<RoleServer>,
    name: &str,
) -> Result<Option<&'a str>, McpError> {
    let Some(parts) = context.extensions.get::<Parts>() else {
        return Ok(None);
    };
    let mut values = parts.headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(McpError::invalid_params(
            format!("give exactly one {name} header"),
            None,
        ));
    }
    // A value that is not visible ASCII is refused, never taken for an absent one.
    first
        .map(|v| {
            v.to_str().map_err(|_| {
                McpError::invalid_params(format!("the {name} header must be visible ASCII"), None)
            })
        })
        .transpose()
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("opledger", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let principal = principal_of(&context)?;
        let mut listed = Vec::new();
        for upstream in &self.0.upstreams {
            for tool in upstream.tools().iter() {
                let exposed = format!("{}.{}", upstream.settings.name, tool.name);
                if !principal.may_use(&exposed) {
                    continue;
                }
                let class = self.0.contract(upstream, &exposed, tool).class;
                let mut shown = tool.clone();
                shown.name = exposed.into();
                // A replay of a result too large to keep cannot conform to an output schema,
                // and clients validate successful results against one: none is advertised.
                // Structured content the upstream returns still passes through.
                shown.output_schema = None;
                let note = match class {
                    ToolClass::Read => "read: not recorded, safe to call again",
                    _ => {
                        "recorded by opledger: a retry of the same call replays its result instead of running it again"
                    }
                };
                shown.description = Some(
                    match &tool.description {
                        Some(d) => format!("{d}\n\n({note}; class {})", class.as_str()),
                        None => format!("({note}; class {})", class.as_str()),
                    }
                    .into(),
                );
                shown
                    .meta
                    .get_or_insert_with(MetaObject::new)
                    .insert(META_CLASS.into(), json!(class.as_str()));
                listed.push(shown);
            }
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = principal_of(&context)?;
        let exposed = request.name.to_string();
        // Not granted and not there answer alike: a principal learns nothing of others' tools.
        // The name is echoed only as far as a tool name can go.
        let shown: String = exposed.chars().take(128).collect();
        let unknown = || McpError::invalid_params(format!("no tool named {shown:?}"), None);
        if !principal.may_use(&exposed) {
            return Err(unknown());
        }
        let Some((upstream, tool)) = self.0.resolve(&exposed) else {
            return match self.0.first_connecting(&exposed) {
                Some(upstream) => Ok(answer::connecting(&upstream.settings.name).into()),
                None => Err(unknown()),
            };
        };
        let contract = self.0.contract(&upstream, &exposed, &tool);
        let arguments = request.arguments.unwrap_or_default();
        if !contract.is_recorded() {
            let params = CallToolRequestParams::new(tool.name.clone()).with_arguments(arguments);
            let result = match upstream.call(params).await {
                Ok(result) => result,
                Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                    "The tool's server did not answer ({e}). It is a read tool: retrying is safe."
                ))]),
            };
            return Ok(answer::with_decision(result, "not_recorded", None).into());
        }
        let meta_key = match context.meta.get(META_KEY) {
            None => None,
            Some(serde_json::Value::String(k)) => Some(k.clone()),
            Some(_) => {
                return Err(McpError::invalid_params(
                    format!("_meta[{META_KEY:?}] must be a string"),
                    None,
                ));
            }
        };
        let header_key = header(&context, "idempotency-key")?.map(str::to_owned);
        let key = match (meta_key, header_key) {
            (Some(m), Some(h)) if m != h => {
                return Err(McpError::invalid_params(
                    format!(
                        "_meta[{META_KEY:?}] and the Idempotency-Key header disagree: give one key"
                    ),
                    None,
                ));
            }
            (m, h) => m.or(h),
        };
        let session = header(&context, "mcp-session-id")?;
        let run = match context.meta.get(META_RUN_ID) {
            None => None,
            Some(serde_json::Value::String(r)) if !r.is_empty() => Some(r.as_str()),
            Some(_) => {
                return Err(McpError::invalid_params(
                    format!("_meta[{META_RUN_ID:?}] must be a non-empty string"),
                    None,
                ));
            }
        };
        // A run id the client declares outlives its sessions (a reconnect is a new session),
        // so it scopes a derived key before the session does.
        let scope = match (run, session) {
            (Some(r), _) => Scope::Run(r),
            (None, Some(s)) => Scope::Session(s),
            (None, None) => Scope::Unscoped,
        };
        let call = Call {
            principal: &principal,
            exposed: &exposed,
            upstream_name: &tool.name,
            contract: &contract,
            arguments,
            key,
            scope,
            holder: format!("mcp-{}", uuid::Uuid::new_v4().simple()),
            now_ms: crate::clock::SystemClock::shared().now_ms(),
        };
        let ledger = self.0.state.ledger.clone();
        match call::recorded(&ledger, upstream, self.0.settings.derived_key_window, call).await {
            Ok(result) => Ok(result.into()),
            Err(CallRefused::Invalid(m)) => Err(McpError::invalid_params(m, None)),
            // Not a protocol error: the model reads a tool result, which says to retry.
            Err(e @ CallRefused::Unavailable(_)) => {
                tracing::warn!(tool = %shown, error = %e, "an MCP call was not taken");
                Ok(answer::unavailable().into())
            }
        }
    }
}
