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
    let client = client(&node)?;
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
                let page = ops.get(&format!("/v1/operations?{}", query_of(&query))).await?;
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
            OpsCommand::Takeover { id, reason, yes } => {
                let path = operation_path(&id);
                let now = ops.get(&path).await?;
                confirm(
                    &format!(
                        "Take over {}: from then on executors' reports are refused, claims answer `manual`, and only you can resolve it.",
                        render::summary(&now)
                    ),
                    yes,
                )?;
                // What was confirmed is what is acted on: a change since is refused.
                let body = json!({"expected_version": now["version"], "reason": reason});
                let done = ops.post(&format!("{path}/takeover"), body).await?;
                ops.print(&done, render::decided)
            }
            OpsCommand::Resolve {
                id,
                outcome,
                resource_ref,
                status,
                reason,
                yes,
            } => {
                if matches!(outcome, Outcome::NotExecuted)
                    && (resource_ref.is_some() || status.is_some())
                {
                    return Err(usage("not-executed takes no --resource-ref or --status"));
                }
                let path = operation_path(&id);
                let now = ops.get(&path).await?;
                let (mut body, effect) = match outcome {
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
                body["expected_version"] = now["version"].clone();
                body["reason"] = json!(reason);
                let done = ops.post(&format!("{path}/resolve"), body).await?;
                ops.print(&done, render::decided)
            }
            OpsCommand::Compensate {
                id,
                holder,
                request,
                yes,
            } => {
                let request: Value = serde_json::from_str(&request)
                    .map_err(|e| usage(&format!("--request is not JSON: {e}")))?;
                let path = operation_path(&id);
                let now = ops.get(&path).await?;
                confirm(
                    &format!(
                        "Compensate {}: a new operation that undoes it is claimed for `{holder}`, which must then run it and report.",
                        render::summary(&now)
                    ),
                    yes,
                )?;
                let body = json!({"holder": holder, "request": request});
                let done = ops.post(&format!("{path}/compensate"), body).await?;
                ops.print(&done, render::decided)
            }
        }
    })
}

/// A wrong command line (exit 2).
fn usage(message: &str) -> anyhow::Error {
    Verdict {
        code: 2,
        message: message.to_owned(),
    }
    .into()
}

/// The client of the node `node` names, as the principal whose token it reads.
fn client(node: &NodeArgs) -> anyhow::Result<Client> {
    if !(node.url.starts_with("http://") || node.url.starts_with("https://")) {
        return Err(usage(&format!(
            "--url {:?} is not an http:// or https:// URL like http://127.0.0.1:7070",
            node.url
        )));
    }
    let token = token(node)?;
    match &node.ca_file {
        None => Ok(Client::new(&node.url, &token)),
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| usage(&format!("cannot read {}: {e}", path.display())))?;
            Client::with_roots(&node.url, &token, &pem)
                .map_err(|e| usage(&format!("--ca-file {}: {e}", path.display())))
        }
    }
}

/// The bearer token: the file's first line, else `OPLEDGER_TOKEN`.
fn token(node: &NodeArgs) -> anyhow::Result<String> {
    let token = match &node.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| {
                usage(&format!(
                    "cannot read the token file {}: {e}",
                    path.display()
                ))
            })?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        None => std::env::var("OPLEDGER_TOKEN").unwrap_or_default(),
    };
    if token.is_empty() {
        return Err(usage(
            "no token: set OPLEDGER_TOKEN, or pass --token-file FILE (its first line)",
        ));
    }
    // What a header can carry; never echoed.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(usage("the token has characters a bearer token cannot have"));
    }
    Ok(token)
}

/// What percent-encoding leaves as it is: the URL's unreserved characters.
const UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

fn encoded(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, UNRESERVED).to_string()
}

/// A query string, each value percent-encoded.
fn query_of(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encoded(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The path of operation `id`, the id one path segment whatever it holds.
fn operation_path(id: &str) -> String {
    format!("/v1/operations/{}", encoded(id))
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
        let shown = if self.json {
            format!("{}\n", serde_json::to_string_pretty(value)?)
        } else {
            table(value)
        };
        super::text::out(shown.as_bytes())
    }

    /// The operation and, for an auditor, operator or viewer, its timeline.
    async fn show(&self, id: &str) -> anyhow::Result<()> {
        let path = operation_path(id);
        let now = self.get(&path).await?;
        let history = match self.client.get_json(&format!("{path}/history")).await {
            Ok((_, history)) => Some(history),
            Err(ClientError::Refused { status: 403, .. }) => None,
            Err(e) => return Err(refused(e)),
        };
        let shown = if self.json {
            let both = json!({"operation": now, "history": history});
            format!("{}\n", serde_json::to_string_pretty(&both)?)
        } else {
            render::operation(&now, history.as_ref())
        };
        super::text::out(shown.as_bytes())
    }
}

/// The answer's JSON, or the exit code and message its refusal calls for.
fn answered(result: Result<(u16, Value), ClientError>) -> anyhow::Result<Value> {
    result.map(|(_, value)| value).map_err(refused)
}

fn refused(error: ClientError) -> anyhow::Error {
    let (code, message) = match &error {
        ClientError::Refused { code: what, .. } if what == "not_found" => (4, error.to_string()),
        ClientError::Refused { status: 404, .. } => (
            1,
            format!("{error} (is --url the node's base URL, like http://127.0.0.1:7070?)"),
        ),
        ClientError::Refused { status: 401, .. } => {
            (3, format!("{error} (check OPLEDGER_TOKEN or --token-file)"))
        }
        ClientError::Refused { status: 409, .. } => (5, error.to_string()),
        ClientError::Refused { .. } => (3, error.to_string()),
        // The causes say what went wrong: a refused connection, a certificate nobody trusts.
        ClientError::Transport(e) => (
            1,
            super::with_causes(
                error.to_string(),
                std::iter::successors(std::error::Error::source(e), |c| c.source()),
            ),
        ),
        ClientError::Unexpected(_) => (1, error.to_string()),
    };
    Verdict { code, message }.into()
}
