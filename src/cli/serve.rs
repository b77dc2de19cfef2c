//! `opledger serve`: start a node and the HTTP API; stop cleanly on Ctrl-C or SIGTERM.

use super::{ConfigArgs, load, progress, runtime};
use anyhow::Context;
use opledger::api::{ApiState, reload_principals, router};
use opledger::config::{Backend, Config, KafkaSettings};
use opledger::node::Node;
use std::net::SocketAddr;
use std::sync::Arc;

/// Command-line settings that override the config.
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--log`.
    pub backend: Option<String>,
    /// `--brokers`.
    pub brokers: Option<String>,
}

/// Applies `--log` / `--brokers` to the config's backend.
fn override_backend(config: &mut Config, o: &Overrides) -> anyhow::Result<()> {
    match (o.backend.as_deref(), &o.brokers, &mut config.backend) {
        (Some("embedded"), None, _) => config.backend = Backend::Embedded,
        (Some("embedded"), Some(_), _) => anyhow::bail!("--brokers needs --log kafka"),
        (Some("kafka") | None, Some(brokers), Backend::Kafka(k)) => k.brokers = brokers.clone(),
        (Some("kafka") | None, Some(brokers), Backend::Embedded) => {
            config.backend = Backend::Kafka(KafkaSettings::new(brokers));
        }
        (Some("kafka"), None, Backend::Embedded) => {
            anyhow::bail!("--log kafka needs --brokers host:port (or [log] brokers in the config)")
        }
        _ => {}
    }
    Ok(())
}

/// Runs `serve`.
pub fn run(args: &ConfigArgs, overrides: Overrides) -> anyhow::Result<()> {
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let (mut config, dev_token) = load(args)?;
    if let Some(path) = &args.config {
        config.check_serviceable(path)?;
    }
    if let Some(addr) = overrides.listen {
        config.listen = addr;
    }
    override_backend(&mut config, &overrides)?;
    if config.tls.is_some() && matches!(config.backend, Backend::Kafka(_)) {
        // As `check` says of a config that names Kafka itself.
        anyhow::bail!(
            "[tls] works on the embedded backend only: on Kafka, nodes ask each other on the listener over plain HTTP; terminate TLS in a proxy in front of each node"
        );
    }
    // Before anything is opened: a certificate that cannot serve stops the start.
    let tls = match &config.tls {
        Some(files) => Some(opledger::api::tls::acceptor(files)?),
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    opledger::node::open_files::raise(config.http.connections_max);
    runtime()?.block_on(async move {
        // Listen for SIGHUP from the start: its default action would kill a node that is still
        // catching up.
        let hangups = hangup_signals();
        // Bind first: on Kafka the node announces the address it is reached at.
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let addr = listener.local_addr()?;
        config.listen = addr;
        let mut bar = progress::Bar::new("applying the log");
        let then = "writing the last pass to the projection";
        let mut node = Node::start(&config, |p| bar.show_catch_up(p.applied, p.total, then))
            .await
            .context("cannot start the ledger")?;
        bar.finish();
        let state = Arc::new(ApiState {
            ledger: node.ledger.clone(),
            principals: node.principals.clone(),
            config_path: args.config.clone(),
            body_bytes_max: config.body_bytes_max,
            body_read_timeout: config.http.body_read_timeout,
            metrics: node.metrics.clone(),
            health: node.health(),
            readiness: Default::default(),
        });
        if let Some(token) = &dev_token {
            print_dev_banner(addr, token, &config.data_dir);
        }
        tracing::info!(%addr, data_dir = %config.data_dir.display(), partitions = node.ledger.partition_count(), "opledger serving");
        // Register SIGINT/SIGTERM before the listening line: a stop sent right after it would
        // otherwise meet the default action and end the node uncleanly. (While the node catches
        // up, the default action stays: Ctrl-C then stops it at once, which costs only a replay.)
        let stop = stop_signal()?;
        // Tests and scripts wait for this exact line on stdout.
        println!("opledger listening on {scheme}://{addr}");
        let reloader = tokio::spawn(reload_on_sighup(hangups, state.clone()));
        let mut app = router(state.clone()).merge(opledger::console::routes(
            state.clone(),
            tls.is_some(),
        ));
        // The MCP gateway, when the config declares upstreams: one more caller of the ledger.
        let gateway_stop = tokio_util::sync::CancellationToken::new();
        let gateway_streams = tokio_util::sync::CancellationToken::new();
        if let Some(mcp) = config.mcp.clone() {
            let upstreams = mcp.upstreams.len();
            let gateway = opledger::mcp::Gateway::start(
                mcp,
                state.clone(),
                gateway_stop.clone(),
                gateway_streams.clone(),
            );
            app = app.merge(gateway.router());
            tracing::info!(upstreams, "MCP gateway serving at /mcp");
        }
        if let Some(inbound) = node.inbound.clone() {
            // On a shared log, other nodes ask this one for the partitions it serves.
            app = app.merge(opledger::cluster::endpoint::routes(inbound));
        }
        // A stop ends the gateway's open streams at once, so they do not hold the grace period
        // (its upstreams stay until the requests in flight are done).
        let gateway_cancel = gateway_streams.clone();
        let stop = async move {
            stop.await;
            gateway_cancel.cancel();
        };
        let server = opledger::api::server::serve(listener, app, config.http, tls, stop);
        let outcome = tokio::select! {
            _ = server => Ok(()),
            failure = node.failed() => Err(anyhow::Error::new(failure).context("a partition arbiter stopped")),
        };
        tracing::info!("shutting down");
        // Upstream children are stopped and open MCP streams end.
        gateway_stop.cancel();
        // The reloader holds the API state (and through it the log): stop it first so the log
        // closes cleanly and its errors are reported.
        reloader.abort();
        let _ = reloader.await;
        // The API state reaches the log through the ledger: let go of it, so the node can
        // close the log itself and report what closing it says.
        drop(state);
        node.shutdown().await.context("clean shutdown failed")?;
        outcome
    })
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

fn hangup_signals() -> Hangups {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let hangups = signal(SignalKind::hangup()).ok();
        if hangups.is_none() {
            tracing::warn!("cannot listen for SIGHUP; use POST /v1/admin/reload");
        }
        hangups
    }
    #[cfg(not(unix))]
    None
}

/// SIGHUP reloads principals and grants from the config file (R20: a revoked grant withholds
/// replayed results from the next request on).
async fn reload_on_sighup(hangups: Hangups, state: Arc<ApiState>) {
    #[cfg(unix)]
    if let Some(mut hangups) = hangups {
        while hangups.recv().await.is_some() {
            if let Err(e) = reload_principals(&state) {
                tracing::error!(code = e.code, message = %e.message, "config reload failed; keeping the previous principals");
            }
        }
    }
    #[cfg(not(unix))]
    drop((hangups, state));
}

/// Resolves on Ctrl-C (SIGINT) or SIGTERM. The handlers are registered when this is called, not
/// when the future is first polled.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {},
                _ = terminate.recv() => {},
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

fn print_dev_banner(addr: SocketAddr, token: &str, data_dir: &std::path::Path) {
    println!(
        "\
opledger: no config given, so this is the embedded default with sample tools
  (payments.charge, tickets.create, messages.send, profile.set_email, search.lookup).
  data:      {data}
  dev token: {token}   (principal `dev`; new on every start; use --config for real tokens)

  Claim, then complete, then claim again to see the replay:
    curl -s -X POST http://{addr}/v1/operations \\
      -H 'Authorization: Bearer {token}' -H 'Idempotency-Key: order-42-charge' \\
      -H 'Content-Type: application/json' \\
      -d '{{\"tool\":\"payments.charge\",\"holder\":\"worker-1\",\"request\":{{\"amount\":\"10.50\",\"currency\":\"EUR\",\"customer\":\"c-7\"}}}}'
",
        data = data_dir.display(),
    );
}
