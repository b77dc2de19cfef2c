"""Calls a recorded tool twice per key through the gateway with the official MCP Python SDK
(`mcp`), and prints what each call was answered. Run by tests/e2e_kafka.rs.

    calls_twice.py URL TOKEN KEY...

Prints one JSON object per line: {"key", "first", "second", "op", "same_text"}.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, KEYS = sys.argv[1], sys.argv[2], sys.argv[3:]


def meta_of(result):
    return dict(result.meta or {})


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    async with http, Client(streamable_http_client(URL, http_client=http), mode="legacy") as c:
        for n, key in enumerate(KEYS):
            args = {"amount": 100 + n, "customer": f"cus_k{n}"}
            meta = {"io.opledger/idempotency-key": key}
            first = await c.call_tool("pay.charge", args, meta=meta)
            second = await c.call_tool("pay.charge", args, meta=meta)
            print(json.dumps({
                "key": key,
                "first": meta_of(first).get("io.opledger/decision"),
                "second": meta_of(second).get("io.opledger/decision"),
                "op": meta_of(first).get("io.opledger/operation-id"),
                "same_text": text_of(first) == text_of(second),
            }), flush=True)


asyncio.run(main())
