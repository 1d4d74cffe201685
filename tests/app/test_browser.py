"""The app in a real browser: start `streamlit run app/Home.py`, drive headless Chromium, keep screenshots.

Screenshots go to a temporary folder; `TEV_SCREENSHOTS=assets/screenshots` (what
scripts/screenshots.sh sets) writes the README's pictures instead. Uses the system
Chromium at /usr/bin/chromium; no browser is ever downloaded. Without it the tests
skip, except in CI (CI=true), where a missing browser is a failure. The ExitTrain part builds a one-shard
data set and trains two steps with the real engine, both started from the page (the prompt sets must be
found: ../shared/datasets beside the checkout, or TEVCORE_DATASETS). `TEV_APP_ROOT=<checkout>` serves that checkout's
app instead of this one's (`browser_kit.app_root`), e.g. the commit before a fix, to see its tests fail there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import browser_kit as kit

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

if not CHROMIUM.exists():
    if IN_CI:
        pytest.fail("no system Chromium at /usr/bin/chromium (CI=true: install it, e.g. scripts/test.sh does)",
                    pytrace=False)
    pytest.skip("no system Chromium at /usr/bin/chromium: install it (sudo apt-get install chromium) to run the "
                "browser tests", allow_module_level=True)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return kit.screenshot_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    """The app of this checkout (or of the checkout TEV_APP_ROOT names), served for the module's tests."""
    with kit.served_app(kit.app_root(REPO), tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


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


def test_explorer_live_then_click_a_node_move_the_rounds_and_change_the_budget(app_url, browser_page, shots):
    page = browser_page
    start = time.perf_counter()

    def lap(label: str) -> None:
        print(f"[browser test] {label}: {time.perf_counter() - start:.1f} s")

    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
    kit.no_exception(page)
    page.screenshot(path=str(shots / "home.png"))
    lap("home")

    # the explorer: a short live generation on the real target with the default drafter, budget 64
    kit.open_page(page, "Tree explorer")
    page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=60_000)
    kit.set_number(page, "budget (tree nodes)", 64)
    kit.set_number(page, "max new tokens", 8)
    page.get_by_role("button", name="▶ Run live").click()
    page.get_by_text("tree nodes", exact=True).wait_for(timeout=240_000)
    page.get_by_text("Across rounds").wait_for(timeout=30_000)
    page.mouse.move(5, 5)  # no tooltip in the screenshot
    page.set_viewport_size({"width": 1600, "height": 2300})  # the round and the across-rounds figures
    kit.wait_for_plots(page, 6)
    page.wait_for_timeout(1500)  # let plotly finish drawing
    kit.no_exception(page)
    assert page.get_by_text("block length per round", exact=False).count() >= 1
    page.screenshot(path=str(shots / "explorer.png"))
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name="⬇ Download trace (.jsonl)").click()
    head = Path(download.value.path()).read_text().splitlines()[0]
    assert '"schema": "tevcore.trace"' in head
    page.set_viewport_size({"width": 1600, "height": 1500})
    lap("explorer live")

    # the icicle of the live round: widths = P(v) and gaps = X(v), checked against the downloaded trace
    from tevcore.engine.records import read_trace

    trace = read_trace(Path(download.value.path()))
    record = trace.rounds[-1]
    page.get_by_role("tab", name="icicle: where the mass leaves").first.click()
    page.wait_for_function("Array.from(document.querySelectorAll('.js-plotly-plot'))"
                           ".some(e => e.data && e.data[0].type === 'icicle' && e.querySelectorAll('.slice').length)",
                           timeout=30_000)
    icicle = page.evaluate("""() => {
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(e => e.data[0].type === 'icicle');
        const t = gd.data[0];
        return {ids: Array.from(t.ids), parents: Array.from(t.parents), values: Array.from(t.values),
                slices: gd.querySelectorAll('.slice').length};
    }""")
    P = record.flow.path_prob.double().tolist()
    X = record.flow.exit_mass.double().tolist()
    assert icicle["slices"] >= 1 and len(icicle["values"]) == record.tree.num_nodes
    under = {v: 0.0 for v in icicle["ids"]}
    for v, parent, value in zip(icicle["ids"], icicle["parents"], icicle["values"]):
        assert value == pytest.approx(P[int(v)], abs=1e-9)  # the width of node v is P(v)
        if parent:
            under[parent] += value
    for v, value in zip(icicle["ids"], icicle["values"]):
        assert value - under[v] == pytest.approx(X[int(v)], abs=1e-6)  # the gap under it is X(v)
    page.mouse.move(5, 5)
    page.screenshot(path=str(shots / "explorer-icicle.png"))
    page.get_by_role("tab", name="node-link tree").first.click()
    lap("icicle")

    # the crash sequence of issue 30: click a node, the round slider back two rounds and forth, change the budget
    rounds = int(kit.round_slider(page).get_attribute("max")) + 1
    assert rounds >= 3, "the live generation needs three rounds for this sequence"
    drawn = page.evaluate("document.querySelector('.js-plotly-plot').data"
                          ".find(t => (t.name || '').startsWith('node')).customdata")
    last_node = int(drawn[-1])  # the highest node id drawn: absent from smaller rounds
    kit.click_tree_node(page, len(drawn) - 1)
    _until_chosen(page, last_node, "a click on node {node} did not select it")
    kit.move_round_slider(page, "ArrowLeft", 2)
    kit.no_exception(page)
    assert kit.round_slider(page).input_value() == str(rounds - 3)
    assert page.locator('[data-testid="stAlert"]').filter(has_text="failed").count() == 0
    kit.move_round_slider(page, "ArrowRight", 2)
    kit.no_exception(page)
    _until_chosen(page, last_node, "node {node}, clicked on this round, is no longer chosen")  # the slider passed
    # through a round without that node: the page may show it until the last step's rerun is drawn
    kit.set_number(page, "budget (tree nodes)", 16)
    kit.no_exception(page)
    assert page.get_by_label("budget (tree nodes)", exact=True).input_value() == "16"
    _until_chosen(page, last_node, "node {node} is no longer chosen after the budget changed")
    assert int(kit.round_slider(page).get_attribute("max")) + 1 == rounds  # rounds kept
    lap("explorer click / slider / budget")

    # an out-of-range number is refused with its range named; Run and Step never use another value
    for label, bad, allowed in (("temperature", -1, "[0, 5]"), ("budget (tree nodes)", 100000, "[0, 512]")):
        kit.set_number(page, label, bad)
        assert float(page.get_by_label(label, exact=True).input_value()) == bad  # shown as typed, not clamped
        refusal = page.locator('[data-testid="stSidebar"] [data-testid="stAlert"]').filter(has_text="Refused")
        refusal.filter(has_text=f"{label} must lie in {allowed}, got {bad}").wait_for(timeout=30_000)
        assert page.get_by_text("Run and Step wait for valid settings", exact=False).count() == 1
        for button in ("▶ Run live", "⏭ Step one round"):
            assert page.get_by_role("button", name=button).is_disabled()
            page.get_by_role("button", name=button).click(force=True)  # a click on it does nothing
            kit.wait_idle(page)
        assert int(kit.round_slider(page).get_attribute("max")) + 1 == rounds  # no round was made
        kit.no_exception(page)
        page.screenshot(path=str(shots / f"explorer-refused-{label.split()[0]}.png"))
        kit.set_number(page, label, 1 if label == "temperature" else 16)
    page.wait_for_function("!Array.from(document.querySelectorAll('[data-testid=stSidebar] [data-testid=stAlert]'))"
                           ".some(e => e.innerText.includes('Refused'))", timeout=30_000)  # valid again: no refusal
    page.get_by_role("button", name="⏭ Step one round").wait_for(state="visible")
    assert not page.get_by_role("button", name="⏭ Step one round").is_disabled()
    lap("explorer refuses out-of-range numbers")

    # a second live run (new settings: a new generation): each round's tree is drawn as it arrives, and the
    # previous generation's view (its tree, the across-rounds charts) is gone from under the progress bar
    kit.set_number(page, "max new tokens", 24)
    page.get_by_role("button", name="▶ Run live").click()
    progress = page.locator('[data-testid="stProgress"]')
    progress.first.wait_for(timeout=60_000)
    seen_live_tree, samples = False, 0
    deadline = time.time() + 240
    while progress.count():
        assert time.time() < deadline, "the second live run did not finish"
        # one look at the page: the bar can go and the new view come between two separate looks
        seen = page.evaluate("""() => ({
            bar: document.querySelectorAll('[data-testid="stProgress"]').length > 0,
            headings: Array.from(document.querySelectorAll('h3')).map(e => e.innerText),
            trees: Array.from(document.querySelectorAll('.js-plotly-plot')).map(
                e => ((e.layout || {}).title || {}).text || '').filter(t => t.includes('round ')).length})""")
        if seen["bar"]:
            samples += 1
            assert not any("Across rounds" in h for h in seen["headings"]), \
                "the old generation's view stayed under the bar"
            assert not any("Save these rounds" in h for h in seen["headings"])
            seen_live_tree = seen_live_tree or seen["trees"] == 1
        page.wait_for_timeout(150)
    assert samples, "the progress bar was never seen"
    assert seen_live_tree, "no round's tree was drawn during the live run"
    kit.wait_idle(page)
    page.get_by_text("Across rounds").wait_for(timeout=60_000)  # the full view is back once the run ends
    kit.no_exception(page)
    lap("second live run draws its trees as they come")


def test_the_other_pages_in_a_real_browser(app_url, browser_page, live_run, shots, tmp_path):
    page = browser_page
    start = time.perf_counter()

    def lap(label: str) -> None:
        print(f"[browser test] {label}: {time.perf_counter() - start:.1f} s")

    if not page.url.startswith(app_url):  # run on its own: open the app first
        page.goto(app_url, wait_until="domcontentloaded")
        page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
    # verifier comparison on the explorer's live round when the explorer test ran first (same browser session)
    kit.open_page(page, "Verifier comparison")
    page.get_by_role("button", name="▶ Run every verifier").wait_for(timeout=60_000)
    kit.set_number(page, "draws per verifier", 20000)
    page.get_by_role("button", name="▶ Run every verifier").click()
    page.get_by_text("Summary", exact=True).wait_for(timeout=90_000)
    page.wait_for_timeout(1000)
    kit.no_exception(page)
    assert page.get_by_text("NOT exact", exact=False).count() >= 1
    page.screenshot(path=str(shots / "verifiers.png"))
    lap("verifiers")

    # fresh sampled trees at the explorer round's context, drawn by its drafter and scored by the embedded target
    live_source = page.get_by_text("sampled trees at an explorer round's context (its target and drafter)", exact=True)
    if live_source.count():  # offered after the explorer test's live run (same browser session)
        live_source.click()
        kit.wait_idle(page)
        kit.draw_and_verify_fresh_rounds(page, 10, timeout=120_000)
        kit.no_exception(page)
        page.screenshot(path=str(shots / "verifiers-live-sampled.png"), full_page=True)
        lap("sampled trees at the explorer's context")

    kit.open_page(page, "ExitTrain")
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
    kit.no_exception(page)
    page.screenshot(path=str(shots / "exittrain.png"))
    lap("exittrain")

    # a small data set built from the page, then a real two-step training run started from the page: both
    # appear and finish without a reload (the real engine: `build-data` one shard, `train` two steps)
    fresh = tmp_path / "runs"
    root.fill(str(fresh))
    root.press("Enter")
    kit.wait_idle(page)
    page.get_by_role("tab", name="New run").click()
    shards = page.get_by_label("shards (target-generated: 1-3 min each on one CPU core)", exact=True)
    shards.fill("1")
    shards.press("Enter")
    kit.wait_idle(page)
    page.wait_for_timeout(1000)  # a rerun that starts late (a busy machine) is over before the click
    kit.wait_idle(page)
    page.get_by_role("button", name="▶ Build").click()
    kit.wait_for_text(page, "data-small is ready (1 shards)", 480, "build-data exited with status",
                   fresh / "data-small" / "build-data.log")
    kit.wait_idle(page)
    assert page.get_by_role("combobox", name="distillation set", exact=True).input_value() == str(fresh / "data-small")
    for label, value in (("steps", 2), ("checkpoint every (steps)", 2), ("batch size (anchors)", 8)):
        kit.set_number(page, label, value)
    name = page.get_by_label("run name (folder under the runs folder)", exact=True)
    name.fill("started-here")
    name.press("Enter")
    kit.wait_idle(page)
    assert page.get_by_text("The training CLI refuses", exact=False).count() == 0
    page.get_by_role("button", name="▶ Start training").click()
    page.get_by_text("Started process", exact=False).wait_for(timeout=30_000)
    page.get_by_role("tab", name="Runs").click()
    deadline = time.time() + 60  # the runs table is a canvas: the run shows as the chosen run once it appears
    while page.get_by_role("combobox", name="run", exact=True).input_value() != "started-here":
        assert time.time() < deadline, "the run started from the page did not appear without a reload"
        page.wait_for_timeout(500)
    kit.wait_for_text(page, "finished: step 2/2", 240, "exited with status", fresh / "started-here" / "train.log")
    page.wait_for_function("Array.from(document.querySelectorAll('input[role=combobox]'))"
                           ".some(e => e.value.startsWith(" + repr(str(fresh / "started-here")) + ") && "
                           "(e.value.endsWith('checkpoint-2') || e.value.endsWith('drafter')))", timeout=30_000)
    assert (fresh / "started-here" / "checkpoint-2" / "config.json").is_file()
    # the Stop button goes with the process (it writes its final drafter after the status says finished)
    page.get_by_role("button", name="■ Stop (started from this app)").wait_for(state="detached", timeout=60_000)
    assert page.get_by_text("finished: step 2/2", exact=False).count() >= 1
    kit.no_exception(page)
    page.screenshot(path=str(shots / "exittrain-started-here.png"))
    lap("a data set and a run started from the page")

    kit.open_page(page, "Exit law workshop")
    page.get_by_text("The law in plain words", exact=False).wait_for(timeout=30_000)
    kit.wait_for_plots(page, 6)
    page.wait_for_timeout(1000)
    kit.no_exception(page)
    page.screenshot(path=str(shots / "workshop.png"))
    lap("workshop")

    # p = 1.7 typed into the table is refused with its range named, never clamped to 1; nothing is computed
    grid = page.locator('[data-testid="stDataFrame"]').first
    kit.edit_grid_cell(page, grid, "p", 1, "1.7", "p must lie in [0, 1], got 1.7")
    kit.wait_idle(page)
    kit.wait_until_no_plots(page)  # the page stops at the refusal
    kit.no_exception(page)
    page.screenshot(path=str(shots / "workshop-refused.png"))
    lap("workshop refuses p = 1.7")

    # the edit survives a switch to another preset and back
    for preset in ("bushy", "chain"):
        page.get_by_role("combobox", name="preset", exact=True).click()
        page.get_by_role("option", name=preset, exact=True).click()
        kit.wait_idle(page)
    page.get_by_text("p must lie in [0, 1], got 1.7", exact=False).wait_for(timeout=30_000)
    kit.wait_until_no_plots(page)
    kit.no_exception(page)
    lap("workshop keeps the edit across a preset switch")


def _progress_text(page) -> str:
    bar = page.locator('[data-testid="stProgress"]').first
    return bar.inner_text() if bar.count() else ""


def _wait_for_progress(page, pattern: str, timeout_s: float, log: Path) -> str:
    """Until the run's progress text matches `pattern` (no reload); a run shown as crashed fails at once."""
    deadline = time.time() + timeout_s
    while True:
        text = _progress_text(page)
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
        assert "crashed" not in page.locator("body").inner_text(), f"the page says crashed; {log}:\n{tail}"
        if re.search(pattern, text):
            return text
        if time.time() > deadline:
            pytest.fail(f"{pattern!r} not shown within {timeout_s:.0f} s (last: {text!r}); {log}:\n{tail}")
        page.wait_for_timeout(500)


def _until_chosen(page, node: int, failure: str, timeout_s: float = 30) -> None:
    """Until the node box shows `node` (a rerun the last action started may still be drawing)."""
    deadline = time.time() + timeout_s
    while not kit.chosen_node_text(page).startswith(f"{node}: "):
        assert time.time() < deadline, failure.format(node=node) + f" (shown: {kit.chosen_node_text(page)!r})"
        page.wait_for_timeout(500)


def _seconds(text: str) -> float:
    """The seconds of the page's '1h02m' or '3m05s'."""
    hours = re.fullmatch(r"(\d+)h(\d+)m", text)
    if hours:
        return int(hours[1]) * 3600 + int(hours[2]) * 60
    minutes = re.fullmatch(r"(\d+)m(\d+)s", text)
    assert minutes, text
    return int(minutes[1]) * 60 + int(minutes[2])


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> Path:
    """A runs folder holding a one-shard distillation set of the default target (the engine's `build-data`)."""
    root = tmp_path_factory.mktemp("resume-runs")
    subprocess.run([sys.executable, "-m", "tevcore", "build-data", str(root / "data-small"), "--max-shards", "1",
                    "--threads", "1"], cwd=REPO, env=dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO)),
                   check=True, capture_output=True, timeout=900)
    return root


def test_a_stopped_and_resumed_run_and_compare_keeps_the_picked_pair(app_url, browser_page, small_set, shots):
    """A real run started from the page, stopped and resumed there: never "crashed", "stopped (resumable)" with
    no ETA while stopped, and an ETA after the resume within 2x of the time its steps left really took. Then Compare
    evaluates exactly the pair the user took, though a newer checkpoint appeared before the click."""
    page = browser_page
    if not page.url.startswith(app_url):
        page.goto(app_url, wait_until="domcontentloaded")
        page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
    kit.open_page(page, "ExitTrain")
    root = page.get_by_label("runs folder", exact=True)
    root.wait_for(timeout=180_000)  # run on its own, the page's first import of torch and the engine is slow
    root.fill(str(small_set))
    root.press("Enter")
    kit.wait_idle(page)
    page.get_by_role("tab", name="New run").click()
    for label, value in (("steps", 40), ("warmup (steps)", 2), ("checkpoint every (steps)", 6),
                         ("batch size (anchors)", 8), ("tree anchors per step", 2)):
        kit.set_number(page, label, value)
    name = page.get_by_label("run name (folder under the runs folder)", exact=True)
    name.fill("resumed")
    name.press("Enter")
    kit.wait_idle(page)
    run, log = small_set / "resumed", small_set / "resumed" / "train.log"
    assert page.get_by_text("The training CLI refuses", exact=False).count() == 0
    page.get_by_role("button", name="▶ Start training").click()
    page.get_by_text("Started process", exact=False).wait_for(timeout=60_000)
    page.get_by_role("tab", name="Runs").click()
    _wait_for_progress(page, r"running: step ([7-9]|1[0-7])/40", 600, log)  # past the checkpoint of step 6
    page.get_by_role("button", name="■ Stop (started from this app)").click()
    stopped = _wait_for_progress(page, r"stopped \(resumable\): step \d+/40", 120, log)
    assert "ETA" not in stopped
    page.wait_for_timeout(2500)  # two refreshes: still stopped, still no error shown
    assert "ETA" not in _progress_text(page) and page.locator('[data-testid="stAlertContentError"]:visible').count() == 0
    page.screenshot(path=str(shots / "exittrain-stopped.png"))
    page.get_by_role("button", name="↻ Resume this run").click()
    # resumed from step 6 or 12: 3+ steps made since, 15+ left
    shown = _wait_for_progress(page, r"running: step (1[5-9]|2[0-5])/40 · .* · ETA \d", 600, log)
    then = json.loads((run / "status.json").read_text())  # the run's own clock now (a step or so past the page's)
    eta = _seconds(re.search(r"ETA (\S+)", shown)[1])
    page.screenshot(path=str(shots / "exittrain-resumed.png"))
    _wait_for_progress(page, r"finished: step 40/40", 600, log)
    # the truth the ETA predicts: how long the steps left took, on the run's status clock (the page's wall clock
    # would add its refreshes and the process's exit), scaled from the steps after `then` to the steps shown left
    end = json.loads((run / "status.json").read_text())
    left = 40 - int(re.search(r"step (\d+)/40", shown)[1])
    truth = (end["updated"] - then["updated"]) / (40 - then["step"]) * left
    print(f"[browser test] ETA {eta:.0f} s shown at {shown!r}; the {left} steps left took {truth:.0f} s")
    assert truth / 2 <= eta <= 2 * truth, f"ETA {eta:.0f} s shown at {shown!r}; the {left} steps left took {truth:.0f} s"
    kit.no_exception(page)

    # Compare: take the newest checkpoint (this run's final drafter) against the committed one; then a newer
    # checkpoint appears in another run; Evaluate must still evaluate exactly the two picked drafters
    page.get_by_role("tab", name="Compare checkpoints").click()
    page.get_by_role("button", name="↺ newest checkpoint vs the committed drafter").click()
    picks = page.locator('[data-testid="stMultiSelect"]').first
    deadline = time.time() + 60  # the click's rerun is over (before the newer checkpoint exists)
    while str(run / "drafter") not in picks.inner_text():
        assert time.time() < deadline, picks.inner_text()
        page.wait_for_timeout(300)
    kit.wait_idle(page)
    later = small_set / "later"
    (later / "checkpoint-2").mkdir(parents=True)
    for item in (run / "checkpoint-40").iterdir():
        (later / "checkpoint-2" / item.name).write_bytes(item.read_bytes())
    (later / "config.json").write_text((run / "config.json").read_text())
    (later / "latest.json").write_text('{"checkpoint": "checkpoint-2", "step": 2}')
    (later / "status.json").write_text('{"state": "finished", "step": 2, "total_steps": 2, "updated": %f}'
                                       % (time.time() + 60))
    for label, value in (("held-out prompts per set", 1), ("max new tokens", 8)):
        kit.set_number(page, label, value)
    budgets = page.get_by_label("budgets", exact=True)
    budgets.fill("4")
    budgets.press("Enter")
    kit.wait_idle(page)
    page.get_by_role("button", name="Evaluate E per budget").click()
    evaluated = page.get_by_text("evaluated:", exact=False)
    evaluated.wait_for(timeout=600_000)
    committed = REPO / "assets" / "drafter"
    assert evaluated.inner_text().strip() == f"evaluated: {run / 'drafter'} · {committed}"
    kit.no_exception(page)
    page.screenshot(path=str(shots / "exittrain-compare.png"))


JUNK_LOOKING = ["'", '"', "$", "%", "#"]  # plotly strips these: "' #23" would read as the number 23


def test_explorer_charts_show_every_bar_and_keep_tree_labels_clear_of_the_markers(app_url, browser_page, shots,
                                                                                   tmp_path):
    """A budget-64 round whose tokens look like numbers to plotly, replayed from a trace (no model)."""
    import appdata
    import figures

    record = appdata.synthetic_record(budget=64, seed=7, index=0)[0]
    record.token_texts = [JUNK_LOOKING[v % len(JUNK_LOOKING)] for v in range(record.tree.num_nodes)]
    record.missing_texts = [[JUNK_LOOKING[(v + j) % len(JUNK_LOOKING)] for j in range(len(row))]
                            for v, row in enumerate(record.missing_texts)]
    (tmp_path / "junk.jsonl").write_bytes(appdata.trace_bytes([record], {"prompt": "numeric-looking tokens"}))
    page = browser_page
    page.goto(app_url, wait_until="domcontentloaded")
    page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=60_000)
    kit.open_page(page, "Tree explorer")
    page.get_by_text("Open a trace (replay without a model)").click()
    folder = page.get_by_label("or open a saved trace from a folder", exact=True)
    folder.fill(str(tmp_path))
    folder.press("Enter")
    kit.wait_idle(page)
    page.locator("[data-testid=stButton] button").filter(has_text="Open").click()
    kit.wait_for_plots(page, 6)
    page.wait_for_timeout(1000)
    kit.no_exception(page)

    # p(.|v) of the exit node: a category axis, one tick and one drawn bar per row of the node's law
    rows = figures.node_distribution(record, record.exit_node)
    chart = page.evaluate("""() => {
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
            e => e.layout && ((e.layout.title || {}).text || '').replace(/<[^>]*>/g, '').startsWith('p(.|node'));
        return {type: gd._fullLayout.xaxis.type, ticks: gd.querySelectorAll('.xtick').length,
                bars: Array.from(gd.querySelectorAll('.barlayer .point path')).filter(
                    p => p.getBoundingClientRect().width > 0).length,
                x: gd.data.flatMap(t => Array.from(t.x))};
    }""")
    assert chart["type"] == "category"
    assert len(chart["x"]) == len(rows) and sum(1 for x in chart["x"] if x.startswith(("'", '"', "$", "%", "#"))) > 2
    assert chart["ticks"] == len(rows) and chart["bars"] == len(rows)  # every bar drawn, none fell off the axis

    # the tree: no label over the exit star, the selection square or the bonus diamond; no two labels touch
    boxes = kit.plot_boxes(page, "round 0")
    marks = [b for name, points in boxes["points"].items()
             if name.startswith(("exit node", "selected node", "bonus token")) for b in points]
    assert len(marks) == 3
    notes = boxes["notes"]
    assert len(notes) >= 8 and any(n["text"].startswith("+") for n in notes)
    for note in notes:
        assert not any(kit.overlaps(note["box"], mark) for mark in marks), note["text"]
    for i, a in enumerate(notes):
        for b in notes[i + 1:]:
            assert not kit.overlaps(a["box"], b["box"], pad=1.0), (a["text"], b["text"])
    page.mouse.move(5, 5)
    page.screenshot(path=str(shots / "explorer-numeric-tokens.png"))

    # a click on a '+N more' node opens its fan: more nodes drawn, one fold fewer (the page grows taller than
    # the window with the trace's settings above the tree, so the whole tree is brought on screen first)
    page.set_viewport_size({"width": 1600, "height": 2300})
    kit.wait_idle(page)
    boxes = kit.plot_boxes(page, "round 0")
    before = len(boxes["points"]["node (colour = P(v))"])
    kit.click_box(page, boxes["points"]["folded siblings (click to open)"][0])
    deadline = time.time() + 30
    while True:
        kit.wait_idle(page)
        now = kit.plot_boxes(page, "round 0")
        if now and len(now["points"].get("node (colour = P(v))", [])) > before:
            break
        assert time.time() < deadline, "a click on a '+N more' node did not open its fan"
        page.wait_for_timeout(500)
    kit.no_exception(page)
