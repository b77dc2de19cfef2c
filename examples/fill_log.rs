//! Fills the embedded log of a config with real `claimed` events, fast: for timing `opledger
//! audit` and `opledger rebuild` over a large history (`scripts/bench` uses it).
//!
//! `cargo run --release --example fill_log -- CONFIG [EVENTS=2000000] [TOOL=payments.charge]`
//!
//! Every event is what the ledger itself appends for a first claim under a new key: the scope
//! of (principal, tool, key), its operation id, the fingerprint of a charge request computed
//! with the tool's contract, the contract's terms, and a reply address — encoded with the
//! current event schema and appended under its scope to the partition the router would pick.
//! Keys carry a random run nonce, so every event is a distinct operation (also when the log
//! already holds events) and a fold answers each one `execute`. What it skips is the arbiter:
//! the events go to the log in batches of up to 4,096 per partition (one group commit each)
//! instead of one append per caller.

use opledger::config::{Backend, Config};
use opledger::core::event::{self, Claim, Envelope, EventBody, ReplyTo};
use opledger::core::fingerprint;
use opledger::core::key::{ClientKey, OperationId, ScopedHash};
use opledger::log::embedded::EmbeddedLog;
use opledger::log::model::{EventLog, NewRecord, partition_for};
use std::sync::Arc;
use std::time::Instant;

/// Records per append call: the embedded log's largest group-commit batch.
const BATCH: usize = 4096;

/// Appends in flight at once, across all partitions.
const IN_FLIGHT: usize = 64;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(config_path) = args.first() else {
        anyhow::bail!("usage: fill_log CONFIG [EVENTS=2000000] [TOOL=payments.charge]");
    };
    let events: u64 = args.get(1).map_or(Ok(2_000_000), |s| s.parse())?;
    let tool = args.get(2).map_or("payments.charge", String::as_str);

    let config = Config::load(std::path::Path::new(config_path))?;
    anyhow::ensure!(
        matches!(config.backend, Backend::Embedded),
        "fill_log writes the embedded log; the config names another backend"
    );
    let contract = config
        .tools
        .get(tool)
        .ok_or_else(|| anyhow::anyhow!("the config declares no tool `{tool}`"))?;
    anyhow::ensure!(
        contract.is_recorded(),
        "claims of `{tool}` are not recorded"
    );
    let mut principals: Vec<_> = config
        .principals_by_token
        .values()
        .filter(|p| p.may_use(tool))
        .collect();
    principals.sort_by(|a, b| a.id.cmp(&b.id));
    let principal = principals
        .first()
        .ok_or_else(|| anyhow::anyhow!("no principal of the config may use `{tool}`"))?
        .id
        .clone();

    let dir = config.data_dir.join("log");
    let log = Arc::new(EmbeddedLog::open(
        &dir,
        opledger::node::embedded_options(&config)?,
    )?);
    let partitions = log.partition_count();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let before: u64 = rt.block_on(async {
        let mut sum = 0;
        for p in 0..partitions {
            sum += log.end_offset(p).await?;
        }
        anyhow::Ok(sum)
    })?;

    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let node: u64 = rand_u64(&nonce);
    let terms = contract.terms();
    let spec = &contract.fingerprint;
    let generators = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let in_flight = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let started = Instant::now();

    // Each generator thread encodes its share of the events into per-partition batches and
    // hands every full batch to the runtime; the semaphore bounds the batches in memory.
    let appends = std::thread::scope(|s| {
        let workers: Vec<_> = (0..generators)
            .map(|g| {
                let (log, rt, in_flight) = (log.clone(), rt.handle().clone(), in_flight.clone());
                let (nonce, principal) = (&nonce, &principal);
                s.spawn(move || -> anyhow::Result<Vec<_>> {
                    let mut pending: Vec<Vec<NewRecord>> = vec![Vec::new(); partitions as usize];
                    let mut handles = Vec::new();
                    let mut send = |p: u32, batch: Vec<NewRecord>| {
                        let permit = rt.block_on(in_flight.clone().acquire_owned());
                        let log = log.clone();
                        handles.push(rt.spawn(async move {
                            let _permit = permit;
                            log.append(p, batch).await.map(|a| a.len())
                        }));
                    };
                    for i in (g..events).step_by(generators as usize) {
                        let w = i % 64;
                        let key = ClientKey::parse(&format!("fill-{nonce}-{i}"))?;
                        let scope = ScopedHash::of(principal, tool, &key);
                        let request = serde_json::json!({
                            "amount": format!("{}.{:02}", i % 1000, w),
                            "currency": "EUR",
                            "customer": format!("c-{w}"),
                        });
                        let envelope = Envelope {
                            scope,
                            operation_id: OperationId::for_scope(&scope),
                            reply_to: Some(ReplyTo { node, request: i }),
                            body: EventBody::Claimed(Claim {
                                principal: principal.clone(),
                                tool: tool.to_owned(),
                                holder: format!("worker-{w}"),
                                fingerprint: fingerprint::fingerprint_v1(spec, &request, None)?,
                                parent: None,
                                terms,
                                intake: None,
                            }),
                        };
                        let p = partition_for(&scope.0, partitions);
                        let batch = &mut pending[p as usize];
                        batch.push(NewRecord {
                            key: scope.0,
                            payload: event::encode(&envelope)?,
                        });
                        if batch.len() == BATCH {
                            send(p, std::mem::take(batch));
                        }
                    }
                    for (p, batch) in (0..).zip(pending) {
                        if !batch.is_empty() {
                            send(p, batch);
                        }
                    }
                    Ok(handles)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("generator thread"))
            .collect::<anyhow::Result<Vec<_>>>()
    })?;

    let appended: usize = rt.block_on(async {
        let mut sum = 0;
        for handle in appends.into_iter().flatten() {
            sum += handle.await??;
        }
        anyhow::Ok(sum)
    })?;
    let took = started.elapsed();
    let after: u64 = rt.block_on(async {
        let mut sum = 0;
        for p in 0..partitions {
            sum += log.end_offset(p).await?;
        }
        anyhow::Ok(sum)
    })?;
    anyhow::ensure!(
        appended as u64 == events && after - before == events,
        "appended {appended} of {events} events (the log grew by {})",
        after - before
    );
    drop(rt);
    Arc::into_inner(log)
        .expect("no append holds the log any more")
        .close()?;
    println!(
        "fill_log: appended {events} claimed events ({} distinct operations of `{tool}`) to {} in {:.2} s ({:.0} events/s); the log holds {after} events",
        events,
        dir.display(),
        took.as_secs_f64(),
        events as f64 / took.as_secs_f64()
    );
    Ok(())
}

/// A 64-bit number from the run nonce: the reply address's node id, as a real node draws one.
fn rand_u64(nonce: &str) -> u64 {
    u64::from_str_radix(&nonce[..16], 16).unwrap_or(1)
}
