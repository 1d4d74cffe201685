"""Load test of a workshop room: start the app in the room profile, drive N real Chromium sessions at once.

Each session runs the tree explorer live on its own prompt and seed, reads its generated text off the page
(round by round, as the explorer's "Across rounds" shows it), then opens the verifier comparison and the exit-law
workshop. Before that, every session's settings run once alone (solo, one after another) for the reference text
and time. Reported: completions, whether each session's text equals its solo run, time to result p50/p95 against
solo, the largest queue place each session was shown, the server's peak RSS, and every error box or traceback
seen. Writes the one tevcore result record (`--out`: settings, summary, a row per session) and prints a table.

    HF_HUB_OFFLINE=1 python scripts/room_load.py --sessions 5 --out results/room-load-5.json

`--mode lessons` drives the Lessons page instead: session i opens lesson i (mod the number of lessons), commits
the right answer (the package's truth of that lesson), presses Run and reads the check; all sessions at once,
no solo pass. Reported: completions, checks shown right, time from Run to the check p50/p95, the server's peak
RSS, errors and tracebacks.

    HF_HUB_OFFLINE=1 python scripts/room_load.py --mode lessons --sessions 20 --out results/room-load-lessons-20.json

`--mode heaviest` has every session do the heaviest action a participant may ask for, once: a short live run of
the explorer (its context), then on the verifier comparison "sampled trees at an explorer round's context" with
the largest tree (`sampled:4,4,4` cut to the budget) at the server's caps (`--rounds` trees of `--tree-budget`
nodes, the room profile's caps by default; smaller values are written into the server's room.toml as its caps,
so the action is still the heaviest that server allows). Every session keeps its page, and so its drawn trees,
open until all have drawn. Reported: completions, refusals, time from Draw to the trees shown p50/p95, the
server's RSS once started and at its peak, errors and tracebacks.

    HF_HUB_OFFLINE=1 python scripts/room_load.py --mode heaviest --sessions 20 --out results/room-load-heaviest-20.json

Uses the system Chromium at /usr/bin/chromium (no browser is downloaded). The server is started directly with
`streamlit run` and the room settings `scripts/app.sh --room` sets (it would install packages first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tevcore.outputs import check_not_replacing, check_output_file
from tevcore.results import ResultRecord, RunMeta, command_line, write_result

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
PROMPTS = [
    "Explain speculative decoding to a curious high-school student in three sentences.",
    "Write a haiku about autumn leaves falling on a quiet river.",
    "Write a Python function that prints FizzBuzz for the numbers 1 to 15.",
    "A shop sells pencils at 3 for $1. How much do 12 pencils cost? Answer with a short explanation.",
    "List the capital cities of France, Germany, Italy and Spain.",
]
QUEUE_TEXT = "waiting for the compute queue: place "
# The explorer's "Across rounds" text: one span per round, titled "round i: n tokens", holding that round's text.
# Read off the page, not from a downloaded trace: Streamlit prunes a generated download once two script runs end
# anywhere on the server, so with many sessions rerunning the file can be gone before Chromium fetches it.
ROUND_SPANS = '[data-testid="stMarkdownContainer"] span[title^="round "]'
ROUND_TEXT_JS = f"() => Array.from(document.querySelectorAll('{ROUND_SPANS}')).map(s => [s.title, s.innerText])"


# ---------------------------------------------------------------------- the server

@dataclass
class RoomServer:
    """A running `streamlit run` in the room profile, its URL, log and the folder of its settings."""

    process: subprocess.Popen
    url: str
    log: Path
    folder: Path

    def rss_bytes(self) -> int:
        """Resident memory of the server process (its children included: the app starts none while serving)."""
        total = 0
        for pid in [self.process.pid, *_children(self.process.pid)]:
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                continue
        return total

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_room_server(folder: Path, config: str = "", secret: str = "room-load-secret", slots: int | None = None,
                      upload_mb: int = 5, health_timeout_s: float = 120) -> RoomServer:
    """Start the app in the room profile with the host file `config` (TOML text) written into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = (f"compute_slots = {slots}\n" if slots else "") + \
        f'space_root = "{folder / "spaces"}"\nruns = "{folder / "runs"}"\n' + config  # top-level keys before tables
    (folder / "room.toml").write_text(settings)
    port = free_port()
    log = folder / "server.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TEV_ROOM="1", TEV_ROOM_CONFIG=str(folder / "room.toml"),
               TEV_ROOM_SECRET=secret, TEV_APP_THREADS=os.environ.get("TEV_APP_THREADS", "1"),
               PYTHONPATH=str(REPO))
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app/Home.py", "--server.headless", "true",
             "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
             "--server.maxUploadSize", str(upload_mb)], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = RoomServer(process, f"http://127.0.0.1:{port}", log, folder)
    deadline = time.time() + health_timeout_s
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited early:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(server.url + "/_stcore/health", timeout=2) as reply:
                if reply.read().strip() == b"ok":
                    return server
        except OSError:
            time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"streamlit did not become healthy within {health_timeout_s:.0f} s")


class PeakMemory:
    """Samples the server's RSS every `every_s` seconds in a thread; `peak` is the largest seen."""

    def __init__(self, server: RoomServer, every_s: float = 0.25) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(server, every_s), daemon=True)

    def _run(self, server: RoomServer, every_s: float) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, server.rss_bytes())
            self._stop.wait(every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------- one session

@dataclass
class SessionResult:
    index: int
    seed: int
    prompt: str
    completed: bool = False
    seconds: float | None = None  # Run live pressed -> the finished generation shown
    text: list[tuple[str, str]] = field(default_factory=list)  # per round: ("round i: n tokens", its text)
    largest_place: int | None = None  # the largest queue place this session was shown while waiting
    errors: list[str] = field(default_factory=list)
    pages_ok: bool = False  # the verifier comparison and the workshop opened without an error box


async def _idle(page, timeout_ms: float = 600_000) -> None:
    await page.wait_for_timeout(300)
    await page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


async def _set_number(page, label: str, value) -> None:
    box = page.get_by_label(label, exact=True)
    await box.fill(str(value))
    await box.press("Enter")
    await _idle(page)


async def _errors(page) -> list[str]:
    found = []
    for selector in ('[data-testid="stException"]', '[data-testid="stAlertContentError"]'):
        for element in await page.locator(selector).all():
            found.append((await element.inner_text()).strip()[:300])
    return found


async def _open(page, link: str) -> None:
    await page.locator('[data-testid="stSidebarNav"]').get_by_text(link, exact=True).click()


async def _waiting(page, result) -> list[str]:
    """Note the queue place the page shows (the largest so far) and return any error box on it."""
    for text in await page.get_by_text(QUEUE_TEXT, exact=False).all_inner_texts():
        place = int(text.split(QUEUE_TEXT)[1].split()[0])
        result.largest_place = max(result.largest_place or 0, place)
    return await _errors(page)


async def _explorer_live_run(page, url: str, result, prompt: str, seed: int, budget: int, tokens: int,
                             timeout_s: float) -> bool:
    """Open the app, run the explorer live on `prompt` and `seed` until its "Across rounds" shows (True), noting
    the time and queue places in `result`; False, with the reason in `result.errors`, when it does not."""
    await page.goto(url, wait_until="domcontentloaded")
    await page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=120_000)
    await _open(page, "Tree explorer")
    await page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=120_000)
    box = page.get_by_label("prompt (free text; edit freely)")
    await box.fill(prompt)
    await box.press("Control+Enter")
    await _idle(page)
    await _set_number(page, "seed", seed)
    await _set_number(page, "budget (tree nodes)", budget)
    await _set_number(page, "max new tokens", tokens)
    began = time.perf_counter()
    await page.get_by_role("button", name="▶ Run live").click()
    deadline = began + timeout_s
    done = page.get_by_text("Across rounds", exact=True)
    while await done.count() == 0:
        if time.perf_counter() > deadline:
            result.errors.append(f"no result within {timeout_s:.0f} s")
            return False
        errors = await _waiting(page, result)
        if errors:
            result.errors += errors
            return False
        await page.wait_for_timeout(250)
    result.seconds = time.perf_counter() - began
    return True


async def run_session(browser, url: str, index: int, seed: int, prompt: str, budget: int, tokens: int,
                      timeout_s: float, visit_pages: bool = True) -> SessionResult:
    """One participant: explorer live run on its prompt and seed, its text read off the page, then the other pages."""
    result = SessionResult(index, seed, prompt)
    context = await browser.new_context(viewport={"width": 1400, "height": 1400})
    context.set_default_timeout(timeout_s * 1000)  # every browser here shares the server's cores: no 30 s default
    page = await context.new_page()
    try:
        if not await _explorer_live_run(page, url, result, prompt, seed, budget, tokens, timeout_s):
            return result
        await _idle(page)
        await page.locator(ROUND_SPANS).first.wait_for(timeout=120_000)  # drawn just below "Across rounds"
        result.text = [(title, text) for title, text in await page.evaluate(ROUND_TEXT_JS)]
        result.completed = True
        result.errors += await _errors(page)
        if visit_pages:
            await _open(page, "Verifier comparison")
            await page.get_by_text("draws per verifier", exact=False).first.wait_for(timeout=300_000)
            await _idle(page)
            await _open(page, "Exit law workshop")
            await page.wait_for_timeout(1000)
            await _idle(page)
            errors = await _errors(page)
            result.pages_ok = not errors
            result.errors += errors
    except Exception as err:  # a session that breaks is a finding, reported beside the others
        result.errors.append(f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        await context.close()
    return result


# ---------------------------------------------------------------------- the test as a whole

def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _drive(url: str, sessions: int, budget: int, tokens: int, timeout_s: float, stagger_s: float) -> dict:
    from playwright.async_api import async_playwright

    plan = [(i, i, PROMPTS[i % len(PROMPTS)]) for i in range(sessions)]  # (index, seed, prompt)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        solo = []
        for index, seed, prompt in plan:  # one at a time: the reference text and time
            solo.append(await run_session(browser, url, index, seed, prompt, budget, tokens, timeout_s,
                                          visit_pages=False))
        async def staggered(index: int, seed: int, prompt: str) -> SessionResult:
            await asyncio.sleep(index * stagger_s)  # people open the page within seconds, not the same instant
            return await run_session(browser, url, index, seed, prompt, budget, tokens, timeout_s)

        together = await asyncio.gather(*(staggered(*item) for item in plan))
        await browser.close()
    return {"solo": solo, "together": list(together)}


def load_test(sessions: int, budget: int = 8, tokens: int = 16, slots: int | None = None,
              timeout_s: float = 900, folder: Path | None = None, stagger_s: float = 0.5) -> dict:
    """Start a room server, run every session solo then all at once; the report as a dict."""
    folder = folder or Path(tempfile.mkdtemp(prefix="room-load-"))
    server = start_room_server(folder, slots=slots)
    try:
        with PeakMemory(server) as memory:
            runs = asyncio.run(_drive(server.url, sessions, budget, tokens, timeout_s, stagger_s))
        alive = server.process.poll() is None
    finally:
        server.stop()
    solo, together = runs["solo"], runs["together"]
    solo_times = [r.seconds for r in solo if r.seconds is not None]
    times = [r.seconds for r in together if r.seconds is not None]
    same = [r.completed and s.completed and r.text == s.text for r, s in zip(together, solo)]
    traceback_lines = [line for line in server.log.read_text(errors="replace").splitlines() if "Traceback" in line]
    return {
        "sessions": sessions, "budget": budget, "max_new_tokens": tokens, "slots": slots or "default",
        "stagger_s": stagger_s,
        "cores": os.cpu_count(), "load_average_at_end": os.getloadavg(),
        "completed": sum(r.completed for r in together), "text_equal_to_solo": sum(same),
        "solo_p50_s": percentile(solo_times, 0.5), "p50_s": percentile(times, 0.5), "p95_s": percentile(times, 0.95),
        "largest_queue_place_shown": max((r.largest_place or 0 for r in together), default=0),
        "sessions_shown_a_queue_place": sum(r.largest_place is not None for r in together),
        "pages_ok": sum(r.pages_ok for r in together),
        "server_rss_peak_mb": round(memory.peak / 2**20, 1), "server_alive_at_end": alive,
        "server_log_tracebacks": len(traceback_lines),
        "errors": [f"session {r.index}: {e}" for r in [*solo, *together] for e in r.errors],
        "session_rows": [{k: v for k, v in asdict(r).items() if k != "text"} |
                         {"text": "".join(t for _, t in r.text), "same_as_solo": s} for r, s in zip(together, same)],
    }


# ---------------------------------------------------------------------- the lessons mode

@dataclass
class LessonSessionResult:
    index: int
    lesson: str
    completed: bool = False
    correct: bool = False  # the page's check said the (right) prediction is right
    seconds: float | None = None  # Run pressed -> the check shown
    errors: list[str] = field(default_factory=list)


def right_answers() -> dict[str, tuple[object, str]]:
    """Each lesson's truth, computed by the package here (the server computes its own): what the sessions type;
    and its title."""
    sys.path.insert(0, str(REPO))
    from tevcore.studio.lessons import LESSONS

    return {key: (lesson.truth().value, lesson.title) for key, lesson in LESSONS.items()}


async def _pick_lesson(page, position: int, title: str, attempts: int = 4) -> None:
    """Choose lesson `position` in the page's lesson box until its title shows (a click during a rerun is lost)."""
    for _ in range(attempts):
        await _idle(page)
        await page.get_by_role("combobox", name="lesson", exact=True).click()
        try:
            await page.get_by_role("option", name=f"{position + 1}. {title}", exact=True).click(timeout=10_000)
            await page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)
            await _idle(page)
            return
        except Exception:
            await page.keyboard.press("Escape")
    raise RuntimeError(f"the lesson {title!r} could not be opened")


async def run_lesson_session(browser, url: str, index: int, keys: list[str], answers: dict[str, tuple[object, str]],
                             timeout_s: float) -> LessonSessionResult:
    """One participant: open the Lessons page, pick lesson `index` (mod the lessons), commit its right answer, Run,
    read the check."""
    key = keys[index % len(keys)]
    result = LessonSessionResult(index, key)
    context = await browser.new_context(viewport={"width": 1400, "height": 1400})
    context.set_default_timeout(timeout_s * 1000)
    page = await context.new_page()
    try:
        await page.goto(url, wait_until="domcontentloaded")
        await page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=120_000)
        await _idle(page)
        await _open(page, "Lessons")
        await page.get_by_text("Predict, run, check", exact=False).first.wait_for(timeout=300_000)
        await _idle(page)
        truth, title = answers[key]
        await _pick_lesson(page, keys.index(key), title)
        if isinstance(truth, str):
            pattern = re.compile(f"^{re.escape(truth)}$")
            await page.locator('[data-testid="stRadio"] label').filter(has_text=pattern).first.click()
            await _idle(page)
        else:  # the number box (a choice lesson's radio may still show until the lesson's first run ends)
            box = page.get_by_role("spinbutton", name="your prediction", exact=True)
            await box.fill(str(truth))
            await box.press("Enter")
            await _idle(page)
        await page.get_by_role("button", name="🔒 Commit my prediction").click()
        await page.get_by_text("Your prediction (locked)", exact=False).wait_for(timeout=300_000)
        await _idle(page)
        began = time.perf_counter()
        await page.get_by_role("button", name="▶ Run").click()
        check = page.locator('[data-testid="stAlert"]').filter(has_text="The truth is").first
        await check.wait_for(timeout=timeout_s * 1000)
        result.seconds = time.perf_counter() - began
        result.correct = (await check.inner_text()).strip().startswith("✓ Right.")
        result.completed = True
        await _idle(page)
        result.errors += await _errors(page)
    except Exception as err:  # a session that breaks is a finding, reported beside the others
        result.errors.append(f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        await context.close()
    return result


async def _drive_lessons(url: str, sessions: int, timeout_s: float, stagger_s: float) -> list[LessonSessionResult]:
    from playwright.async_api import async_playwright

    answers = right_answers()
    keys = list(answers)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)

        async def staggered(index: int) -> LessonSessionResult:
            await asyncio.sleep(index * stagger_s)
            return await run_lesson_session(browser, url, index, keys, answers, timeout_s)

        results = await asyncio.gather(*(staggered(i) for i in range(sessions)))
        await browser.close()
    return list(results)


def lessons_load_test(sessions: int, slots: int | None = None, timeout_s: float = 900, folder: Path | None = None,
                      stagger_s: float = 0.5) -> dict:
    """Start a room server, let `sessions` participants each do one lesson at once; the report as a dict."""
    folder = folder or Path(tempfile.mkdtemp(prefix="room-load-lessons-"))
    server = start_room_server(folder, slots=slots)
    try:
        with PeakMemory(server) as memory:
            results = asyncio.run(_drive_lessons(server.url, sessions, timeout_s, stagger_s))
        alive = server.process.poll() is None
    finally:
        server.stop()
    times = [r.seconds for r in results if r.seconds is not None]
    traceback_lines = [line for line in server.log.read_text(errors="replace").splitlines() if "Traceback" in line]
    return {
        "mode": "lessons", "sessions": sessions, "slots": slots or "default", "stagger_s": stagger_s,
        "cores": os.cpu_count(), "load_average_at_end": os.getloadavg(),
        "completed": sum(r.completed for r in results), "checks_right": sum(r.correct for r in results),
        "lessons_done": sorted({r.lesson for r in results if r.completed}),
        "p50_s": percentile(times, 0.5), "p95_s": percentile(times, 0.95),
        "server_rss_peak_mb": round(memory.peak / 2**20, 1), "server_alive_at_end": alive,
        "server_log_tracebacks": len(traceback_lines),
        "errors": [f"session {r.index} ({r.lesson}): {e}" for r in results for e in r.errors],
        "session_rows": [asdict(r) for r in results],
    }


# ---------------------------------------------------------------------- the heaviest-action mode

LIVE_SOURCE = "sampled trees at an explorer round's context (its target and drafter)"  # the comparison's source
HEAVY_BUILDER = "sampled:4,4,4"  # 1 + 4 + 16 + 64 nodes before the budget cuts it: trees as large as allowed
DRAWN_TEXT = "independent draws of"  # the caption under the drawn trees


@dataclass
class HeavySessionResult:
    index: int
    seed: int
    completed: bool = False  # the drawn trees shown
    refused: bool = False  # the page refused the draw (a cap or the memory budget)
    seconds: float | None = None  # Draw pressed -> the drawn trees shown
    largest_place: int | None = None
    errors: list[str] = field(default_factory=list)


class AllDrawn:
    """Holds every session's page open until all sessions have drawn (or given up), so the server keeps every
    participant's trees at once, as a room would."""

    def __init__(self, sessions: int) -> None:
        self._left, self._event = sessions, asyncio.Event()

    def done(self) -> None:
        self._left -= 1
        if self._left <= 0:
            self._event.set()

    async def wait(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass


async def run_heavy_session(browser, url: str, index: int, seed: int, prompt: str, rounds: int, tree_budget: int,
                            timeout_s: float, all_drawn: AllDrawn) -> HeavySessionResult:
    """One participant: a short live run of the explorer, then `rounds` sampled trees of `tree_budget` nodes at
    its round's context on the verifier comparison; the page stays open until every session has drawn."""
    result = HeavySessionResult(index, seed)
    context = await browser.new_context(viewport={"width": 1400, "height": 1400})
    context.set_default_timeout(timeout_s * 1000)
    page = await context.new_page()
    try:
        explorer = SessionResult(index, seed, prompt)
        if not await _explorer_live_run(page, url, explorer, prompt, seed, 8, 16, timeout_s):
            result.errors += explorer.errors
            return result
        await _idle(page)
        await _open(page, "Verifier comparison")
        await page.get_by_text(LIVE_SOURCE, exact=True).click()
        await page.get_by_role("button", name="▶ Draw the trees").wait_for(timeout=300_000)
        await _idle(page)
        box = page.get_by_label("sampled builder", exact=True)
        await box.fill(HEAVY_BUILDER)
        await box.press("Enter")
        await _idle(page)
        await _set_number(page, "budget", tree_budget)
        await _set_number(page, "rounds (fresh trees)", rounds)
        began = time.perf_counter()
        await page.get_by_role("button", name="▶ Draw the trees").click()
        shown = page.get_by_text(DRAWN_TEXT, exact=False)
        while await shown.count() == 0:
            if time.perf_counter() > began + timeout_s:
                result.errors.append(f"no trees within {timeout_s:.0f} s")
                return result
            errors = await _waiting(page, result)
            if errors:
                result.refused = any(e.startswith("Refused") for e in errors)
                result.errors += errors
                return result
            await page.wait_for_timeout(250)
        result.seconds = time.perf_counter() - began
        result.completed = True
        await _idle(page)
        result.errors += await _errors(page)
    except Exception as err:  # a session that breaks is a finding, reported beside the others
        result.errors.append(f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        all_drawn.done()
        await all_drawn.wait(timeout_s)
        await context.close()
    return result


async def _drive_heaviest(url: str, sessions: int, rounds: int, tree_budget: int, timeout_s: float,
                          stagger_s: float) -> list[HeavySessionResult]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        all_drawn = AllDrawn(sessions)

        async def staggered(index: int) -> HeavySessionResult:
            await asyncio.sleep(index * stagger_s)
            return await run_heavy_session(browser, url, index, index, PROMPTS[index % len(PROMPTS)], rounds,
                                           tree_budget, timeout_s, all_drawn)

        results = await asyncio.gather(*(staggered(i) for i in range(sessions)))
        await browser.close()
    return list(results)


def heaviest_caps(rounds: int, tree_budget: int) -> str:
    """The room.toml caps table of a server whose heaviest sampled draw is `rounds` trees of `tree_budget` nodes
    (nothing where those are the room profile's own caps)."""
    from tevcore.room.limits import ROOM

    caps = {name: value for name, value in (("sampled_rounds", rounds), ("sampled_budget", tree_budget))
            if value != getattr(ROOM, name)}
    return "[caps]\n" + "".join(f"{name} = {value}\n" for name, value in caps.items()) if caps else ""


def heaviest_load_test(sessions: int, rounds: int, tree_budget: int, slots: int | None = None,
                       timeout_s: float = 900, folder: Path | None = None, stagger_s: float = 0.5) -> dict:
    """Start a room server whose caps allow `rounds` trees of `tree_budget` nodes, let every session draw exactly
    that at once; the report as a dict."""
    folder = folder or Path(tempfile.mkdtemp(prefix="room-load-heaviest-"))
    server = start_room_server(folder, config=heaviest_caps(rounds, tree_budget), slots=slots)
    started = server.rss_bytes()
    try:
        with PeakMemory(server) as memory:
            results = asyncio.run(_drive_heaviest(server.url, sessions, rounds, tree_budget, timeout_s, stagger_s))
        alive = server.process.poll() is None
    finally:
        server.stop()
    times = [r.seconds for r in results if r.seconds is not None]
    traceback_lines = [line for line in server.log.read_text(errors="replace").splitlines() if "Traceback" in line]
    return {
        "mode": "heaviest", "sessions": sessions, "rounds": rounds, "tree_budget": tree_budget,
        "builder": HEAVY_BUILDER, "slots": slots or "default", "stagger_s": stagger_s, "cores": os.cpu_count(),
        "load_average_at_end": os.getloadavg(), "completed": sum(r.completed for r in results),
        "refused": sum(r.refused for r in results), "p50_s": percentile(times, 0.5), "p95_s": percentile(times, 0.95),
        "largest_queue_place_shown": max((r.largest_place or 0 for r in results), default=0),
        "server_rss_started_mb": round(started / 2**20, 1), "server_rss_peak_mb": round(memory.peak / 2**20, 1),
        "server_alive_at_end": alive, "server_log_tracebacks": len(traceback_lines),
        "errors": [f"session {r.index}: {e}" for r in results for e in r.errors],
        "session_rows": [asdict(r) for r in results],
    }


def as_result(report: dict, meta: RunMeta, options: dict) -> ResultRecord:
    """The report as the one result record every measuring command writes: its options as settings, its
    figures as the summary, one row per session."""
    settings = {key: options[key] for key in ("mode", "sessions", "budget", "tokens", "slots", "timeout", "stagger",
                                              "rounds", "tree_budget")}
    summary = json.loads(json.dumps({k: v for k, v in report.items() if k != "session_rows"}, default=str))
    rows = json.loads(json.dumps(report["session_rows"], default=str))
    return ResultRecord(command="room-load", meta=meta, rows=rows, settings=settings, summary=summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("explorer", "lessons", "heaviest"), default="explorer",
                        help="explorer: live runs of the tree explorer; lessons: one lesson per session; heaviest: "
                             "every session draws the largest sampled trees the caps allow at a round's context")
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--slots", type=int, default=None, help="compute slots (default: what the cores hold)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a session may wait for its result")
    parser.add_argument("--stagger", type=float, default=0.5, help="seconds between two sessions' first visits")
    parser.add_argument("--rounds", type=int, default=None,
                        help="heaviest: sampled trees per session (default: the room's cap, written as the server's "
                             "cap when other)")
    parser.add_argument("--tree-budget", type=int, default=None,
                        help="heaviest: nodes per sampled tree (default: the room's cap, written as the server's cap "
                             "when other)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the report here (a tevcore result: settings, summary, one row per session)")
    parser.add_argument("--force", action="store_true", help="replace an existing --out")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print("room_load: no system Chromium at /usr/bin/chromium", file=sys.stderr)
        return 2
    if args.sessions < 1:
        print("room_load: --sessions must be at least 1", file=sys.stderr)
        return 2
    try:
        if args.out:
            check_output_file(args.out, "--out", make_parents=True)
            check_not_replacing(args.out, "--out", args.force)
    except ValueError as err:
        print(f"room_load: {err}", file=sys.stderr)
        return 2
    meta = RunMeta.now(command_line("python scripts/room_load.py", sys.argv[1:] if argv is None else argv),
                       device="cpu", seed=None)
    if args.mode == "heaviest":
        from tevcore.room.limits import ROOM

        args.rounds = args.rounds or ROOM.sampled_rounds
        args.tree_budget = args.tree_budget or ROOM.sampled_budget
        if args.rounds < 10 or args.tree_budget < 1:  # the page's rounds box starts at 10
            print("room_load: --rounds must be at least 10 and --tree-budget at least 1", file=sys.stderr)
            return 2
        report = heaviest_load_test(args.sessions, args.rounds, args.tree_budget, args.slots, args.timeout,
                                    stagger_s=args.stagger)
        keys = ["sessions", "rounds", "tree_budget", "completed", "refused", "p50_s", "p95_s",
                "largest_queue_place_shown", "server_rss_started_mb", "server_rss_peak_mb", "server_alive_at_end",
                "server_log_tracebacks"]
        passed = report["completed"] == args.sessions
    elif args.mode == "lessons":
        report = lessons_load_test(args.sessions, args.slots, args.timeout, stagger_s=args.stagger)
        keys = ["sessions", "completed", "checks_right", "p50_s", "p95_s", "server_rss_peak_mb",
                "server_alive_at_end", "server_log_tracebacks"]
        passed = report["checks_right"] == args.sessions
    else:
        report = load_test(args.sessions, args.budget, args.tokens, args.slots, args.timeout, stagger_s=args.stagger)
        keys = ["sessions", "completed", "text_equal_to_solo", "solo_p50_s", "p50_s", "p95_s",
                "largest_queue_place_shown", "sessions_shown_a_queue_place", "pages_ok", "server_rss_peak_mb",
                "server_alive_at_end", "server_log_tracebacks"]
        passed = report["completed"] == args.sessions
    if args.out:
        write_result(args.out, as_result(report, meta, vars(args)), force=args.force)
    for key in keys:
        value = report[key]
        print(f"{key:30s} {value:.1f}" if isinstance(value, float) else f"{key:30s} {value}")
    for error in report["errors"]:
        print("error:", error)
    return 0 if passed and not report["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
