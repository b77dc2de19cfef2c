"""Publish intents to the ledger's Kafka intake and read their decisions, with confluent-kafka.

    python kafka_intake.py --brokers 127.0.0.1:9092 --token "$AGENT_TOKEN" --principal agent-a \
        --tool payments.charge --count 3

Each intent is produced to the intents topic keyed and partitioned by its operation's scope
and signed under the principal's intake key (SHA-256 of its token: the token itself never
travels). The decisions come back on the decisions topic under this agent's address
(``--reply-to``): the agent reads the one partition that address lands in and keeps only
records the ledger signed for it. A decision may arrive more than once (the ledger answers a
record it re-read after a crash again, with the decision its log holds): keep the first per id.

Prints one JSON line per intent: its id and decision (``execute`` means: run the side effect
now, then report it over HTTP). Exits 0 once every intent is decided, 1 on a timeout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any, Dict

from confluent_kafka import Consumer, Producer, TopicPartition

from opledger import intake


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", required=True, help="bootstrap servers, host:port,...")
    parser.add_argument("--token", required=True, help="the principal's token (signs, never sent)")
    parser.add_argument("--principal", required=True, help="the principal's id in the ledger's config")
    parser.add_argument("--tool", default="payments.charge")
    parser.add_argument("--intents-topic", default="opledger.intents")
    parser.add_argument("--decisions-topic", default="opledger.decisions")
    parser.add_argument("--reply-to", default=f"example/{uuid.uuid4().hex[:12]}", help="this agent's address")
    parser.add_argument("--holder", default="example-worker", help="who executes the intents")
    parser.add_argument("--count", type=int, default=3, help="intents to publish")
    parser.add_argument("--key-prefix", default=f"example-{uuid.uuid4().hex[:8]}")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the decisions")
    args = parser.parse_args()

    # One record per batch: some Kafka-protocol brokers (tansu 0.6) show a batch's later records
    # late. Real Kafka needs no such setting; drop it there for throughput.
    producer = Producer({"bootstrap.servers": args.brokers, "enable.idempotence": True, "batch.num.messages": 1})
    meta = producer.list_topics(args.intents_topic, timeout=10)
    partitions = len(meta.topics[args.intents_topic].partitions)
    decisions_meta = producer.list_topics(args.decisions_topic, timeout=10)
    decision_partitions = len(decisions_meta.topics[args.decisions_topic].partitions)

    # Read from the address's partition's end before publishing, so no decision is missed.
    reader = Consumer(
        {"bootstrap.servers": args.brokers, "group.id": f"reader-{args.reply_to}", "enable.auto.commit": False}
    )
    partition = intake.reply_partition(args.reply_to, decision_partitions)
    _, end = reader.get_watermark_offsets(TopicPartition(args.decisions_topic, partition), timeout=10)
    reader.assign([TopicPartition(args.decisions_topic, partition, end)])

    pending = set()
    for i in range(args.count):
        intent_id = f"intent-{i}"
        record = intake.intent_record(
            args.token,
            args.principal,
            partitions,
            id=intent_id,
            reply_to=args.reply_to,
            tool=args.tool,
            key=f"{args.key_prefix}-{i}",
            holder=args.holder,
            request={"amount": "10.00", "currency": "EUR", "customer": f"c-{i}"},
        )
        producer.produce(
            args.intents_topic,
            key=record.key,
            value=record.value,
            partition=record.partition,
            headers=record.headers,
        )
        pending.add(intent_id)
    if producer.flush(10) != 0:
        print("the broker did not take every intent", file=sys.stderr)
        return 1

    decided: Dict[str, Any] = {}
    deadline = time.monotonic() + args.timeout
    while pending and time.monotonic() < deadline:
        message = reader.poll(0.5)
        if message is None or message.error() is not None or message.key() != args.reply_to.encode():
            continue
        signature = dict(message.headers() or []).get(intake.SIGNATURE_HEADER)
        decision = intake.read_decision(args.token, args.reply_to, message.value(), signature)
        if decision is None or decision["id"] not in pending:
            continue  # not signed for us, or a second delivery of one already decided
        pending.discard(decision["id"])
        decided[decision["id"]] = decision
        print(json.dumps(decision), flush=True)
    reader.close()
    if pending:
        print(f"no decision within {args.timeout}s for {sorted(pending)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
