"""A smoke test of one page in a real browser (Debian's headless Chromium, driven by Playwright).

    AXE_JS=.../axe.min.js CHROMIUM=/usr/bin/chromium python smoke.py URL OUT_DIR

Opens URL, saves a full-page screenshot as OUT_DIR/smoke.png, injects axe-core (AXE_JS) and
runs axe.run(); exits 1 listing every violation of impact "serious" or "critical" (lesser ones
are printed, not failed), 2 on bad usage. The python, chromium and axe paths come from
scripts/browser. Chromium is never downloaded: it is launched from CHROMIUM (default
/usr/bin/chromium) with the flags below, in a fresh profile directory that Playwright makes.
"""

import json
import os
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

# Headless as root on a machine without a GPU, and no traffic to Google's services: a closed
# network refuses it, and it only slows start-up.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FAILING_IMPACTS = ("serious", "critical")


def launch(playwright):
    return playwright.chromium.launch(
        executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
        args=CHROMIUM_ARGS,
        headless=True,
    )


def main(argv):
    if len(argv) != 3 or not os.environ.get("AXE_JS"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    url, out_dir = argv[1], Path(argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    axe_js = Path(os.environ["AXE_JS"]).read_text(encoding="utf-8")

    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            response = page.goto(url, wait_until="load", timeout=30_000)
            if response is None or not response.ok:
                status = response.status if response else "no response"
                print(f"smoke: {url}: {status}", file=sys.stderr)
                return 1
            shot = out_dir / "smoke.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"smoke: screenshot {shot}")
            page.add_script_tag(content=axe_js)
            result = page.evaluate("() => axe.run(document)")
        finally:
            browser.close()

    (out_dir / "axe.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    failing = []
    for v in result["violations"]:
        targets = ", ".join(" ".join(n["target"]) for n in v["nodes"])
        line = f"{v['impact']}: {v['id']}: {v['help']} ({len(v['nodes'])}: {targets})"
        print(f"smoke: {line}", file=sys.stderr)
        if v["impact"] in FAILING_IMPACTS:
            failing.append(line)
    for e in errors:
        print(f"smoke: page error: {e}", file=sys.stderr)
    if failing:
        print(f"smoke: {len(failing)} serious or critical accessibility violation(s) on {url}",
              file=sys.stderr)
        return 1
    print(f"smoke: {url}: no serious or critical violations ({len(result['passes'])} rules passed)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
