"""An upstream MCP server for the gateway's tests (FastMCP, stdio): a payment tool that counts
its side effects in a file, a read tool, and a tool that hangs.

    pay_server.py EFFECTS_FILE [PORT]

Over stdio, or over Streamable HTTP at http://127.0.0.1:PORT/mcp when a port is given.

Every side effect appends one JSON line to EFFECTS_FILE: {"tool", "op", "args"}, where "op" is
the operation id the gateway sent in _meta["io.opledger/operation-id"].

While a file EFFECTS_FILE.down exists (the `crash` tool leaves one), the server does not start
speaking MCP: a test decides how long its upstream stays down.
"""

import asyncio
import json
import os
import sys
import time

from fastmcp import Context, FastMCP

EFFECTS = sys.argv[1]
DOWN = EFFECTS + ".down"
mcp = FastMCP("pay")


def effect(tool: str, ctx: Context, **args) -> str:
    rc = ctx.request_context
    meta = (rc.meta if rc is not None else None) or {}
    op = meta.get("io.opledger/operation-id")
    with open(EFFECTS, "a") as f:
        f.write(json.dumps({"tool": tool, "op": op, "args": args}) + "\n")
    return op


@mcp.tool(annotations={"destructiveHint": True, "idempotentHint": True})
async def charge(amount: int, customer: str, ctx: Context, delay_s: float = 0.0) -> str:
    """Charges a customer. The effect happens first; delay_s keeps the call open after it."""
    op = effect("charge", ctx, amount=amount, customer=customer)
    if delay_s:
        await asyncio.sleep(delay_s)
    return f"charged {amount} to {customer} as {op}"


@mcp.tool(annotations={"readOnlyHint": True})
async def balance(customer: str, ctx: Context) -> str:
    """A customer's balance: reads only."""
    effect("balance", ctx, customer=customer)
    return f"{customer} owes 0"


@mcp.tool(annotations={"destructiveHint": True})
async def refund(charge_id: str, ctx: Context) -> str:
    """Refunds a charge; its server never answers (it hangs after the effect)."""
    effect("refund", ctx, charge_id=charge_id)
    await asyncio.sleep(3600)
    return "refunded"


@mcp.tool(annotations={"idempotentHint": True})
async def sync_catalog(ctx: Context) -> str:
    """Re-syncs a catalog (idempotent); its server answers too late."""
    effect("sync_catalog", ctx)
    await asyncio.sleep(3600)
    return "synced"


@mcp.tool(annotations={"destructiveHint": True})
async def notify(text: str, ctx: Context) -> str:
    """Sends a note; large answers (its text repeated) test the stored result's bound."""
    effect("notify", ctx, size=len(text))
    return text * 100


@mcp.tool(annotations={"destructiveHint": True})
async def crash(ctx: Context) -> str:
    """Runs its effect, then the server dies mid-call and stays down until DOWN is removed."""
    effect("crash", ctx)
    with open(DOWN, "w"):
        pass
    os._exit(1)


if __name__ == "__main__":
    while os.path.exists(DOWN):
        time.sleep(0.05)
    if len(sys.argv) > 2:
        mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        mcp.run(transport="stdio", show_banner=False)
