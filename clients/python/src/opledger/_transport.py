"""One HTTP/1.1 exchange over ``http.client``, with a small pool of kept-alive connections.

Thread-safe: a connection is used by one exchange at a time. The asyncio client runs
:meth:`Transport.exchange` in a worker thread.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from typing import Dict, List, NamedTuple, Optional, Tuple, Union
from urllib.parse import urlsplit

Connection = Union[http.client.HTTPConnection, http.client.HTTPSConnection]

# What a failed exchange can raise: socket errors (refused, reset, timeout are OSErrors)
# and a broken or missing status line.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


class Response(NamedTuple):
    status: int
    headers: Dict[str, str]
    body: bytes


class Transport:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        ssl_context: Optional[ssl.SSLContext] = None,
        max_idle: int = 16,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be http://host[:port][/prefix] or https://…")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("base_url takes no query, fragment or credentials")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self._idle: List[Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _connect(self) -> Connection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self.ssl_context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _take(self) -> Tuple[Connection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(), False

    def _give_back(self, conn: Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def exchange(self, method: str, path: str, headers: Dict[str, str], body: Optional[bytes]) -> Response:
        """Send one request and read its whole answer.

        A kept-alive connection the server has closed in the meantime fails at once; the
        request is then sent once more on a new connection (every call of the ledger's API
        is safe to repeat). Other failures raise one of ``TRANSPORT_ERRORS``.
        """
        conn, reused = self._take()
        try:
            return self._exchange_on(conn, method, path, headers, body)
        except TRANSPORT_ERRORS:
            conn.close()
            if not reused:
                raise
        conn = self._connect()
        try:
            return self._exchange_on(conn, method, path, headers, body)
        except TRANSPORT_ERRORS:
            conn.close()
            raise

    def _exchange_on(
        self,
        conn: Connection,
        method: str,
        path: str,
        headers: Dict[str, str],
        body: Optional[bytes],
    ) -> Response:
        conn.request(method, self.prefix + path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        response = Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)
        if answer.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
