//! The recovery consumer (R15, R17–R19): finds lapsed leases and unknown outcomes, and asks the
//! external system before anything else happens.
//!
//! Each sweep reads a bounded slice of the projection (a cursor walks it in id order), picks
//! the due candidates in a stable order (due time, then id) up to the concurrency limit, and
//! for each one appends `recovery_started`. Only if the arbiter grants the recovery lease — one
//! recoverer per record, decided by log order — does it query the tool's `status_url` (bounded
//! timeout, 429 and `Retry-After` respected) and append what it learned as `evidence_reported`.
//! It never writes state itself, and a lapsed lease alone never counts as proof (R15): the
//! arbiter applies the tool's policy and the evidence. Wall-clock time only *suspects* a lapsed
//! lease; the arbiter judges it by the log's time.

use crate::core::contract::ToolContract;
use crate::core::decision::Decision;
use crate::core::event::{BusinessResult, EventBody, Evidence, EvidenceReport, RecoveryStart};
use crate::core::fingerprint::{FingerprintSpec, fingerprint_v1};
use crate::core::key::OperationId;
use crate::core::operation::{OpState, OperationRecord};
use crate::ledger::Ledger;
use crate::log::model::EventLog;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How the recovery consumer runs.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// Time between sweeps.
    pub tick: Duration,
    /// Most investigations at once (R19).
    pub concurrency: usize,
    /// Most projection records read per sweep.
    pub scan_batch: usize,
    /// How long one investigation may take before another recoverer may start one.
    pub lease: Duration,
    /// Timeout of one status query.
    pub query_timeout: Duration,
    /// This recoverer's name in the log (node id).
    pub name: String,
}

impl Default for RecoveryOptions {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(1),
            concurrency: 16,
            scan_batch: 10_000,
            lease: Duration::from_secs(30),
            query_timeout: Duration::from_secs(5),
            name: format!("recoverer-{}", uuid::Uuid::new_v4().simple()),
        }
    }
}

/// Runs sweeps until `stop` turns true.
pub async fn run<L: EventLog>(
    ledger: Arc<Ledger<L>>,
    options: RecoveryOptions,
    mut stop: watch::Receiver<bool>,
) {
    let client = match reqwest::Client::builder()
        .timeout(options.query_timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "recovery: cannot build the HTTP client; recovery is off");
            return;
        }
    };
    let mut cursor: Option<OperationId> = None;
    let mut ticks = tokio::time::interval(options.tick);
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => return,
            _ = ticks.tick() => {}
        }
        let now = crate::log::embedded::system_clock_ms();
        let (candidates, next) = match scan(&ledger, cursor, options.scan_batch, now) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "recovery: scan failed; trying again next tick");
                continue;
            }
        };
        cursor = next;
        let mut tasks = tokio::task::JoinSet::new();
        for record in candidates.into_iter().take(options.concurrency) {
            let (ledger, client, options) = (ledger.clone(), client.clone(), options.clone());
            tasks.spawn(async move { investigate(&ledger, &client, &options, record).await });
        }
        while tasks.join_next().await.is_some() {}
    }
}

/// When a record is due for investigation (wall-clock suspicion), if it is.
fn due_at(record: &OperationRecord, now_ms: u64) -> Option<u64> {
    let due = match &record.state {
        OpState::Processing {
            lease_expires_at_ms,
        } => *lease_expires_at_ms,
        OpState::OutcomeUnknown { .. } if record.terms.queryable => {
            let lease_until = record.recovery.lease.as_ref().map_or(0, |l| l.until_ms);
            record.recovery.next_check_at_ms.max(lease_until)
        }
        _ => return None,
    };
    (due <= now_ms).then_some(due)
}

/// Reads up to `batch` records after `cursor`; returns the due ones in stable order (due time,
/// then id) and where the next sweep continues (`None`: start over).
fn scan<L: EventLog>(
    ledger: &Ledger<L>,
    cursor: Option<OperationId>,
    batch: usize,
    now_ms: u64,
) -> Result<(Vec<OperationRecord>, Option<OperationId>), crate::projection::ProjectionError> {
    let records = ledger.projection().records_after(cursor, batch)?;
    let next = if records.len() < batch {
        None
    } else {
        records.last().map(|r| r.id)
    };
    let mut due: BTreeMap<(u64, OperationId), OperationRecord> = BTreeMap::new();
    for record in records {
        if let Some(at) = due_at(&record, now_ms) {
            due.insert((at, record.id), record);
        }
    }
    Ok((due.into_values().collect(), next))
}

async fn investigate<L: EventLog>(
    ledger: &Ledger<L>,
    client: &reqwest::Client,
    options: &RecoveryOptions,
    record: OperationRecord,
) {
    let start = EventBody::RecoveryStarted(RecoveryStart {
        recoverer: options.name.clone(),
        lease_ms: u64::try_from(options.lease.as_millis()).unwrap_or(u64::MAX),
    });
    let granted = match ledger.append_for(record.id, start).await {
        Ok(answer) if answer.decision == Decision::Accepted => answer.record,
        Ok(_) => return, // another recoverer has it, or it is no longer due
        Err(e) => {
            tracing::warn!(operation = %record.id, error = %e, "recovery: cannot start");
            return;
        }
    };
    let Some(now) = granted else { return };
    if !matches!(now.state, OpState::OutcomeUnknown { .. }) {
        return; // the tool's policy settled it (released or sent to a person)
    }
    let Some(contract) = ledger.tools().get(&now.tool) else {
        tracing::warn!(operation = %now.id, "recovery: the tool is no longer configured");
        return;
    };
    let Some(url) = &contract.status_url else {
        return;
    };
    let evidence = query(client, url, &now.id, contract).await;
    tracing::info!(operation = %now.id, evidence = evidence_kind(&evidence), "recovery: status queried");
    let report = EventBody::EvidenceReported(EvidenceReport {
        recoverer: options.name.clone(),
        evidence,
    });
    if let Err(e) = ledger.append_for(now.id, report).await {
        tracing::warn!(operation = %now.id, error = %e, "recovery: cannot report evidence");
    }
}

fn evidence_kind(e: &Evidence) -> &'static str {
    match e {
        Evidence::Found { .. } => "found",
        Evidence::Failed { .. } => "failed",
        Evidence::Absent => "absent",
        Evidence::Inconclusive { .. } => "inconclusive",
    }
}

/// Asks the external system; every failure to learn something is `Inconclusive`.
async fn query(
    client: &reqwest::Client,
    url_template: &str,
    id: &OperationId,
    contract: &ToolContract,
) -> Evidence {
    let url = url_template.replace("{operation_id}", &id.to_string());
    let response = match client.get(&url).send().await {
        Ok(r) => r,
        Err(e) => {
            let reason = if e.is_timeout() {
                "timeout"
            } else {
                "unreachable"
            };
            return inconclusive(reason, None);
        }
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match response.bytes().await {
        Ok(body) => interpret(status, retry_after.as_deref(), &body, &contract.fingerprint),
        Err(_) => inconclusive("body_unreadable", None),
    }
}

fn inconclusive(reason: &str, retry_after_ms: Option<u64>) -> Evidence {
    Evidence::Inconclusive {
        reason: reason.to_owned(),
        retry_after_ms,
    }
}

/// Longest `Retry-After` honoured: an hour.
const RETRY_AFTER_MS_MAX: u64 = 3_600_000;

/// Interprets a status answer by the protocol in ARCHITECTURE.md. Pure.
pub fn interpret(
    status: u16,
    retry_after: Option<&str>,
    body: &[u8],
    spec: &FingerprintSpec,
) -> Evidence {
    match status {
        404 => Evidence::Absent,
        429 => {
            let after = retry_after
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| s.saturating_mul(1000).min(RETRY_AFTER_MS_MAX));
            inconclusive("rate_limited", after)
        }
        200 => interpret_body(body, spec),
        other => inconclusive(&format!("http_{other}"), None),
    }
}

fn interpret_body(body: &[u8], spec: &FingerprintSpec) -> Evidence {
    let Ok(answer) = serde_json::from_slice::<serde_json::Value>(body) else {
        return inconclusive("malformed_answer", None);
    };
    let text = |k: &str| answer.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    match text("state").as_deref() {
        Some("succeeded") => {
            let Some(resource_ref) =
                text("resource_ref").filter(|r| !r.is_empty() && r.len() <= 1024)
            else {
                return inconclusive("malformed_answer", None);
            };
            let mut headers = std::collections::BTreeMap::new();
            if let Some(version) = text("version") {
                headers.insert("x-resource-version".to_owned(), version);
            }
            Evidence::Found {
                result: BusinessResult {
                    resource_ref,
                    status: 200,
                    headers,
                },
                fields: answer.get("fields").and_then(|f| reported_fields(f, spec)),
            }
        }
        Some("failed") => match text("code").filter(|c| !c.is_empty() && c.len() <= 128) {
            Some(code) => Evidence::Failed { code },
            None => inconclusive("malformed_answer", None),
        },
        _ => inconclusive("malformed_answer", None),
    }
}

/// The fingerprint of the categories the external system reported fields for, computed with
/// the tool's contract — so the arbiter compares categories, never values.
fn reported_fields(
    fields: &serde_json::Value,
    spec: &FingerprintSpec,
) -> Option<crate::core::fingerprint::Fingerprint> {
    let present = |path: &str| {
        path.split('.')
            .try_fold(fields, |v, segment| v.get(segment))
            .is_some()
    };
    let reported: BTreeMap<_, _> = spec
        .fields
        .iter()
        .filter(|(_, paths)| !paths.is_empty() && paths.iter().all(|p| present(p)))
        .map(|(c, paths)| (*c, paths.clone()))
        .collect();
    if reported.is_empty() {
        return None;
    }
    fingerprint_v1(&FingerprintSpec { fields: reported }, fields, None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fingerprint::Category;

    fn spec() -> FingerprintSpec {
        let mut s = FingerprintSpec::default();
        s.fields
            .insert(Category::Amount, vec!["amount".into(), "currency".into()]);
        s.fields
            .insert(Category::Recipient, vec!["customer".into()]);
        s
    }

    #[test]
    fn status_answers_map_to_evidence_by_the_protocol() {
        let s = spec();
        assert_eq!(interpret(404, None, b"", &s), Evidence::Absent);
        assert_eq!(
            interpret(429, Some("7"), b"", &s),
            inconclusive("rate_limited", Some(7_000))
        );
        assert_eq!(
            interpret(503, None, b"", &s),
            inconclusive("http_503", None)
        );
        assert_eq!(
            interpret(200, None, b"not json", &s),
            inconclusive("malformed_answer", None)
        );
        assert_eq!(
            interpret(200, None, br#"{"state":"failed","code":"declined"}"#, &s),
            Evidence::Failed {
                code: "declined".into()
            }
        );
        let Evidence::Found { result, fields } = interpret(
            200,
            None,
            br#"{"state":"succeeded","resource_ref":"ch_1","version":"v3","fields":{"amount":"10.50","currency":"EUR"}}"#,
            &s,
        ) else {
            panic!("found expected");
        };
        assert_eq!(result.resource_ref, "ch_1");
        assert_eq!(
            result.headers.get("x-resource-version").map(String::as_str),
            Some("v3")
        );
        let fields = fields.expect("amount reported");
        let intent = fingerprint_v1(
            &s,
            &serde_json::json!({"amount": "10.5", "currency": "EUR", "customer": "c"}),
            None,
        )
        .expect("fingerprints");
        assert_eq!(fields.parts.len(), 1, "only the reported category");
        assert_eq!(Some(&fields.parts[0].1), intent.part(Category::Amount));
    }

    #[test]
    fn a_huge_retry_after_is_capped() {
        assert_eq!(
            interpret(429, Some("99999999"), b"", &spec()),
            inconclusive("rate_limited", Some(RETRY_AFTER_MS_MAX))
        );
    }
}
