"""Attacks on a workshop room, each through the real page (headless Chromium, the app in the room profile).

A careless or curious participant types a server path, uploads a huge file or a small gzip that expands past the
cap, types the largest number into every box, tries to stop another session's job, starts jobs over and over,
and clicks Run in bursts. Each is refused or queued with a clear message, the server stays up, and nothing is
written outside the participant's space or the host's runs folder. On a server without the room profile every
one of these goes through (path boxes, no lock, no queue), so these tests fail there.
"""

from __future__ import annotations

import gzip
import re
import sys
import time
from pathlib import Path

import pytest

import browser_kit as kit
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SECRET = "host-only-7"
PATH_LABELS = ("target model", "or open a saved trace from a folder", "save to folder", "runs folder",
               "or read every .json in a folder", "drafter folder to start from", "another drafter folder (optional)")

if not CHROMIUM.exists():
    pytest.skip("no system Chromium at /usr/bin/chromium", allow_module_level=True)

sys.path.insert(0, str(REPO / "scripts"))
import room_load  # noqa: E402


@pytest.fixture(scope="module")
def room(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    server = room_load.start_room_server(
        folder, secret=SECRET, slots=1,
        config='targets = ["default"]\ndrafters = ["rollout"]\n[caps]\nupload_bytes = 65536\ntext_bytes = 1048576\n'
               'sampled_rounds = 2000\n')  # a draw long enough to hold the slot until its tab closes
    yield server
    alive = server.process.poll() is None
    server.stop()
    assert alive, f"the server died:\n{server.log.read_text()[-3000:]}"


@pytest.fixture(scope="module")
def browser():
    with kit.chromium(CHROMIUM, room_load.ARGS) as chromium:
        yield chromium


@pytest.fixture(autouse=True)
def close_pages(browser):
    """A test's pages close when it ends: pages left open (an ExitTrain page reruns itself on a timer) would load
    the one server that the module's later tests share."""
    yield
    for context in list(browser.contexts):
        context.close()


SHOWN = {"Tree explorer": "Press Run live to stream a generation", "Verifier comparison": "draws per verifier",
         "ExitTrain": "Train the drafter on the trees it really builds", "Exit law workshop": "seed of the draws"}


def visit(page, link: str) -> None:
    """Open a page from the sidebar and wait until it is drawn (a first visit imports its modules: slow)."""
    kit.wait_idle(page, 180_000)  # a click during a script run can be lost
    kit.open_page(page, link)
    try:
        page.get_by_text(SHOWN[link], exact=False).first.wait_for(timeout=180_000)
    except Exception:
        page.screenshot(path=f"/tmp/room-visit-{link.replace(' ', '-')}.png")
        raise
    kit.wait_idle(page, 180_000)


def session(browser, room, page_link: str):
    page = browser.new_context(viewport={"width": 1500, "height": 1400}).new_page()
    page.goto(room.url, wait_until="domcontentloaded")
    page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=120_000)
    visit(page, page_link)
    return page


def holds_the_slot(page) -> None:
    """Until this page's live run computes: its progress bar counts tokens (the page's own words name decoding too)."""
    page.locator('[data-testid="stProgress"]').filter(has_text="tokens").first.wait_for(timeout=120_000)


def until_shown(page, room, text: str, timeout_ms: float, who: str = "the page") -> None:
    """Until the page shows `text`; else fail naming the page (`who`), with what its main part shows (its
    screenshot in the room's folder) and the server's log."""
    try:
        page.get_by_text(text, exact=False).first.wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        shot = room.folder / f"missing-{re.sub(r'[^a-z0-9]+', '-', who.lower())}.png"
        page.screenshot(path=str(shot), full_page=True)
        shown = page.locator('[data-testid="stMain"]').inner_text()[:2000]
        pytest.fail(f"{text!r} not shown on {who} after {timeout_ms / 1000:.0f} s (screenshot {shot}); its main "
                    f"part shows:\n{shown}\nserver log:\n{room.log.read_text()[-2000:]}")


def until_result(page, room, timeout_ms: float, who: str = "the page") -> None:
    """Until the page's live run shows its rounds; else fail as `until_shown` does."""
    until_shown(page, room, "Across rounds", timeout_ms, who)


def hold_the_only_slot(page, room) -> None:
    """Make `page` hold the server's only compute slot until its tab closes: an 8-token explorer run, then 2,000
    sampled trees of up to 64 nodes drawn at its round's context (many minutes of work; a closed tab stops it at
    its next tree). A live run holds the slot only while it decodes, which a loaded machine can end before the
    test has made its requests."""
    kit.set_number(page, "max new tokens", 8)
    page.get_by_role("button", name="▶ Run live").click()
    until_result(page, room, 300_000, "the slot holder's explorer")
    visit(page, "Verifier comparison")
    page.get_by_text("sampled trees at an explorer round's context", exact=False).click()
    kit.wait_idle(page)
    builder = page.get_by_label("sampled builder", exact=True)
    builder.fill("sampled:4,4,4")
    builder.press("Enter")
    kit.wait_idle(page)
    kit.set_number(page, "budget", 64)
    kit.set_number(page, "rounds (fresh trees)", 2000)
    page.get_by_role("button", name="▶ Draw the trees").click()
    page.get_by_text(re.compile(r"tree \d+/2000")).wait_for(timeout=300_000)


def text_boxes(page) -> list[str]:
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        'input[type=text]:not([role=combobox]), input[type=password], textarea')).map(
        e => e.getAttribute('aria-label') || '')""")


def build_data_processes(under: Path | None = None) -> int:
    """The running `tevcore build-data` processes, or only those writing under the folder `under`."""
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"build-data" in words and b"tevcore" in words and (
                under is None or any(str(under).encode() in word for word in words)):
            count += 1
    return count


DATA_NAME = "data set name (folder under the runs folder)"


def open_build_form(page) -> None:
    """The data-build expander (open already while the runs folder has no data set)."""
    kit.wait_idle(page)
    for _ in range(3):
        if page.get_by_label(DATA_NAME).is_visible():
            return
        page.get_by_text("Build a small data set", exact=False).first.click()
        page.wait_for_timeout(1000)
        kit.wait_idle(page)
    page.screenshot(path="/tmp/room-build-form.png")
    page.get_by_label(DATA_NAME).wait_for(state="visible", timeout=5_000)


def unlock_as_host(page) -> None:
    box = page.get_by_label("host secret (training and data builds are the host's)")
    box.fill(SECRET)
    box.press("Enter")
    page.get_by_text("let participants start training and data builds", exact=False).wait_for(timeout=60_000)
    kit.wait_idle(page)


def start_a_long_build(host, name: str) -> None:
    """As the host: a data build of the room's most shards, running (its Stop is shown) when this returns."""
    open_build_form(host)
    box = host.get_by_label(DATA_NAME)
    box.fill(name)
    box.press("Enter")
    kit.set_number(host, "shards (target-generated: 1-3 min each on one CPU core)", 8)
    host.get_by_role("button", name="▶ Build").click()
    host.get_by_role("button", name="■ Stop this build").wait_for(timeout=60_000)


def test_no_box_takes_a_server_path_and_a_typed_folder_name_is_refused(browser, room):
    page = session(browser, room, "Tree explorer")
    page.get_by_text("Open a trace (replay without a model)").click()
    kit.wait_idle(page)
    seen = text_boxes(page)
    visit(page, "Verifier comparison")
    seen += text_boxes(page)
    visit(page, "ExitTrain")
    page.get_by_text("checkpoint comparisons are the host's", exact=False).wait_for(timeout=30_000)
    assert page.get_by_role("button", name="▶ Start training").count() == 0  # locked for a participant
    unlock_as_host(page)
    open_build_form(page)
    seen += text_boxes(page)
    assert [label for label in seen if label in PATH_LABELS] == []
    for typed in ("../../escape", f"{room.folder}/outside", "..", ".hidden"):
        box = page.get_by_label(DATA_NAME)
        box.fill(typed)
        box.press("Enter")
        kit.wait_idle(page)
        page.get_by_role("button", name="▶ Build").click()
        page.get_by_text(f"Refused: {typed!r} is not a plain file name", exact=False).wait_for(timeout=30_000)
    assert not (room.folder / "escape").exists() and not (room.folder / "outside").exists()
    assert build_data_processes() == 0
    kit.no_exception(page)


def upload_past_both_caps(page, room, tmp_path) -> None:
    """Into the page's first uploader: a file over the byte cap, then a small gzip expanding past the text cap;
    each refused in its line, the page whole and the server's memory far from a blow-up."""
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * 100_000)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(big))
    page.get_by_text("big.jsonl is 97.7 KB, over this server's upload cap of 64.0 KB (upload_bytes)",
                     exact=False).wait_for(timeout=60_000)
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b'{"a": "' + b"z" * 3_000_000 + b'"}\n'))
    assert bomb.stat().st_size < 65536  # small enough to pass the upload cap: the text cap must stop it
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').first.set_input_files(str(bomb))
    page.get_by_text("bomb.jsonl.gz holds more than 1 MiB of trace text", exact=False).wait_for(timeout=60_000)
    kit.no_exception(page)
    assert room.rss_bytes() < 4 * 2**30


def test_an_oversized_upload_and_a_small_gzip_that_expands_are_refused(browser, room, tmp_path):
    page = session(browser, room, "Tree explorer")
    page.get_by_text("Open a trace (replay without a model)").click()
    kit.wait_idle(page)
    upload_past_both_caps(page, room, tmp_path)


def test_the_comparisons_trace_upload_is_held_to_the_same_caps(browser, room, tmp_path):
    """The verifier comparison reads uploads through the same capped reader as the explorer (it once read any file
    the web server let through, and a small gzip expanded without bound)."""
    page = session(browser, room, "Verifier comparison")
    # the trace's uploader is drawn above the result files' one; a click lost during a script run would leave only
    # that one, so the choice is clicked until the trace's own prompt shows
    prompt = page.get_by_text("Upload a trace saved by the tree explorer", exact=False)
    for _ in range(3):
        page.get_by_text("a round from a trace file").click()
        kit.wait_idle(page)
        if prompt.count():
            break
    prompt.wait_for(timeout=60_000)
    upload_past_both_caps(page, room, tmp_path)


def test_the_largest_value_of_every_numeric_input_is_refused_naming_the_cap(browser, room):
    page = session(browser, room, "Tree explorer")
    kit.set_number(page, "budget (tree nodes)", 10**9)
    kit.set_number(page, "max new tokens", 10**9)
    page.get_by_text("budget (tree nodes) must lie in [0, 64]", exact=False).first.wait_for(timeout=30_000)
    page.get_by_text("max new tokens must lie in [1, 128]", exact=False).first.wait_for(timeout=30_000)
    assert page.get_by_role("button", name="▶ Run live").is_disabled()
    visit(page, "Verifier comparison")
    kit.set_number(page, "draws per verifier", 2_000_000)  # the widget's own largest value
    page.get_by_text("Refused: draws per verifier 2000000 is over this server's cap of 200000 (draws)",
                     exact=False).wait_for(timeout=60_000)
    visit(page, "Exit law workshop")
    kit.no_exception(page)
    assert room.rss_bytes() < 4 * 2**30


def test_another_sessions_build_cannot_be_stopped_and_job_starts_stay_under_the_cap(browser, room):
    host = session(browser, room, "ExitTrain")
    unlock_as_host(host)
    host.get_by_text("let participants start training and data builds", exact=False).click()
    kit.wait_idle(host)
    # the room's most shards, so the build outlasts the fifty refused starts below (the host stops it at the end;
    # a finished build would collapse the guest's form and lift the cap the test is about)
    start_a_long_build(host, "set-a")

    guest = session(browser, room, "ExitTrain")
    open_build_form(guest)
    box = guest.get_by_label(DATA_NAME)
    box.fill("set-a")
    box.press("Enter")
    kit.wait_idle(guest)
    guest.get_by_text("building set-a", exact=False).wait_for(timeout=120_000)  # a loaded machine starts it slowly
    assert guest.get_by_role("button", name="■ Stop this build").count() == 0  # not theirs to stop
    guest.get_by_role("button", name="▶ Build").click()
    guest.get_by_text("set-a is already being built", exact=False).wait_for(timeout=30_000)
    for i in range(50):  # fifty starts of new builds while one runs: each refused by the server-wide cap
        for attempt in range(3):  # the form folds again when the host's set gains a shard: open it, try again
            open_build_form(guest)
            box.fill(f"set-{i}")
            box.press("Enter")
            kit.wait_idle(guest)
            guest.get_by_role("button", name="▶ Build").click()
            try:
                guest.get_by_text("runs at most 1 job at once", exact=False).wait_for(timeout=10_000)
                break
            except PlaywrightTimeout:
                assert attempt < 2, f"start {i} was not refused in sight"
        assert build_data_processes() <= 1
    assert not any((room.folder / "runs" / f"set-{i}").exists() for i in range(50))
    # the host's Stop ends the build (the status part reruns on a timer, so a click that lands while it redraws
    # is made again; the build must end either way)
    deadline = time.time() + 120
    while build_data_processes() and time.time() < deadline:
        stop = host.get_by_role("button", name="■ Stop this build")
        if stop.count():
            try:
                stop.click(timeout=5_000)
                host.get_by_text("sent a stop signal to the build of set-a", exact=False).wait_for(timeout=10_000)
            except PlaywrightTimeout:
                continue
        time.sleep(0.5)
    assert build_data_processes() == 0
    kit.no_exception(host)
    kit.no_exception(guest)


def test_a_burst_of_reruns_keeps_one_place_in_line_and_ends_in_one_result(browser, room):
    first = session(browser, room, "Tree explorer")
    second = session(browser, room, "Tree explorer")
    kit.set_number(second, "max new tokens", 8)
    hold_the_only_slot(first, room)
    run = second.get_by_role("button", name="▶ Run live")
    for _ in range(10):
        run.click()
        second.wait_for_timeout(100)
    places: list[str] = []  # "k of n" as shown, in order

    def look() -> None:
        for text in second.get_by_text(room_load.QUEUE_TEXT, exact=False).all_inner_texts():
            places.append(text.split(room_load.QUEUE_TEXT)[1].split(" in line")[0])

    until_shown(second, room, room_load.QUEUE_TEXT, 60_000, "the clicking tab")
    for _ in range(25):  # five seconds in line: every click's request has arrived
        look()
        second.wait_for_timeout(200)
    first.context.close()  # the draw stops at its next tree: the burst's request runs
    deadline = time.time() + 600
    while second.get_by_text("Across rounds", exact=True).count() == 0:
        assert time.time() < deadline, "the burst's last run never finished"
        look()
        second.wait_for_timeout(200)
    # Ten stacked requests would show a line growing towards ten. The burst's own request is one; in the full suite
    # one other session of this module's server has been seen waiting beside it ("2 of 2"), so the line may hold two.
    assert places and max(int(place.split(" of ")[1]) for place in places) <= 2, places
    kit.no_exception(second)


def test_three_tabs_of_one_participant_hold_one_place_in_line(browser, room):
    """A participant is their browser: while one of their tabs computes, their other tabs' requests stand in line
    once (the newest replaces the older), and another participant's request stands behind that one place. On
    a10088a each tab was a participant of its own: three tabs held three places. Once the computing tab closes,
    the participant's newest request runs, then the other participant's."""
    ann = browser.new_context(viewport={"width": 1500, "height": 1400})

    def tab():
        page = ann.new_page()
        page.goto(room.url, wait_until="domcontentloaded")
        page.get_by_text("Tree speculative decoding you can see").wait_for(timeout=120_000)
        visit(page, "Tree explorer")
        return page

    first, second, third = tab(), tab(), tab()
    for page in (second, third):
        kit.set_number(page, "max new tokens", 8)
    bob = session(browser, room, "Tree explorer")
    kit.set_number(bob, "max new tokens", 8)
    hold_the_only_slot(first, room)  # ann's first tab
    second.get_by_role("button", name="▶ Run live").click()
    until_shown(second, room, f"{room_load.QUEUE_TEXT}1 of 1 in line", 60_000, "ann's second tab")
    third.get_by_role("button", name="▶ Run live").click()
    until_shown(second, room, "This request was replaced by your newer one.", 60_000, "ann's second tab")
    until_shown(third, room, f"{room_load.QUEUE_TEXT}1 of 1 in line", 60_000, "ann's third tab")
    bob.get_by_role("button", name="▶ Run live").click()
    until_shown(bob, room, f"{room_load.QUEUE_TEXT}2 of 2 in line", 60_000, "bob's tab")
    first.close()  # its draw stops at its next tree and frees the slot
    until_result(third, room, 300_000, "ann's third tab")
    until_result(bob, room, 300_000, "bob's tab")
    for page in (second, third, bob):
        kit.no_exception(page)
    ann.close()


def test_a_tab_closed_mid_computation_frees_its_slot(browser, tmp_path):
    """A participant draws 2,000 sampled trees of up to 64 nodes at an explorer round's context (about ten minutes
    of work on a quiet 2-core machine, in the server's only slot) and closes the tab: the work stops at its next tree
    and the next participant's run starts at once. A regression guard, not a bug test: it passes on a10088a too,
    where Streamlit's stop request to a disconnected session took effect at the draw's next progress bar; work that
    draws nothing between its units stops through the studio's `Seat.still_here` (tests/studio/test_turns.py)."""
    server = room_load.start_room_server(tmp_path / "room", secret=SECRET, slots=1,
                                         config='targets = ["default"]\ndrafters = ["rollout"]\n'
                                                '[caps]\nsampled_rounds = 2000\n')
    try:
        ann = session(browser, server, "Tree explorer")
        hold_the_only_slot(ann, server)  # most of its trees to go (minutes of work)
        bob = session(browser, server, "Tree explorer")
        kit.set_number(bob, "max new tokens", 8)
        bob.get_by_role("button", name="▶ Run live").click()
        bob.get_by_text(f"{room_load.QUEUE_TEXT}1 of 1 in line", exact=False).wait_for(timeout=60_000)
        ann.context.close()  # mid-draw
        bob.get_by_text("Across rounds", exact=True).wait_for(timeout=120_000)
        kit.no_exception(bob)
        assert server.process.poll() is None
    finally:
        server.stop()


def test_stopping_the_room_server_ends_the_jobs_it_started(browser, tmp_path):
    """A room's jobs are the server's: the host stops the server (as `bash scripts/app.sh --room` is stopped, by
    SIGTERM) while a data build it started runs, and the build ends with it instead of running on unowned."""
    server = room_load.start_room_server(tmp_path / "room", secret=SECRET, slots=1,
                                         config='targets = ["default"]\ndrafters = ["rollout"]\n')
    try:
        host = session(browser, server, "ExitTrain")
        unlock_as_host(host)
        start_a_long_build(host, "set-end")
        assert build_data_processes(server.folder) == 1
        host.context.close()
    finally:
        server.stop()
    deadline = time.time() + 30
    while build_data_processes(server.folder) and time.time() < deadline:
        time.sleep(0.5)
    assert build_data_processes(server.folder) == 0, \
        f"the build outlived its room's server:\n{server.log.read_text()[-2000:]}"
