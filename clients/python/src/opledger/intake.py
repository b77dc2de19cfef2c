"""Records of the ledger's Kafka intake (format 1), for any Kafka client: what to produce for an
intent, and how to read and check the decision the ledger produces for it.

A node whose config names ``[log] intents_topic`` decides the intents of every partition it
serves and answers each on the decisions topic. The record formats are frozen
(``schemas/intake-v1.md`` in the repository) and checked against the same fixture as the
ledger's own code; ``examples/kafka_intake.py`` is a whole agent. With confluent-kafka::

    record = intake.intent_record(TOKEN, "agent-a", partitions, id="i-1", reply_to="fleet-7/w-3",
                                  tool="payments.charge", key="order-42", holder="w-3", request={...})
    producer.produce("opledger.intents", key=record.key, value=record.value,
                     partition=record.partition, headers=record.headers)

The token never travels: a record is signed with HMAC-SHA256 under SHA-256 of the token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

FORMAT = 1
PRINCIPAL_HEADER = "opledger-principal"
SIGNATURE_HEADER = "opledger-signature"


def intake_key(token: str) -> bytes:
    """A principal's intake key: SHA-256 of its token (what the ledger's config holds)."""
    return hashlib.sha256(token.encode()).digest()


def _framed(domain: bytes, *parts: bytes) -> bytes:
    return domain + b"".join(struct.pack(">Q", len(p)) + p for p in parts)


def scope(principal: str, tool: str, key: str) -> bytes:
    """The operation's scope: the intent record's key."""
    return hashlib.sha256(_framed(b"opledger/scope/v1", principal.encode(), tool.encode(), key.encode())).digest()


def partition_of(record_key: bytes, partitions: int) -> int:
    """The partition a scope (or any 8-byte-prefixed key) lands in."""
    (prefix,) = struct.unpack(">Q", record_key[:8])
    return int(prefix % max(1, partitions))


def intent_signature(token: str, principal: str, record_key: bytes, value: bytes) -> str:
    """The signature header of an intent record (lowercase hex)."""
    message = _framed(b"opledger/intake/v1", principal.encode(), record_key, value)
    return hmac.new(intake_key(token), message, hashlib.sha256).hexdigest()


def decision_signature(token: str, reply_to: str, value: bytes) -> str:
    """The signature a decision record for ``reply_to`` carries (lowercase hex)."""
    message = _framed(b"opledger/decision/v1", reply_to.encode(), value)
    return hmac.new(intake_key(token), message, hashlib.sha256).hexdigest()


def reply_partition(reply_to: str, partitions: int) -> int:
    """The decisions partition an agent reading ``reply_to`` consumes."""
    return partition_of(hashlib.sha256(b"opledger/reply/v1" + reply_to.encode()).digest(), partitions)


@dataclass(frozen=True)
class IntentRecord:
    """What to produce to the intents topic: ``key``, ``value``, ``partition``, ``headers``."""

    partition: int
    key: bytes = field(repr=False)
    value: bytes = field(repr=False)
    headers: List[Tuple[str, bytes]] = field(repr=False)


def intent_record(
    token: str,
    principal: str,
    partitions: int,
    *,
    id: str,
    reply_to: str,
    tool: str,
    key: str,
    holder: str,
    request: Mapping[str, Any],
    parent: Optional[str] = None,
) -> IntentRecord:
    """An intent as a signed record, keyed and partitioned by its operation's scope in an
    intents topic of ``partitions`` partitions."""
    body: Dict[str, Any] = {"v": FORMAT, "id": id, "reply_to": reply_to, "tool": tool, "key": key,
                  "holder": holder, "request": dict(request)}
    if parent is not None:
        body["parent"] = parent
    value = json.dumps(body, separators=(",", ":")).encode()
    record_key = scope(principal, tool, key)
    signature = intent_signature(token, principal, record_key, value)
    return IntentRecord(
        partition=partition_of(record_key, partitions),
        key=record_key,
        value=value,
        headers=[(PRINCIPAL_HEADER, principal.encode()), (SIGNATURE_HEADER, signature.encode())],
    )


def read_decision(token: str, reply_to: str, value: bytes, signature: Optional[bytes]) -> Optional[Mapping[str, Any]]:
    """A decision record's JSON if the ledger signed it for ``reply_to`` under this token's key;
    ``None`` for anything else (another address's record, a forgery, an unsigned refusal)."""
    if signature is None:
        return None
    # Bytes against bytes: a header that is not ASCII is a mismatch, not an exception.
    if not hmac.compare_digest(decision_signature(token, reply_to, value).encode(), bytes(signature)):
        return None
    decided: Mapping[str, Any] = json.loads(value)
    return decided
