//! The command line of `opledger ops`: where the node is, who asks, and each command.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Exit codes of `opledger ops`, for scripts.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  the node could not be reached, or answered something that is not the API
  2  the command line is wrong
  3  the node refused the request (no or a wrong token, a missing role, bad input)
  4  no such operation (or not one this token may see)
  5  the ledger rejected the action for the operation's state (the message says why)
  6  not confirmed: nothing was done";

/// Where the node is and who asks.
#[derive(Args, Clone)]
pub struct NodeArgs {
    /// The node's base URL.
    #[arg(
        long,
        env = "OPLEDGER_URL",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    pub(super) url: String,
    /// A file whose first line is the bearer token (else the OPLEDGER_TOKEN environment
    /// variable). Never on the command line, where other users' `ps` would show it.
    #[arg(long, env = "OPLEDGER_TOKEN_FILE", value_name = "FILE", global = true)]
    pub(super) token_file: Option<PathBuf>,
    /// Also trust the PEM certificates in this file (a node whose certificate is self-signed
    /// or of a CA of your own); the system's roots are always trusted.
    #[arg(long, env = "OPLEDGER_CA_FILE", value_name = "FILE", global = true)]
    pub(super) ca_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub(super) json: bool,
}

/// `opledger ops …`.
#[derive(Args)]
#[command(after_help = EXIT_CODES)]
pub struct OpsArgs {
    #[command(flatten)]
    pub(super) node: NodeArgs,
    #[command(subcommand)]
    pub(super) command: OpsCommand,
}

/// How an operator settles a case.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Outcome {
    /// The side effect happened: give its `--resource-ref` and `--status`.
    Completed,
    /// It surely did not happen: the key is released for a retry.
    NotExecuted,
}

#[derive(Subcommand)]
pub(super) enum OpsCommand {
    /// List operations, newest first
    ///
    /// Example: `opledger ops list --state manual --tool payments.charge --since 2026-12-01`.
    List {
        /// Only operations in this state now (processing, completed, failed, outcome_unknown,
        /// manual, released, expired).
        #[arg(long)]
        state: Option<String>,
        /// Only this tool's.
        #[arg(long)]
        tool: Option<String>,
        /// Only this principal's (an agent token lists only its own).
        #[arg(long)]
        principal: Option<String>,
        /// Only those created at or after this time (RFC 3339, or a date).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only those created before this time.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Go on from an earlier page (the cursor it printed).
        #[arg(long)]
        cursor: Option<String>,
    },
    /// The operator queue: what waits for a person, oldest request first
    ///
    /// Example: `opledger ops queue`.
    Queue,
    /// One operation: its state and timeline
    ///
    /// Example: `opledger ops show 0d9c3f5e-…`. The timeline needs the auditor, operator or viewer role.
    Show {
        /// The operation id.
        id: String,
    },
    /// Take an operation over: from then on only you settle it
    ///
    /// An operation waiting for a person (`manual`), one whose outcome is unknown, or one
    /// whose executor's lease lapsed can be taken over; a finished one cannot.
    ///
    /// Example: `opledger ops takeover 0d9c3f5e-…` (it asks first; `--yes` does not).
    Takeover {
        /// The operation id.
        id: String,
        /// Why, in a sentence: kept in the operation's history.
        #[arg(long)]
        reason: Option<String>,
        /// Act without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Settle an operation you took over with what you established
    ///
    /// Example: `opledger ops resolve 0d9c3f5e-… completed --resource-ref ch_9 --status 201`, or
    /// `opledger ops resolve 0d9c3f5e-… not-executed` (the key is released for a retry).
    Resolve {
        /// The operation id.
        id: String,
        /// What happened.
        #[arg(value_enum)]
        outcome: Outcome,
        /// With `completed`: the resource the side effect created or changed.
        #[arg(long, required_if_eq("outcome", "completed"))]
        resource_ref: Option<String>,
        /// With `completed`: its business status.
        #[arg(long, required_if_eq("outcome", "completed"))]
        status: Option<u16>,
        /// Why, in a sentence: kept in the operation's history.
        #[arg(long)]
        reason: Option<String>,
        /// Act without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Compensate a completed operation: claims its tool's compensating tool
    ///
    /// The compensation is a new operation (its id is printed), claimed for `--holder`: that
    /// executor must then run it and report, as for any claim — the command itself runs
    /// nothing. Only the operation's own principal (with the agent role) may compensate it.
    ///
    /// Example: `opledger ops compensate 0d9c3f5e-… --holder refunder-1`.
    Compensate {
        /// The operation id.
        id: String,
        /// The executor that will run the compensation and report it.
        #[arg(long)]
        holder: String,
        /// The compensation's request, as JSON.
        #[arg(long, default_value = "{}")]
        request: String,
        /// Act without asking.
        #[arg(long)]
        yes: bool,
    },
    /// The tools this token may use, with their contracts
    ///
    /// The config's tools (an operator or auditor sees every one); an MCP upstream's tools
    /// are listed by the gateway's `tools/list`.
    ///
    /// Example: `opledger ops tools`.
    Tools,
}
