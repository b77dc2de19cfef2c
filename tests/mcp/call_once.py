"""Calls one tool once through the gateway with the official MCP Python SDK (`mcp`) and prints
what it was answered. Run by tests/e2e_mcp.rs.

    call_once.py URL TOKEN TOOL ARGUMENTS_JSON KEY

Prints one JSON object: {"is_error", "meta", "text"}.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, TOOL, ARGUMENTS, KEY = sys.argv[1:6]


async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    async with http, Client(streamable_http_client(URL, http_client=http), mode="legacy") as c:
        result = await c.call_tool(TOOL, json.loads(ARGUMENTS), meta={"io.opledger/idempotency-key": KEY})
        print(json.dumps({
            "is_error": bool(result.is_error),
            "meta": dict(result.meta or {}),
            "text": "".join(getattr(b, "text", "") for b in result.content),
        }), flush=True)


asyncio.run(main())
