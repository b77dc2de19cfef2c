"""The intake's record formats against the frozen fixture the ledger's own tests check."""

from __future__ import annotations

import json
from pathlib import Path

from opledger import intake

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "fixtures" / "intake-v1.json").read_text()
)


def test_an_intent_is_keyed_partitioned_and_signed_as_the_ledger_reads_it() -> None:
    f = FIXTURE
    record_key = intake.scope(f["principal"], f["tool"], f["key"])
    assert record_key.hex() == f["record_key_hex"]
    assert intake.partition_of(record_key, f["intents_partitions"]) == f["partition"]
    signature = intake.intent_signature(f["token"], f["principal"], record_key, f["value"].encode())
    assert signature == f["signature_hex"]
    # Built from its fields, a record carries the same key, partition and headers' names.
    fields = json.loads(f["value"])
    record = intake.intent_record(
        f["token"], f["principal"], f["intents_partitions"], id=fields["id"], reply_to=fields["reply_to"],
        tool=fields["tool"], key=fields["key"], holder=fields["holder"], request=fields["request"])
    assert (record.key, record.partition) == (record_key, f["partition"])
    assert json.loads(record.value) == fields
    headers = dict(record.headers)
    assert headers["opledger-principal"] == f["principal"].encode()
    assert headers["opledger-signature"].decode() == intake.intent_signature(
        f["token"], f["principal"], record.key, record.value)
    assert f["token"].encode() not in record.value and all(f["token"].encode() not in v for v in headers.values())


def test_a_decision_is_read_only_when_the_ledger_signed_it_for_this_address() -> None:
    f = FIXTURE
    assert intake.reply_partition(f["reply_to"], f["decisions_partitions"]) == f["reply_partition"]
    value = f["decision_value"].encode()
    signature = f["decision_signature_hex"].encode()
    decided = intake.read_decision(f["token"], f["reply_to"], value, signature)
    assert decided is not None and decided["decision"] == "execute"
    assert intake.read_decision(f["token"], "fleet-7/worker-4", value, signature) is None
    assert intake.read_decision("another-token-of-length", f["reply_to"], value, signature) is None
    assert intake.read_decision(f["token"], f["reply_to"], value + b" ", signature) is None
    assert intake.read_decision(f["token"], f["reply_to"], value, None) is None
