"""The README's ExitTrain gain-vs-steps picture, taken from the app itself: the ExitTrain page's Ablation tab
opens an ablation.json and draws its chart in Chromium, and the chart's element is saved as a PNG. The figure is
the app's (`app/figures/ablation.py`); this script only starts the app, picks the cell and takes the picture.

    HF_HUB_OFFLINE=1 python assets/notes/issue-44/ablation_chart.py                 # assets/exit_ablation.json,
                                                                                     # T = 1, budget 32
    HF_HUB_OFFLINE=1 python assets/notes/issue-44/ablation_chart.py --result runs/exit-ablation/ablation.json \
        --against twin --temperature 1 --budget 64 --out runs/twin.png
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "app"))
import browser_kit as kit  # noqa: E402

sys.path.insert(0, str(ROOT / "app"))
from exittrain_ablation import OWN_FILE  # noqa: E402  (the tab's choice for a typed path)


def serve(log: Path) -> tuple[subprocess.Popen, str]:
    """The app on a free port, headless, one torch thread; returns once its health check answers."""
    port = kit.free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TEV_APP_THREADS="1", PYTHONPATH=str(ROOT))
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app/Home.py", "--server.headless", "true",
                               "--server.port", str(port), "--browser.gatherUsageStats", "false",
                               "--server.fileWatcherType", "none"], cwd=ROOT, env=env, stdout=log.open("w"),
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read().strip() == b"ok":
                return server, url
        except OSError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"the app did not start; see {log}")


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the selectbox `label` (a click landing during a rerun leaves the list closed: retry)."""
    for attempt in range(4):
        page.get_by_role("combobox", name=label, exact=True).click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == 3:
                raise
    kit.wait_idle(page)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", type=Path, default=ROOT / "assets" / "exit_ablation.json")
    parser.add_argument("--against", choices=("start", "twin"), default="start")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--budget", type=int, default=32)
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "exit_ablation.png")
    args = parser.parse_args()
    title = (f"paired gain in E over {'the starting drafter' if args.against == 'start' else 'the lambda-0 twin'}"
             f" (T = {args.temperature:g}, budget {args.budget})")
    log = Path(tempfile.mkdtemp()) / "app.log"
    server, url = serve(log)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1200, "height": 1000}, device_scale_factor=2)
            page.goto(url)
            page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=120_000)
            kit.open_page(page, "ExitTrain")
            page.get_by_role("tab", name="Ablation").click()
            kit.wait_idle(page)
            choose(page, "ablation result", OWN_FILE)  # the tab's own list holds the committed results and runs'
            box = page.get_by_label("ablation.json", exact=True)
            box.fill(str(args.result.resolve()))
            box.press("Enter")
            kit.wait_idle(page)
            choose(page, "gain over", args.against)
            choose(page, "T", f"{args.temperature}")
            choose(page, "budget", str(args.budget))
            chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text=title)
            chart.wait_for(timeout=60_000)
            kit.no_exception(page)
            chart.scroll_into_view_if_needed()
            page.mouse.move(0, 0)  # off the chart: no hover label, no tool bar
            page.wait_for_timeout(1500)  # plotly's own transitions
            chart.screenshot(path=str(args.out))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
