//! The MCP gateway, served at `/mcp` when the config declares `[[mcp.upstream]]`: any MCP
//! server's tools, exposed under its name as a prefix, made safe to retry. Each `tools/call`
//! of a recorded tool runs the claim protocol with the gateway as the executor — claim, call
//! the upstream with the operation id in `_meta`, report — so a retried call replays the
//! stored result instead of running twice, and a call whose outcome nobody knows goes to
//! recovery and the operator queue. Built on the official Rust SDK (`rmcp`).

pub mod answer;
pub mod call;
mod catalog;
mod execute;
pub mod key;
mod server;
mod session;
pub mod upstream;

pub use server::Gateway;
