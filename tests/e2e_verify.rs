//! Tamper evidence through the real binary: `verify` and `audit` print the same chain heads
//! and root; a byte changed in the middle of a segment, with its frame checksum recomputed, is
//! named by partition and offset; heads recorded earlier catch what a seal alone cannot
//! (events removed, a record re-sealed by someone who knows the scheme); and the same records
//! on the Kafka backend give the same heads.

mod common;

use common::frames::{self, Frame};
use common::{Server, TOKEN_A, charge, kafka_log, test_brokers};
use opledger::log::model::EventLog;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn opledger(config: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opledger"))
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .expect("runs opledger")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("prints JSON")
}

fn failure_of(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A ledger with some history: claims, completions and conflicts, then stopped.
async fn history(dir: &Path) -> std::path::PathBuf {
    let server = Server::start(dir);
    for i in 0..40 {
        let (_, c) = server
            .claim(TOKEN_A, &format!("v-{i}"), charge("w", "3", "c"))
            .await;
        let id = c["operation_id"].as_str().expect("id").to_owned();
        if i % 2 == 0 {
            server.complete(TOKEN_A, &id, "w", &format!("r{i}")).await;
        }
    }
    let config = server.config.clone();
    server.stop();
    config
}

/// The frame in the middle of the busiest partition's first segment.
fn middle_frame(log: &Path, chain: &Value) -> (u32, std::path::PathBuf, Frame) {
    let partition = frames::busiest_partition(chain);
    let segment = frames::segments(log, partition).remove(0);
    let all = frames::frames(&segment);
    assert!(all.len() >= 5, "a segment with history: {}", all.len());
    let frame = all[all.len() / 2].clone();
    (partition, segment, frame)
}

#[tokio::test]
async fn a_byte_changed_under_a_valid_checksum_is_named_by_partition_and_offset() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = history(tmp.path()).await;
    let audit = json_of(&opledger(&config, &["audit"]));
    let verified = json_of(&opledger(&config, &["verify"]));
    assert_eq!(verified["verified"], true);
    assert_eq!(verified["seals_checked"], true);
    assert_eq!(verified["unread_tail_bytes"], serde_json::json!({}));
    assert_eq!(verified["chain"], audit["chain"], "audit and verify agree");
    assert_eq!(verified["events"], audit["events"]);
    assert_eq!(
        audit["chain"]["root"].as_str().map(str::len),
        Some(64),
        "{audit}"
    );
    let recorded = tmp.path().join("recorded-heads.json");
    std::fs::write(&recorded, audit.to_string()).expect("keeps the heads");

    let log = tmp.path().join("data").join("log");
    let (partition, segment, frame) = middle_frame(&log, &audit["chain"]);
    let at = frame.payload_start() + 3;
    frames::rewrite(&segment, &frame, |bytes| bytes[at] ^= 0x01);

    for command in [&["verify"][..], &["audit"], &["serve"]] {
        let err = failure_of(&opledger(&config, command));
        assert!(
            err.contains(&format!(
                "hash chain of partition {partition} breaks at offset {}",
                frame.offset
            )),
            "{command:?}: {err}"
        );
        assert_eq!(err.matches("breaks at").count(), 1, "said once: {err}");
    }
    // A changed timestamp is caught the same way: the seal binds it too.
    frames::rewrite(&segment, &frame, |bytes| bytes[at] ^= 0x01);
    json_of(&opledger(
        &config,
        &["verify", "--against", recorded.to_str().expect("utf-8")],
    ));
    frames::rewrite(&segment, &frame, |bytes| bytes[8 + 8] ^= 0x01);
    let err = failure_of(&opledger(&config, &["verify"]));
    assert!(
        err.contains(&format!("breaks at offset {}", frame.offset)),
        "{err}"
    );
}

#[tokio::test]
async fn recorded_heads_catch_removed_events_and_a_record_resealed_by_someone_who_knows_the_scheme()
{
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = history(tmp.path()).await;
    let recorded_json = json_of(&opledger(&config, &["verify"]));
    let recorded = tmp.path().join("recorded-heads.json");
    std::fs::write(&recorded, recorded_json.to_string()).expect("keeps the heads");
    let against = ["verify", "--against", recorded.to_str().expect("utf-8")];
    let log = tmp.path().join("data").join("log");
    let partition = frames::busiest_partition(&recorded_json["chain"]);
    let segment = frames::segments(&log, partition).pop().expect("a segment");
    let all = frames::frames(&segment);
    let last = all.last().expect("a frame").clone();

    // The last event cut off at a frame boundary: the log itself looks whole.
    let bytes = std::fs::read(&segment).expect("reads");
    std::fs::write(&segment, &bytes[..last.position]).expect("cuts");
    let alone = json_of(&opledger(&config, &["verify"]));
    assert_ne!(alone["chain"]["root"], recorded_json["chain"]["root"]);
    let err = failure_of(&opledger(&config, &against));
    assert!(
        err.contains(&format!("partition {partition} holds {}", last.offset))
            && err.contains("events were removed"),
        "{err}"
    );

    // The event put back, changed, with its seal recomputed from the public scheme.
    std::fs::write(&segment, &bytes).expect("restores");
    json_of(&opledger(&config, &against));
    reseal_last_with_a_changed_byte(&log, partition, &segment, &last);
    json_of(&opledger(&config, &["verify"]));
    let err = failure_of(&opledger(&config, &against));
    assert!(
        err.contains(&format!(
            "partition {partition}: its first {} events are not the ones recorded",
            last.offset + 1
        )),
        "{err}"
    );
}

/// Changes a payload byte of the partition's last record and writes the seal that the chain
/// recomputed over the changed record gives, as an attacker who read `schemas/chain.md` would.
fn reseal_last_with_a_changed_byte(log: &Path, partition: u32, segment: &Path, last: &Frame) {
    use opledger::log::chain::{self, Chain};
    let mut chain = Chain::new(partition);
    for seg in frames::segments(log, partition) {
        let bytes = std::fs::read(&seg).expect("reads");
        for f in frames::frames(&seg) {
            let frame = &bytes[f.position..f.position + f.len];
            let key: [u8; 32] = frame[24..56].try_into().expect("key");
            let mut payload = frame[f.payload_start()..].to_vec();
            if f.offset == last.offset {
                payload[3] ^= 0x01;
                let link = chain.push(&key, &payload);
                let ts = u64::from_le_bytes(frame[16..24].try_into().expect("ts"));
                let seal = chain::seal(&link, ts);
                let start = last.payload_start();
                frames::rewrite(segment, last, |bytes| {
                    bytes[start + 3] ^= 0x01;
                    bytes[56..88].copy_from_slice(&seal);
                });
                return;
            }
            chain.push(&key, &payload);
        }
    }
    panic!("the last record was not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_records_on_the_kafka_backend_give_the_same_heads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = history(&tmp.path().join("embedded")).await;
    let embedded = json_of(&opledger(&config, &["verify"]));

    // Copy every partition's records, in order, into a fresh topic.
    let name = format!("verify-{}", uuid::Uuid::new_v4().simple());
    let kafka_dir = tmp.path().join("kafka");
    std::fs::create_dir_all(&kafka_dir).expect("dir");
    let kafka_config = kafka_dir.join("opledger.toml");
    let text = common::config_text_log(
        &kafka_dir.join("data"),
        &kafka_log(&test_brokers(), &name, 4),
        "",
    );
    std::fs::write(&kafka_config, text).expect("writes config");
    let source = opledger::log::embedded::EmbeddedLog::open_read_only(
        &tmp.path().join("embedded").join("data").join("log"),
    )
    .expect("reads the embedded log");
    let loaded = opledger::config::Config::load(&kafka_config).expect("loads");
    let target = opledger::node::open_log(&loaded)
        .await
        .expect("opens the topic");
    for partition in 0..source.partition_count() {
        let end = source.end_offset(partition).await.expect("end");
        let records = source
            .read(partition, 0, end as usize)
            .await
            .expect("reads");
        assert_eq!(records.len() as u64, end);
        let copies = records
            .iter()
            .map(|r| opledger::log::model::NewRecord {
                key: r.key,
                payload: r.payload.to_vec(),
            })
            .collect();
        target.append(partition, copies).await.expect("copies");
    }
    drop(target);

    let on_kafka = json_of(&opledger(&kafka_config, &["verify"]));
    assert_eq!(on_kafka["chain"], embedded["chain"], "same heads and root");
    assert_eq!(
        on_kafka["seals_checked"], false,
        "Kafka records carry no seal"
    );
    let recorded = tmp.path().join("embedded-heads.json");
    std::fs::write(&recorded, embedded.to_string()).expect("keeps the heads");
    let against = ["verify", "--against", recorded.to_str().expect("utf-8")];
    assert_eq!(
        json_of(&opledger(&kafka_config, &against))["verified"],
        true
    );
}

/// A damaged last event (checksum not recomputed) is what a torn tail looks like: a snapshot
/// cannot tell it from a batch being written, so `verify` does not fail on it, but it says
/// how many bytes it could not read, where, and what to do.
#[tokio::test]
async fn bytes_a_snapshot_cannot_read_are_reported_not_passed_over() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = history(tmp.path()).await;
    let before = json_of(&opledger(&config, &["verify"]));
    let partition = frames::busiest_partition(&before["chain"]);
    let log = tmp.path().join("data").join("log");
    let segment = frames::segments(&log, partition).pop().expect("a segment");
    let last = frames::frames(&segment).pop().expect("a frame");
    let mut bytes = std::fs::read(&segment).expect("reads");
    bytes[last.position + last.payload_start()] ^= 0x01;
    std::fs::write(&segment, &bytes).expect("damages");
    let out = opledger(&config, &["verify"]);
    let after = json_of(&out);
    assert_eq!(
        after["unread_tail_bytes"][partition.to_string()],
        last.len as u64,
        "{after}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("partition {partition}: {} bytes", last.len))
            && stderr.contains("with the node stopped"),
        "{stderr}"
    );
}
