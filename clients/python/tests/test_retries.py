"""Retries against a scripted stand-in server: answers the real ledger gives only when it is
in trouble (503 ``unavailable`` with ``Retry-After``), a proxy's bare 502, dropped
connections. The real binary cannot be made to give these on demand."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import CHARGE, LogWatch

import opledger
from opledger import ApiError, AsyncClient, Client, TransportError

TOKEN = "stub-token-5e1f"
EXECUTE = {
    "decision": "execute",
    "operation_id": "0b0e7f4e-0000-4000-8000-000000000001",
    "state": "processing",
    "version": 1,
    "lease": {"holder": "w", "expires_at": "2026-12-03T00:00:30Z"},
}
UNAVAILABLE = {"error": {"code": "unavailable", "message": "the log did not acknowledge", "retriable": True}}

Scripted = Tuple[int, Dict[str, str], bytes]


def answer(status: int, body: object, **headers: str) -> Scripted:
    return status, {"Content-Type": "application/json", **headers}, json.dumps(body).encode()


class Stub:
    """Answers each request with the next scripted answer and records what it received.
    With ``drop_after_answer`` it closes every connection right after answering, without
    saying so (a kept-alive connection the server has dropped)."""

    def __init__(self, script: List[Scripted], drop_after_answer: bool = False) -> None:
        self.script = list(script)
        self.received: List[Tuple[str, str, Dict[str, str], bytes]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                stub.received.append((self.command, self.path, dict(self.headers), body))
                status, headers, payload = stub.script.pop(0)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                if drop_after_answer:
                    self.close_connection = True

            do_GET = do_POST = handle_any

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_factory() -> Iterator[type]:
    made: List[Stub] = []

    class Factory(Stub):
        def __init__(self, script: List[Scripted], drop_after_answer: bool = False) -> None:
            super().__init__(script, drop_after_answer)
            made.append(self)

    yield Factory
    for stub in made:
        stub.close()


def test_503_retriable_is_sent_again_identically_until_it_is_answered(
    stub_factory: type, logs: LogWatch
) -> None:
    stub = stub_factory(
        [answer(503, UNAVAILABLE, **{"Retry-After": "0"}), answer(503, UNAVAILABLE), answer(201, EXECUTE)]
    )
    with Client(stub.base, TOKEN, retries=3, backoff=0.01) as client:
        claim = client.claim("payments.charge", "order-1", CHARGE, "w")
    assert (claim.decision, claim.operation_id) == ("execute", EXECUTE["operation_id"])
    assert len(stub.received) == 3
    first = stub.received[0]
    for method, path, headers, body in stub.received:
        assert (method, path, body) == (first[0], "/v1/operations", first[3])
        assert headers["Idempotency-Key"] == "order-1"
        assert headers["Authorization"] == f"Bearer {TOKEN}"
    assert json.loads(first[3]) == {"tool": "payments.charge", "holder": "w", "request": CHARGE}
    assert [getattr(r, "status") for r in logs.of("retry")] == [503, 503]


def test_503_raises_api_error_once_retries_run_out(stub_factory: type) -> None:
    stub = stub_factory([answer(503, UNAVAILABLE, **{"Retry-After": "0"})] * 2)
    with Client(stub.base, TOKEN, retries=1, backoff=0.01) as client:
        with pytest.raises(ApiError) as caught:
            client.claim("payments.charge", "order-2", CHARGE, "w")
    assert (caught.value.status, caught.value.code, caught.value.retriable) == (503, "unavailable", True)
    assert len(stub.received) == 2


def test_retry_after_is_honoured(stub_factory: type) -> None:
    limited = {"error": {"code": "rate_limited", "message": "slow down", "retriable": True}}
    stub = stub_factory([answer(429, limited, **{"Retry-After": "1"}), answer(201, EXECUTE)])
    started = time.monotonic()
    with Client(stub.base, TOKEN, retries=2, backoff=0.01) as client:
        assert client.claim("payments.charge", "order-3", CHARGE, "w").decision == "execute"
    assert time.monotonic() - started >= 1.0


def test_a_retry_after_past_the_limit_is_raised_at_once(stub_factory: type) -> None:
    stub = stub_factory([answer(503, UNAVAILABLE, **{"Retry-After": "120"})])
    with Client(stub.base, TOKEN, retries=3, max_retry_after=5) as client:
        with pytest.raises(ApiError) as caught:
            client.claim("payments.charge", "order-4", CHARGE, "w")
    assert caught.value.retry_after == 120 and len(stub.received) == 1


def test_a_proxys_bare_502_is_retried_and_a_400_is_not(stub_factory: type) -> None:
    bad = {"error": {"code": "invalid_field", "message": "holder: 1-128 visible ASCII", "retriable": False}}
    stub = stub_factory(
        [
            (502, {"Content-Type": "text/html"}, b"<html>bad gateway</html>"),
            answer(201, EXECUTE),
            answer(400, bad),
        ]
    )
    with Client(stub.base, TOKEN, retries=3, backoff=0.01) as client:
        assert client.claim("payments.charge", "order-5", CHARGE, "w").decision == "execute"
        with pytest.raises(ApiError) as caught:
            client.claim("payments.charge", "order-6", CHARGE, "w w")
    assert (caught.value.status, caught.value.code) == (400, "invalid_field")
    assert len(stub.received) == 3


def test_a_dropped_kept_alive_connection_is_replaced_silently(stub_factory: type, logs: LogWatch) -> None:
    stub = stub_factory([answer(201, EXECUTE)] * 3, drop_after_answer=True)
    with Client(stub.base, TOKEN, retries=0) as client:
        for n in range(3):
            assert client.claim("payments.charge", f"order-7-{n}", CHARGE, "w").decision == "execute"
    assert len(stub.received) == 3
    assert logs.of("retry") == []


def test_an_unreachable_ledger_raises_transport_error_without_the_token(logs: LogWatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port now.
    with Client(f"http://127.0.0.1:{port}", TOKEN, retries=2, backoff=0.01) as client:
        with pytest.raises(TransportError) as caught:
            client.claim("payments.charge", "order-8-secret", CHARGE, "w")
    assert len(logs.of("retry")) == 2
    text = f"{caught.value} {caught.value!r} {logs.text()}"
    assert TOKEN not in text and "order-8-secret" not in text


def test_the_async_client_retries_503_too(stub_factory: type) -> None:
    stub = stub_factory([answer(503, UNAVAILABLE, **{"Retry-After": "0"}), answer(201, EXECUTE)])

    async def main() -> Optional[str]:
        async with AsyncClient(stub.base, TOKEN, retries=2, backoff=0.01) as client:
            return (await client.claim("payments.charge", "order-9", CHARGE, "w")).decision

    assert asyncio.run(main()) == "execute"
    assert len(stub.received) == 2


def test_a_batchs_retriable_items_are_sent_again_alone(stub_factory: type, logs: LogWatch) -> None:
    late = {"status": 503, "error": {**UNAVAILABLE["error"], "code": "decision_timeout", "retry_after": 0}}
    refused = {"status": 400, "error": {"code": "invalid_key", "message": "bad", "retriable": False}}
    first = {"count": 3, "results": [{**EXECUTE, "status": 201}, late, refused]}
    second = {"count": 1, "results": [{**EXECUTE, "operation_id": "0b0e7f4e-0000-4000-8000-000000000002", "status": 201}]}
    stub = stub_factory([answer(200, first), answer(200, second)])
    intents = [opledger.Intent("payments.charge", f"k-{i}", CHARGE) for i in range(3)]
    with Client(stub.base, TOKEN, retries=2, backoff=0.01) as client:
        results = client.claim_many(intents)
    assert [type(r).__name__ for r in results] == ["Claim", "Claim", "ApiError"], results
    assert getattr(results[1], "operation_id") == "0b0e7f4e-0000-4000-8000-000000000002"
    assert getattr(results[2], "code") == "invalid_key", "a refusal that is not retriable stays"
    sent = [json.loads(body)["intents"] for _, _, _, body in stub.received]
    assert [len(s) for s in sent] == [3, 1]
    assert sent[1][0] == sent[0][1], "the retriable item again, exactly as sent (its holder too)"
    assert [getattr(r, "code") for r in logs.of("retry")] == ["batch_items"]


def test_a_batchs_retriable_items_stay_refused_once_retries_run_out(stub_factory: type) -> None:
    late = {"status": 503, "error": {**UNAVAILABLE["error"], "retry_after": 0}}
    stub = stub_factory([answer(200, {"count": 1, "results": [late]})] * 2)

    async def main() -> List[object]:
        async with AsyncClient(stub.base, TOKEN, retries=1, backoff=0.01) as client:
            return list(await client.claim_many([opledger.Intent("payments.charge", "k", CHARGE)]))

    results = asyncio.run(main())
    assert isinstance(results[0], ApiError) and results[0].retriable and results[0].retry_after == 0
    assert len(stub.received) == 2
