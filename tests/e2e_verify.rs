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

/// The exit code, stdout as JSON (if it printed any) and stderr of a run.
fn answer_of(out: &Output) -> (i32, Option<Value>, String) {
    (
        out.status.code().expect("exited"),
        serde_json::from_slice(&out.stdout).ok(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Behind write-ahead files (two writer threads for four partitions), a segment tail that a
/// crash took is no torn batch: `verify` of the stopped log reads it from the files and
/// verifies every event, and the next start copies it back into the segment.
#[tokio::test]
async fn a_segment_tail_a_crash_took_is_read_from_the_write_ahead_file_and_copied_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = history(tmp.path()).await;
    let log = tmp.path().join("data").join("log");
    let last_segments = || -> Vec<(std::path::PathBuf, u64)> {
        (0..4)
            .map(|p| {
                let segment = frames::segments(&log, p).pop().expect("a segment");
                let len = std::fs::metadata(&segment).expect("segment").len();
                (segment, len)
            })
            .collect()
    };
    // The clean stop synced the segments and emptied the write-ahead files.
    let synced = last_segments();
    let mut server = Server::start_existing(tmp.path(), &config);
    let (s, _) = server.claim(TOKEN_A, "wal-1", charge("w", "3", "c")).await;
    assert_eq!(s, 201);
    server.kill9();
    let whole = json_of(&opledger(&config, &["verify"]));
    assert_eq!(whole["node"], "stopped uncleanly");
    // As a power loss leaves it: the segment the claim went to lost what it got since the
    // start, which only the write-ahead file synced.
    let (segment, len, since) = last_segments()
        .into_iter()
        .zip(&synced)
        .find_map(|((segment, len), (_, before))| {
            (len > *before).then_some((segment, len, *before))
        })
        .expect("the claim's segment grew");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("opens");
    f.set_len(since + (len - since) / 2).expect("cuts");
    let len = since + (len - since) / 2;
    let (code, json, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 0, "{err}");
    let json = json.expect("prints what it verified");
    assert_eq!(
        (json["events"].clone(), json["chain"].clone()),
        (whole["events"].clone(), whole["chain"].clone())
    );
    assert_eq!(
        std::fs::metadata(&segment).expect("segment").len(),
        len,
        "verify changes nothing"
    );
    let server = Server::start_existing(tmp.path(), &config);
    assert!(
        server
            .stderr()
            .contains("copied records back from the write-ahead file"),
        "{}",
        server.stderr()
    );
    let (s, again) = server.claim(TOKEN_A, "wal-1", charge("w", "3", "c")).await;
    assert_eq!(
        (s, again["decision"].as_str()),
        (201, Some("execute")),
        "{again}"
    );
    server.stop();
    // Everything verifies after the copy back, and the start's own events follow the old ones.
    let after = json_of(&opledger(&config, &["verify"]));
    assert_eq!(after["node"], "stopped cleanly");
    assert!(
        after["events"].as_u64() > whole["events"].as_u64(),
        "{after} after {whole}"
    );
}

/// A ledger with some history: claims, completions and conflicts, then stopped.
async fn history(dir: &Path) -> std::path::PathBuf {
    history_on(dir, Server::start(dir)).await
}

/// The same history on a node started by the caller.
async fn history_on(dir: &Path, server: Server) -> std::path::PathBuf {
    let _ = dir;
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
    assert_eq!(verified["node"], "stopped cleanly");
    assert_eq!(verified["seals_checked"], true);
    assert_eq!(verified["unread_tail_bytes"], serde_json::json!({}));
    assert_eq!(
        verified["against_projection"],
        "every applied event is in the log"
    );
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

    // The last unit cut off at its start: the log looks whole, but the mark of the clean
    // stop says how long it was.
    let bytes = std::fs::read(&segment).expect("reads");
    let cut = frames::unit_starts(&segment).pop().expect("a unit");
    let first_cut = all
        .iter()
        .find(|f| f.position >= cut)
        .expect("a cut record")
        .offset;
    std::fs::write(&segment, &bytes[..cut]).expect("cuts");
    let (code, _, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("was closed cleanly with"), "{err}");
    // Without the mark (as after a crash), the projection knows what the log no longer holds.
    let mark = log.join("log.clean");
    let kept_mark = std::fs::read(&mark).expect("the mark");
    std::fs::remove_file(&mark).expect("removes the mark");
    let (code, _, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("acknowledged events are missing from the log")
            && err.contains(&format!("partition {partition}: the projection applied")),
        "{err}"
    );
    // Without the projection too, the recorded heads still catch it.
    let projection = tmp.path().join("data").join("projection");
    let kept_projection = tmp.path().join("projection-kept");
    std::fs::rename(&projection, &kept_projection).expect("moves the projection");
    let alone = json_of(&opledger(&config, &["verify"]));
    assert_ne!(alone["chain"]["root"], recorded_json["chain"]["root"]);
    assert!(
        alone["against_projection"]
            .as_str()
            .is_some_and(|s| s.starts_with("not compared")),
        "{alone}"
    );
    let err = failure_of(&opledger(&config, &against));
    assert!(
        err.contains(&format!("partition {partition} holds {first_cut}"))
            && err.contains("events were removed"),
        "{err}"
    );
    std::fs::rename(&kept_projection, &projection).expect("puts the projection back");
    std::fs::write(&mark, kept_mark).expect("puts the mark back");

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

/// The storage fault a new user tries first: 8 partitions, 300 claims, a clean stop, one bit
/// flipped in the middle of the largest segment (bit rot; checksum untouched). Acknowledged
/// events follow the flipped bit, so `verify` fails and never says `verified`, `serve`
/// refuses to start naming partition, segment, offset and byte, and nothing is cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_bit_in_a_stopped_node_is_refused_and_nothing_is_cut() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = tmp.path().join("opledger.toml");
    let text = common::config_text_log(&tmp.path().join("data"), "partitions = 8", "");
    std::fs::write(&config, text).expect("writes config");
    let server = Server::start_existing(tmp.path(), &config);
    for i in 0..300 {
        let (s, _) = server
            .claim(TOKEN_A, &format!("bit-{i}"), charge("w", "3", "c"))
            .await;
        assert_eq!(s, 201);
    }
    let config = server.config.clone();
    server.stop();
    let before = json_of(&opledger(&config, &["verify"]));
    let log = tmp.path().join("data").join("log");
    let largest = (0..8)
        .flat_map(|p| frames::segments(&log, p))
        .max_by_key(|s| std::fs::metadata(s).expect("segment").len())
        .expect("a segment");
    let mut bytes = std::fs::read(&largest).expect("reads");
    let len = bytes.len();
    let middle = len / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&largest, &bytes).expect("flips a bit");
    let damaged_at = frames::frames(&largest)
        .into_iter()
        .rfind(|f| f.position <= middle)
        .expect("the damaged frame");

    let (code, json, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 2, "{err}");
    assert!(json.is_none(), "nothing printed as verified: {json:?}");
    let segment_name = largest
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    for text in [&err, &failure_of(&opledger(&config, &["serve"]))] {
        assert!(
            text.contains("acknowledged log data is damaged")
                && text.contains(&segment_name)
                && text.contains(&format!("(record {})", damaged_at.offset))
                && text.contains(&format!("at byte {}", damaged_at.position))
                && text.contains("Restore this segment file from a backup or a replica"),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read(&largest).expect("reads").len(),
        len,
        "nothing was cut"
    );
    // The bit restored, everything is there again.
    bytes[middle] ^= 0x10;
    std::fs::write(&largest, &bytes).expect("restores");
    let after = json_of(&opledger(&config, &["verify"]));
    assert_eq!(after["events"], before["events"]);
    assert_eq!(after["chain"], before["chain"]);
}

/// After a crash, the torn batch a node never acknowledged is reported, not passed over:
/// `verify` exits 4 and does not say `verified`; the next start cuts it, and then the log
/// verifies. Beside a running node, `verify` says so and exits 3. (Every partition its own
/// writer thread here, syncing its segment directly: no write-ahead file covers the tail.)
#[tokio::test]
async fn a_torn_tail_after_a_crash_and_a_running_node_have_their_own_exit_codes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let direct = Server::start_with_log(tmp.path(), "partitions = 4\nwriter_threads = 4");
    let config = history_on(tmp.path(), direct).await;
    let server = Server::start_existing(tmp.path(), &config);
    let (code, json, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 3, "{err}");
    let json = json.expect("prints what it verified");
    assert_eq!(
        (json["node"].as_str(), json["verified"].as_bool()),
        (Some("running"), Some(true))
    );
    assert!(err.contains("a running node holds this log"), "{err}");
    let (s, _) = server.claim(TOKEN_A, "torn-1", charge("w", "3", "c")).await;
    assert_eq!(s, 201);
    let mut server = server;
    server.kill9();

    let log = tmp.path().join("data").join("log");
    let before = json_of(&opledger(&config, &["verify"]));
    assert_eq!(before["node"], "stopped uncleanly");
    // A torn last unit: its commit frame cut short.
    let partition = frames::busiest_partition(&before["chain"]);
    let segment = frames::segments(&log, partition).pop().expect("a segment");
    let len = std::fs::metadata(&segment).expect("segment").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("opens")
        .set_len(len - 5)
        .expect("tears");
    let (code, json, err) = answer_of(&opledger(&config, &["verify"]));
    assert_eq!(code, 4, "{err}");
    let json = json.expect("prints what it read");
    assert_eq!(json["verified"], false);
    let torn = json["unread_tail_bytes"][partition.to_string()]
        .as_u64()
        .expect("torn bytes");
    assert!(torn > 0 && torn < len, "{json}");
    assert!(
        err.contains("never acknowledged") && err.contains("verify again"),
        "{err}"
    );
    let server = Server::start_existing(tmp.path(), &config);
    server.stop();
    let after = json_of(&opledger(&config, &["verify"]));
    assert_eq!(after["node"], "stopped cleanly");
    assert_eq!(after["unread_tail_bytes"], serde_json::json!({}));
}
