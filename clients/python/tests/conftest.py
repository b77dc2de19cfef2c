"""Fixtures: the real ``opledger`` binary (``OPLEDGER_BIN``) serving on loopback with a
config of the tests' own, and clients of it."""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import opledger

TOKEN_A = "token-agent-a-0001"
TOKEN_B = "token-agent-b-0002"
# Principals with a request rate: 1 a second, bursts of 1 (one each, so tests do not share
# a bucket).
TOKEN_SLOW_RETRIED = "token-slow-retried-0003"
TOKEN_SLOW_RAISED = "token-slow-raised-0004"

# Tools as in tests/common/mod.rs, plus a natural, a short-retention and a read tool.
# payments.charge can be queried (status_url), so an unknown outcome stays `outcome_unknown`
# for recovery; tickets.create cannot, so it goes to a person (`manual`).
CONFIG = """
data_dir = "{data}"
listen = "127.0.0.1:0"

[log]
partitions = 4

[limits]
body_bytes_max = 4096

[recovery]
tick = "100ms"

[[principal]]
id = "agent-a"
token = "{TOKEN_A}"
roles = ["agent", "operator", "auditor"]
tools = ["*"]

[[principal]]
id = "agent-b"
token = "{TOKEN_B}"
roles = ["agent"]
tools = ["payments.charge", "tickets.create"]

[[principal]]
id = "slow-retried"
token = "{TOKEN_SLOW_RETRIED}"
roles = ["agent"]
tools = ["*"]
rate = 1
burst = 1

[[principal]]
id = "slow-raised"
token = "{TOKEN_SLOW_RAISED}"
roles = ["agent"]
tools = ["*"]
rate = 1
burst = 1

[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "30s"
status_url = "http://127.0.0.1:9/status/{{operation_id}}"
ignore = ["trace_id"]
[tool.fingerprint]
amount = ["amount"]
other = ["currency"]
recipient = ["customer"]
body = ["description"]

[[tool]]
name = "tickets.create"
class = "keyed"
loss = "low"
lease = "30s"
[tool.fingerprint]
target = ["project"]
body = ["title"]

[[tool]]
name = "notes.append"
class = "natural"
lease = "30s"

[[tool]]
name = "short.keyed"
class = "keyed"
loss = "high"
lease = "30s"
retention = "300ms"
[tool.fingerprint]
amount = ["amount"]

[[tool]]
name = "search.lookup"
class = "read"
loss = "low"
"""


@dataclass
class Server:
    base: str
    process: "subprocess.Popen[str]"
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def _binary() -> str:
    path = os.environ.get("OPLEDGER_BIN", "")
    if not path or not os.access(path, os.X_OK):
        raise pytest.UsageError("set OPLEDGER_BIN to the opledger binary (scripts/python-client does)")
    return path


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``opledger serve`` for the session; every test uses keys of its own."""
    directory = tmp_path_factory.mktemp("opledger")
    config = directory / "opledger.toml"
    config.write_text(
        CONFIG.format(
            data=directory / "data",
            TOKEN_A=TOKEN_A,
            TOKEN_B=TOKEN_B,
            TOKEN_SLOW_RETRIED=TOKEN_SLOW_RETRIED,
            TOKEN_SLOW_RAISED=TOKEN_SLOW_RAISED,
        )
    )
    stderr_path = directory / "stderr.log"
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [_binary(), "serve", "--config", str(config), "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: "queue.Queue[str]" = queue.Queue()

    def drain() -> None:
        # Read every line so the server never blocks on a full pipe; "" marks the end.
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=drain, daemon=True).start()
    base = None
    while base is None:
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            process.kill()
            err = stderr_path.read_text()
            raise RuntimeError("opledger printed no listening line in 30 s:\n" + err) from None
        if line == "":
            raise RuntimeError("opledger exited before listening:\n" + stderr_path.read_text())
        if line.startswith("opledger listening on "):
            base = line[len("opledger listening on ") :].strip()
    running = Server(base, process, stderr_path)
    yield running
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture
def client(server: Server) -> Iterator[opledger.Client]:
    with opledger.Client(server.base, TOKEN_A, retries=2, backoff=0.05) as c:
        yield c


@pytest.fixture
def key() -> Callable[[str], str]:
    """Keys unique to the test run: ``key("charge")``."""
    run = uuid.uuid4().hex[:12]
    return lambda name: f"py-{run}-{name}"


class LogWatch(logging.Handler):
    """Collects the ``opledger`` logger's records; ``saw(event)`` is a real event a test can
    wait on (a caller waiting on ``in_progress``, a retry)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: List[logging.LogRecord] = []
        self._lock = threading.Lock()
        self._events: "dict[str, threading.Event]" = {}
        self._listeners: List[Callable[[logging.LogRecord], None]] = []

    def event(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def listen(self, listener: Callable[[logging.LogRecord], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            self.records.append(record)
            listeners = list(self._listeners)
        self.event(str(getattr(record, "opledger_event", ""))).set()
        for listener in listeners:
            listener(record)

    def of(self, name: str) -> List[logging.LogRecord]:
        with self._lock:
            return [r for r in self.records if getattr(r, "opledger_event", None) == name]

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.format(r) for r in self.records)


@pytest.fixture
def logs() -> Iterator[LogWatch]:
    watch = LogWatch()
    logger = logging.getLogger("opledger")
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(watch)
    yield watch
    logger.removeHandler(watch)
    logger.setLevel(previous)


CHARGE = {"amount": "10.50", "currency": "EUR", "customer": "c-7"}
