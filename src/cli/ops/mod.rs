//! `opledger ops`: the operator's work over a node's HTTP API — list operations, read the queue
//! and one operation's timeline, take over, resolve, compensate, and see the tools' contracts.
//! The token comes from a file or the environment, never the command line, and is never
//! printed; an irreversible action restates what it will do and waits for a yes.

mod args;
mod render;

pub use args::OpsArgs;

use super::Verdict;
use args::{NodeArgs, OpsCommand, Outcome};
use opledger::client::{Client, ClientError};
use serde_json::{Value, json};
use std::io::BufRead;

/// Runs `opledger ops`.
pub fn run(args: OpsArgs) -> anyhow::Result<()> {
    let node = args.node;
    let client = Client::new(&node.url, &token(&node)?);
    super::runtime()?.block_on(async {
        let ops = Ops { client, json: node.json };
        match args.command {
            OpsCommand::List {
                state,
                tool,
                principal,
                since,
                until,
                limit,
                cursor,
            } => {
                let mut query = vec![("limit", limit.to_string())];
                for (name, value) in [
                    ("state", state),
                    ("tool", tool),
                    ("principal", principal),
                    ("since", since),
                    ("until", until),
                    ("cursor", cursor),
                ] {
                    query.extend(value.map(|v| (name, v)));
                }
                let page = ops.get(&format!("/v1/operations?{}", encode(&query))).await?;
                ops.print(&page, render::list)
            }
            OpsCommand::Queue => {
                let queue = ops.get("/v1/reconciliation").await?;
                ops.print(&queue, render::queue)
            }
            OpsCommand::Tools => {
                let tools = ops.get("/v1/tools").await?;
                ops.print(&tools, render::tools)
            }
            OpsCommand::Show { id } => ops.show(&id).await,
            OpsCommand::Takeover { id, yes } => {
                let now = ops.get(&format!("/v1/operations/{id}")).await?;
                confirm(
                    &format!(
                        "Take over {}: from then on executors' reports are refused, claims answer `manual`, and only you can resolve it.",
                        render::summary(&now)
                    ),
                    yes,
                )?;
                let path = format!("/v1/operations/{id}/takeover");
                let done = ops.post(&path, json!({})).await?;
                ops.print(&done, render::decided)
            }
            OpsCommand::Resolve {
                id,
                outcome,
                resource_ref,
                status,
                yes,
            } => {
                let now = ops.get(&format!("/v1/operations/{id}")).await?;
                let (body, effect) = match outcome {
                    Outcome::Completed => {
                        let reference = resource_ref.unwrap_or_default();
                        (
                            json!({"outcome": "completed", "result": {"resource_ref": reference, "status": status}}),
                            format!(
                                "as completed (resource {reference}, status {}): it is settled for good and every claim of its key replays that result",
                                status.unwrap_or_default()
                            ),
                        )
                    }
                    Outcome::NotExecuted => (
                        json!({"outcome": "not_executed"}),
                        "as not executed: its key is released, and the next claim executes it again — say so only if the side effect surely did not happen".to_owned(),
                    ),
                };
                confirm(
                    &format!("Resolve {} {effect}.", render::summary(&now)),
                    yes,
                )?;
                let done = ops.post(&format!("/v1/operations/{id}/resolve"), body).await?;
                ops.print(&done, render::decided)
            }
            OpsCommand::Compensate {
                id,
                holder,
                request,
                yes,
            } => {
                let request: Value = serde_json::from_str(&request).map_err(|e| Verdict {
                    code: 2,
                    message: format!("--request is not JSON: {e}"),
                })?;
                let now = ops.get(&format!("/v1/operations/{id}")).await?;
                confirm(
                    &format!(
                        "Compensate {}: a compensation of it is claimed for `{holder}` to execute.",
                        render::summary(&now)
                    ),
                    yes,
                )?;
                let body = json!({"holder": holder, "request": request});
                let done = ops.post(&format!("/v1/operations/{id}/compensate"), body).await?;
                ops.print(&done, render::decided)
            }
        }
    })
}

/// The bearer token: the file's first line, else `OPLEDGER_TOKEN`.
fn token(node: &NodeArgs) -> anyhow::Result<String> {
    let token = match &node.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Verdict {
                code: 2,
                message: format!("cannot read the token file {}: {e}", path.display()),
            })?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        None => std::env::var("OPLEDGER_TOKEN").unwrap_or_default(),
    };
    if token.is_empty() {
        return Err(Verdict {
            code: 2,
            message: "no token: set OPLEDGER_TOKEN, or pass --token-file FILE (its first line)"
                .into(),
        }
        .into());
    }
    Ok(token)
}

/// A query string, each value percent-encoded.
fn encode(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencoding(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// Asks before an irreversible action: `statement` says what will happen; a `yes` on stdin
/// (typed, or piped by a script that means it) goes on, anything else does nothing.
fn confirm(statement: &str, yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    eprint!("{statement}\nType yes to go on: ");
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer).unwrap_or(0);
    if read > 0 && matches!(answer.trim(), "yes" | "y") {
        return Ok(());
    }
    eprintln!();
    Err(Verdict {
        code: 6,
        message: "not confirmed: nothing was done (pass --yes to act without asking)".into(),
    }
    .into())
}

/// The client and how answers are printed.
struct Ops {
    client: Client,
    json: bool,
}

impl Ops {
    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        answered(self.client.get_json(path).await)
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let value = answered(self.client.post_json(path, &body).await)?;
        if value["decision"] == "rejected" {
            let r = &value["rejection"];
            return Err(Verdict {
                code: 5,
                message: format!(
                    "rejected ({}): {}",
                    r["code"].as_str().unwrap_or("?"),
                    r["message"].as_str().unwrap_or("")
                ),
            }
            .into());
        }
        Ok(value)
    }

    fn print(&self, value: &Value, table: fn(&Value) -> String) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string_pretty(value)?);
        } else {
            print!("{}", table(value));
        }
        Ok(())
    }

    /// The operation and, for an auditor, its timeline.
    async fn show(&self, id: &str) -> anyhow::Result<()> {
        let now = self.get(&format!("/v1/operations/{id}")).await?;
        let history = match self
            .client
            .get_json(&format!("/v1/operations/{id}/history"))
            .await
        {
            Ok((_, history)) => Some(history),
            Err(ClientError::Refused { status: 403, .. }) => None,
            Err(e) => return Err(refused(e)),
        };
        if self.json {
            let both = json!({"operation": now, "history": history});
            println!("{}", serde_json::to_string_pretty(&both)?);
        } else {
            print!("{}", render::operation(&now, history.as_ref()));
        }
        Ok(())
    }
}

/// The answer's JSON, or the exit code and message its refusal calls for.
fn answered(result: Result<(u16, Value), ClientError>) -> anyhow::Result<Value> {
    result.map(|(_, value)| value).map_err(refused)
}

fn refused(error: ClientError) -> anyhow::Error {
    let (code, message) = match &error {
        ClientError::Refused { status: 404, .. } => (4, error.to_string()),
        ClientError::Refused { status: 401, .. } => {
            (3, format!("{error} (check OPLEDGER_TOKEN or --token-file)"))
        }
        ClientError::Refused { .. } => (3, error.to_string()),
        ClientError::Transport(_) | ClientError::Unexpected(_) => (1, error.to_string()),
    };
    Verdict { code, message }.into()
}
