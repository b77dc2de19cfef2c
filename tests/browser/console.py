"""The operator console in a real browser (Debian's headless Chromium, driven by Playwright).

    URL=http://127.0.0.1:PORT OPERATOR_TOKEN=… AGENT_TOKEN=… RESOLVE_ID=… BULK_ID=… \
    OUT_DIR=… AXE_JS=…/axe.min.js CHROMIUM=/usr/bin/chromium python console.py

Against a node with two planted operations waiting for a person (RESOLVE_ID and BULK_ID, both
`manual`): an agent's token is refused at sign-in; the operator signs in, finds RESOLVE_ID in
the queue, opens its timeline, takes it over and resolves it as completed through the
confirmation dialogs, each with a reason; then takes BULK_ID over with a bulk action by
selector (a dry run first). Every screen is saved as OUT_DIR/<n>-<screen>.png and checked with
axe-core: any serious or critical violation fails. The token must never reach the URL, the
page's storage or a cookie the page can read; the page must raise no error (a blocked inline
script would). Exits 0 when all of that holds; the calling test then checks the ledger.
"""

import json
import os
import re
import sys
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from smoke import FAILING_IMPACTS, launch

env = os.environ
URL, OUT = env["URL"], Path(env["OUT_DIR"])
OPERATOR_TOKEN, AGENT_TOKEN = env["OPERATOR_TOKEN"], env["AGENT_TOKEN"]
RESOLVE_ID, BULK_ID = env["RESOLVE_ID"], env["BULK_ID"]
AXE = Path(env["AXE_JS"]).read_text(encoding="utf-8")
TIMEOUT_MS = 15_000


class Screens:
    """Screenshots in order, and axe-core's verdict on each."""

    def __init__(self, page):
        self.page, self.n, self.failing = page, 0, []

    def keep(self, name, check=True):
        self.n += 1
        shot = OUT / f"{self.n:02}-{name}.png"
        self.page.screenshot(path=str(shot), full_page=True)
        print(f"console: screenshot {shot}")
        if not check:
            return
        # Evaluated by the driver, not added as a <script>: the page's policy forbids inline
        # scripts, as it should.
        self.page.evaluate(AXE)
        result = self.page.evaluate("() => axe.run(document)")
        (OUT / f"{self.n:02}-{name}.axe.json").write_text(json.dumps(result, indent=2))
        for v in result["violations"]:
            line = f"{name}: {v['impact']}: {v['id']}: {v['help']} ({len(v['nodes'])})"
            print(f"console: {line}", file=sys.stderr)
            if v["impact"] in FAILING_IMPACTS:
                self.failing.append(line)


def no_secret_in_reach(page, context):
    """The token is nowhere the page (or another origin) could read it."""
    seen = page.evaluate(
        "() => JSON.stringify([location.href, document.cookie,"
        " Object.entries(localStorage), Object.entries(sessionStorage)])"
    )
    assert OPERATOR_TOKEN not in seen, "the token is readable by the page"
    assert "opledger_ui" not in seen, "the session cookie is readable by the page"
    cookies = [c for c in context.cookies() if c["name"] == "opledger_ui"]
    assert len(cookies) == 1, cookies
    assert cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict", cookies


def confirm(page, reason):
    dialog = page.locator("#confirm")
    page.get_by_label("Reason (kept in each operation's history)").fill(reason)
    page.get_by_role("button", name="Go on").click()
    expect(dialog).to_be_hidden()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = launch(p)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.set_default_timeout(TIMEOUT_MS)
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            screens = Screens(page)
            page.goto(f"{URL}/ui/")
            token = page.get_by_label("Token of an operator, auditor or viewer")
            expect(token).to_be_visible()
            screens.keep("sign-in")

            # An agent is refused, and no session is opened for it.
            token.fill(AGENT_TOKEN)
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("#signin-error")).to_contain_text("the console is for operators")
            assert not [c for c in context.cookies() if c["name"] == "opledger_ui"]
            screens.keep("agent-refused")
            errors.clear()  # the refusal's 403 is logged by the browser, as it should be

            token.fill(OPERATOR_TOKEN)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("heading", name=re.compile("Reconciliation queue"))).to_be_visible()
            expect(page.get_by_role("link", name=RESOLVE_ID)).to_be_visible()
            expect(page.locator("#summary")).to_contain_text("manual")
            expect(page.locator("#charts svg[role=img]")).to_have_count(2)
            no_secret_in_reach(page, context)
            screens.keep("queue")

            # One operation: its guidance and timeline, then takeover and resolution.
            page.get_by_role("link", name=RESOLVE_ID).click()
            expect(page.get_by_role("heading", name="Timeline")).to_be_visible()
            expect(page.locator("ol.timeline")).to_contain_text("moved to manual")
            expect(page.locator(".guidance")).to_contain_text("Nobody can tell automatically")
            screens.keep("operation")
            page.get_by_role("button", name="Take over").click()
            expect(page.locator("#confirm-text")).to_contain_text(f"Take over {RESOLVE_ID}")
            screens.keep("confirm-takeover")
            confirm(page, "checking the provider's log by hand")
            page.get_by_role("button", name="Resolve…").click()
            page.get_by_label("Outcome").select_option("completed")
            page.get_by_label("Resource reference found (for completed)").fill("msg-found-7")
            expect(page.locator("#confirm-text")).to_contain_text("as completed (resource msg-found-7, status 200)")
            screens.keep("confirm-resolve")
            confirm(page, "the provider's log shows msg-found-7")
            expect(page.locator("dd .state-completed")).to_have_text("completed")
            expect(page.locator("ol.timeline")).to_contain_text("resolved")
            screens.keep("resolved")

            # Many at once, by selector: every manual operation, counted first.
            page.goto(f"{URL}/ui/#/operations?state=manual")
            expect(page.get_by_role("heading", name="Operations, newest first")).to_be_visible()
            expect(page.get_by_role("link", name=BULK_ID)).to_be_visible()
            page.get_by_role("button", name="Dry run").click()
            expect(page.locator(".bulk")).to_contain_text("Dry run: 1 operation matches; nothing was changed.")
            expect(page.locator(".bulk")).not_to_contain_text("null")
            screens.keep("bulk-dry-run")
            page.get_by_role("button", name="take over: 1 operation…").click()
            confirm(page, "batch: provider outage of 7 December")
            expect(page.locator(".bulk")).to_contain_text("1 succeeded, 0 failed.")
            expect(page.locator(".bulk")).not_to_contain_text("null")
            screens.keep("bulk-done")

            page.get_by_role("link", name="Tools").click()
            expect(page.get_by_role("heading", name="Tools and their contracts")).to_be_visible()
            screens.keep("tools")

            page.get_by_role("button", name="Sign out").click()
            expect(page.locator("#signin-error")).to_have_text("Signed out.")
            assert not [c for c in context.cookies() if c["name"] == "opledger_ui"]
        finally:
            browser.close()
    assert not errors, f"the page raised errors: {errors}"
    if screens.failing:
        print(f"console: {len(screens.failing)} serious or critical accessibility violation(s):",
              *screens.failing, sep="\n  ", file=sys.stderr)
        return 1
    print(f"console: every step passed; {screens.n} screens kept in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
