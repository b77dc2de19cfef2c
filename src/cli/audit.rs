//! The commands that read the log for auditors and rebuilds: `audit`, `verify`, `history`,
//! `export` and `rebuild`. Each reads a snapshot (or the topic) and prints JSON.

use super::{ConfigArgs, load_for_reading, progress, runtime};
use anyhow::Context;
use opledger::config::{Backend, Config};
use opledger::log::any::AnyLog;
use std::sync::Arc;

/// The configured log, for reading only (a snapshot of the embedded log; the Kafka topic as
/// it grows). Call inside the runtime: the Kafka readers belong to it.
pub(super) fn log_for_reading(config: &Config) -> anyhow::Result<Arc<AnyLog>> {
    Ok(Arc::new(match &config.backend {
        Backend::Embedded => {
            let dir = config.data_dir.join("log");
            AnyLog::Embedded(
                opledger::log::embedded::EmbeddedLog::open_read_only(&dir)
                    .with_context(|| format!("cannot read the log in {}", dir.display()))?,
            )
        }
        Backend::Kafka(kafka) => AnyLog::Kafka(
            opledger::log::kafka::KafkaLog::open(opledger::node::kafka_options(config, kafka))
                .with_context(|| format!("cannot read the Kafka topic {}", kafka.topic))?,
        ),
    }))
}

pub(super) fn audit(args: &ConfigArgs) -> anyhow::Result<()> {
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let config = load_for_reading(args)?;
    let mut bar = progress::Bar::new("replaying events");
    let show = |p: opledger::partition::Progress| bar.show(p.applied, p.total);
    let audit = runtime()?.block_on(async {
        let log = log_for_reading(&config)?;
        anyhow::Ok(opledger::consumers::audit::audit(log, show).await?)
    })?;
    bar.finish();
    print_json(&audit)?;
    Ok(())
}

/// Prints `value` as pretty JSON on stdout. A reader that went away (`| head -1`) is not an
/// error: the command's work is done either way.
pub(super) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value)?;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

pub(super) fn export(
    args: &ConfigArgs,
    filter: opledger::consumers::export::ExportFilter,
) -> anyhow::Result<()> {
    use opledger::consumers::export::export as run;
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let config = load_for_reading(args)?;
    filter.check()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = runtime()?.block_on(async {
        let log = log_for_reading(&config)?;
        anyhow::Ok(run(log.as_ref(), &filter, &mut out).await?)
    })?;
    tracing::info!(events = written, "exported");
    // A tool no longer declared may still have history; one that is neither declared nor in
    // the log is a typo, not an empty export.
    if let Some(tool) = &filter.tool
        && written == 0
        && !config.tools.contains_key(tool)
    {
        let mut declared: Vec<&str> = config.tools.keys().map(String::as_str).collect();
        declared.sort_unstable();
        anyhow::bail!(
            "--tool {tool:?} is not declared in this config and no event of the log names it; declared: {}",
            declared.join(", ")
        );
    }
    Ok(())
}

pub(super) fn history(args: &ConfigArgs, id: &str) -> anyhow::Result<()> {
    use opledger::consumers::history::{HistoryError, Source, history as run};
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let config = load_for_reading(args)?;
    let id = opledger::core::key::OperationId::parse(id).ok_or_else(|| {
        anyhow::anyhow!("{id:?} is not an operation id (a UUID as the API answers it)")
    })?;
    let mut bar = progress::Bar::new("folding the operation's partition");
    let show = |p: opledger::partition::Progress| bar.show(p.applied, p.total);
    let (history, source) = runtime()?.block_on(async {
        let log = log_for_reading(&config)?;
        let projection = opledger::node::projection_for_reading(&config, &log);
        let store = projection
            .as_ref()
            .map(|p| p.store() as &dyn opledger::projection::ProjectionStore)
            .map_err(Clone::clone);
        let found = run(log.as_ref(), store, id, show).await;
        if let Ok(projection) = projection {
            // A store error or a disagreement with the log may mean damage: then it is not
            // marked clean again, and the next start rebuilds it.
            let damaged = matches!(found, Err(HistoryError::Store(_)))
                || matches!(&found, Ok((_, Source::Scan { damaged: true, .. })));
            if let Err(e) = projection.close(!damaged) {
                eprintln!("opledger: warning: the projection was not marked clean again, so the next start rebuilds it: {e}");
            }
        }
        anyhow::Ok(found?)
    })?;
    bar.finish();
    if let Source::Scan { reason, .. } = source {
        eprintln!("opledger: read by folding the operation's partition: {reason}");
    }
    print_json(&history.to_json())
}

pub(super) fn rebuild(args: &ConfigArgs, cache_mb: Option<u64>) -> anyhow::Result<()> {
    opledger::telemetry::init(args.log_level.as_deref(), args.log_format);
    let mut config = load_for_reading(args)?;
    if let Some(mb) = cache_mb {
        config.projection_cache_bytes = opledger::config::projection_cache_bytes(mb)
            .map_err(|why| anyhow::anyhow!("--cache-mb: {why}"))?;
    }
    let mut bar = progress::Bar::new("rebuilding projection");
    let summary = runtime()?.block_on(opledger::node::rebuild(&config, |p| {
        let then = "writing the last pass to the projection, then reading it back for the digest";
        bar.show_catch_up(p.applied, p.total, then)
    }))?;
    bar.finish();
    print_json(&summary)?;
    Ok(())
}
