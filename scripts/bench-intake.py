"""scripts/bench's Kafka intake phase (run with scripts/kafka-python's interpreter and
PYTHONPATH=clients/python/src):

    bench-intake.py raw BROKERS TOPIC COUNT
        COUNT records of an intent's size produced to TOPIC (created with the intents topic's
        partitions), idempotent, acks=all, every delivery awaited: the broker's raw produce rate.
    bench-intake.py intake BROKERS INTENTS DECISIONS TOKEN PRINCIPAL COUNT
        COUNT signed intents (distinct keys) produced to INTENTS with the same producer settings,
        and every decision read back from DECISIONS under this run's address: intents decided/s,
        first record produced to last decision read. Every decision must be `execute`.

Prints one line: `<what> <count> in <seconds> s: <rate> records/s` (and `errors <n>`).
One record per batch, as the tests do: tansu 0.6 shows a batch's later records late.
"""

from __future__ import annotations

import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from opledger import intake

SETTINGS = {"enable.idempotence": True, "acks": "all", "batch.num.messages": 1, "linger.ms": 1}


def producer(brokers: str) -> Producer:
    return Producer({"bootstrap.servers": brokers, **SETTINGS})


def partitions(p: Producer, topic: str) -> int:
    return len(p.list_topics(topic, timeout=10).topics[topic].partitions)


def produce_all(p: Producer, records: list) -> None:
    failed = []

    def delivered(err, _msg):  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(err)

    for topic, key, value, partition, headers in records:
        while True:
            try:
                p.produce(topic, key=key, value=value, partition=partition, headers=headers, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    if p.flush(120) != 0 or failed:
        sys.exit(f"bench-intake: {len(failed)} records not delivered: {failed[:1]}")


def raw(brokers: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": brokers})
    for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
        f.result()
    p = producer(brokers)
    value = b"x" * 250
    records = [(topic, uuid.uuid4().bytes * 2, value, i % 2, None) for i in range(count)]
    t0 = time.monotonic()
    produce_all(p, records)
    took = time.monotonic() - t0
    print(f"raw {count} in {took:.3f} s: {count / took:.1f} records/s errors 0")


def decided(brokers: str, intents: str, decisions: str, token: str, principal: str, count: int) -> None:
    p = producer(brokers)
    n = partitions(p, intents)
    reply_to = f"bench/{uuid.uuid4().hex[:12]}"
    reader = Consumer({"bootstrap.servers": brokers, "group.id": f"bench-{reply_to}", "enable.auto.commit": False,
                       "fetch.wait.max.ms": 10})
    partition = intake.reply_partition(reply_to, partitions(p, decisions))
    _, end = reader.get_watermark_offsets(TopicPartition(decisions, partition), timeout=10)
    reader.assign([TopicPartition(decisions, partition, end)])
    run = uuid.uuid4().hex[:8]
    records = []
    for i in range(count):
        r = intake.intent_record(token, principal, n, id=f"i-{i}", reply_to=reply_to, tool="payments.charge",
                                 key=f"bench-{run}-{i}", holder="bench",
                                 request={"amount": "10.00", "currency": "EUR", "customer": f"c-{i}"})
        records.append((intents, r.key, r.value, r.partition, r.headers))
    t0 = time.monotonic()
    produce_all(p, records)
    seen: set = set()
    errors = 0
    deadline = time.monotonic() + 300
    while len(seen) < count and time.monotonic() < deadline:
        for m in reader.consume(1000, 0.5):
            if m.error() is not None or m.key() != reply_to.encode():
                continue
            signature = dict(m.headers() or []).get(intake.SIGNATURE_HEADER)
            d = intake.read_decision(token, reply_to, m.value(), signature)
            if d is None or d["id"] in seen:
                continue
            seen.add(d["id"])
            if d.get("decision") != "execute":
                errors += 1
    took = time.monotonic() - t0
    errors += count - len(seen)
    print(f"intake {len(seen)} in {took:.3f} s: {len(seen) / took:.1f} records/s errors {errors}")


if __name__ == "__main__":
    if sys.argv[1] == "raw":
        raw(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        decided(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7]))
