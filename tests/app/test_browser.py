"""The app in a real browser: start `streamlit run app/Home.py`, drive headless Chromium, keep screenshots.

Screenshots go to assets/screenshots/*.png (the README shows the explorer one).
Uses the system Chromium at /usr/bin/chromium; no browser is ever downloaded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "assets" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    port = _free_port()
    log = open(tmp_path_factory.mktemp("streamlit") / "server.log", "w+")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TEV_APP_PROPOSER="rollout", TEV_APP_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/Home.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"streamlit exited early:\n{log.read()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as reply:
                if reply.read().strip() == b"ok":
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.terminate()
        pytest.fail("streamlit did not become healthy within 90 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=4)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    log.close()


@pytest.fixture(scope="module")
def browser_page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1500})
        yield page
        browser.close()


FAKE_TRAINER = """
import json, math, os, sys, time
from pathlib import Path
run = Path(sys.argv[1]); run.mkdir(parents=True, exist_ok=True)
(run / "config.json").write_text(json.dumps({"data": "demo", "steps": 400, "tree_lambda": 0.1}))
start = time.time() - 30
for step in range(1, 401):
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": step, "distill": 3 * math.exp(-step / 80) + 1, "tree": math.exp(-step / 60),
                            "loss": 3 * math.exp(-step / 80) + 1.1 * math.exp(-step / 60) + 1,
                            "tree_E": 2.6 - math.exp(-step / 70)}) + "\\n")
    (run / "status.tmp").write_text(json.dumps({"state": "running", "pid": os.getpid(), "step": step,
                                                "total_steps": 400, "started": start, "updated": time.time()}))
    os.replace(run / "status.tmp", run / "status.json")  # atomic, as the trainer writes it: no torn reads
    time.sleep(0.4)
"""


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """A stand-in training process that writes a run folder the way the trainer does (status, metrics)."""
    root = tmp_path_factory.mktemp("runs")
    (root / "data-demo").mkdir()
    (root / "data-demo" / "manifest.json").write_text('{"shards": 4, "target_name": "demo"}')
    proc = subprocess.Popen([sys.executable, "-c", FAKE_TRAINER, str(root / "demo-run")])
    yield root
    proc.terminate()
    proc.wait(timeout=10)


def _no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]').first.inner_text()


def _wait_for_plots(page, count: int, timeout: float = 30_000) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {count}", timeout=timeout)


def _set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_timeout(400)


def _open(page, link_text: str) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_text(link_text, exact=True).click()


def test_every_page_in_a_real_browser(app_url, browser_page, live_run):
    page = browser_page
    start = time.perf_counter()

    def lap(label: str) -> None:
        print(f"[browser test] {label}: {time.perf_counter() - start:.1f} s")
    SHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
    _no_exception(page)
    page.screenshot(path=str(SHOTS / "home.png"))
    lap("home")

    # the explorer: a short live generation on the real target
    _open(page, "Tree explorer")
    page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=60_000)
    _set_number(page, "budget (tree nodes)", 24)
    _set_number(page, "max new tokens", 6)
    page.get_by_role("button", name="▶ Run live").click()
    page.get_by_text("1 + C (expected)").wait_for(timeout=150_000)
    page.get_by_text("Across rounds").wait_for(timeout=30_000)
    page.mouse.move(5, 5)  # no tooltip in the screenshot
    page.set_viewport_size({"width": 1600, "height": 2300})  # the round and the across-rounds figures
    _wait_for_plots(page, 6)
    page.wait_for_timeout(1500)  # let plotly finish drawing
    _no_exception(page)
    assert page.get_by_text("block length per round", exact=False).count() >= 1
    page.screenshot(path=str(SHOTS / "explorer.png"))
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name="⬇ Download trace (.jsonl)").click()
    head = Path(download.value.path()).read_text().splitlines()[0]
    assert '"schema": "tevcore.trace"' in head
    page.set_viewport_size({"width": 1600, "height": 1500})
    lap("explorer")

    # verifier comparison on the explorer's live round (same browser session)
    _open(page, "Verifier comparison")
    page.get_by_role("button", name="▶ Run every verifier").wait_for(timeout=60_000)
    _set_number(page, "draws per verifier", 20000)
    page.get_by_role("button", name="▶ Run every verifier").click()
    page.get_by_text("Summary", exact=True).wait_for(timeout=90_000)
    page.wait_for_timeout(1000)
    _no_exception(page)
    assert page.get_by_text("NOT exact", exact=False).count() >= 1
    page.screenshot(path=str(SHOTS / "verifiers.png"))
    lap("verifiers")

    _open(page, "ExitTrain")
    root = page.get_by_label("runs folder", exact=True)
    root.wait_for(timeout=30_000)
    root.fill(str(live_run))
    root.press("Enter")
    page.get_by_role("tab", name="Runs").click()
    progress = page.get_by_text("running: step", exact=False).first
    progress.wait_for(timeout=30_000)
    first = progress.inner_text()
    deadline = time.time() + 30  # the progress fragment refreshes itself every 2 s (slower on a busy machine)
    while page.get_by_text("running: step", exact=False).first.inner_text() == first:
        assert time.time() < deadline, "the progress did not refresh by itself"
        page.wait_for_timeout(500)
    assert page.get_by_text("ETA", exact=False).count() >= 1
    page.wait_for_function(  # the curves, drawn (with lines) and visible
        "Array.from(document.querySelectorAll('.js-plotly-plot')).some("
        "e => e.getBoundingClientRect().width > 0 && e.querySelectorAll('.scatterlayer .trace').length >= 4)",
        timeout=30_000)
    page.wait_for_timeout(500)
    _no_exception(page)
    page.screenshot(path=str(SHOTS / "exittrain.png"))
    lap("exittrain")

    _open(page, "Exit law workshop")
    page.get_by_text("The law in plain words", exact=False).wait_for(timeout=30_000)
    _wait_for_plots(page, 6)
    page.wait_for_timeout(1000)
    _no_exception(page)
    page.screenshot(path=str(SHOTS / "workshop.png"))
    lap("workshop")
