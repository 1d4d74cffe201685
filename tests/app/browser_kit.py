"""What the browser tests do on a page: wait for streamlit, set a number, open a page, click a tree node."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout


def screenshot_folder(tmp_path_factory) -> Path:
    """Where a module's screenshots go: TEV_SCREENSHOTS if set (the README's pictures), else a temporary folder."""
    chosen = os.environ.get("TEV_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def chromium(executable: Path, args: list[str]) -> Iterator[object]:
    """A headless Chromium (the system's, with the room load test's flags), closed when the module is done."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(executable), args=args)
        yield browser
        browser.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


APP_ROOT_VARIABLE = "TEV_APP_ROOT"


def app_root(default: Path) -> Path:
    """The checkout whose app the browser tests serve: `TEV_APP_ROOT` names another one (a `git archive` of the
    commit before a fix, to see the tests of that fix fail there), else `default` (this checkout)."""
    chosen = os.environ.get(APP_ROOT_VARIABLE)
    return Path(chosen).resolve() if chosen else default


@contextlib.contextmanager
def served_app(root: Path, log_path: Path) -> Iterator[str]:
    """`streamlit run app/Home.py` of the checkout `root` (its `tevcore` first on the path, for the processes the
    app starts too), until healthy; yields its URL and stops it afterwards. Its output goes to `log_path`."""
    port = free_port()
    log = open(log_path, "w+")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TEV_APP_PROPOSER="default", TEV_APP_THREADS="1",
               PYTHONPATH=str(root))
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/Home.py", "--server.headless", "true",
         "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
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
            pytest.fail("streamlit did not become healthy within 90 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=4)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def no_exception(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]').first.inner_text()


def wait_for_plots(page, count: int, timeout: float = 60_000) -> None:
    page.wait_for_function(f"document.querySelectorAll('.js-plotly-plot').length >= {count}", timeout=timeout)
    wait_idle(page)


def wait_until_no_plots(page, timeout: float = 30_000) -> None:
    """Until no chart is on the page: a run that stops early drops the last run's charts only when it ends,
    and the running indicator can be gone a moment before they are."""
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length === 0", timeout=timeout)


def wait_idle(page, timeout: float = 60_000) -> None:
    """Until the script run the last action started is over (streamlit's running indicator is gone)."""
    page.wait_for_timeout(300)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def draw_and_verify_fresh_rounds(page, rounds: int, timeout: float) -> None:
    """On the verifier comparison's sampled-trees sources: draw `rounds` fresh trees, then verify every round."""
    set_number(page, "rounds (fresh trees)", rounds)
    page.get_by_role("button", name="▶ Draw the trees").click()
    page.get_by_text(f"{rounds} independent draws of sampled:", exact=False).wait_for(timeout=timeout)
    wait_idle(page)
    page.get_by_role("button", name="▶ Verify every round").click()
    page.get_by_text("across rounds: each rule's E[L]", exact=False).first.wait_for(timeout=timeout)
    wait_idle(page)


def set_number(page, label: str, value: float) -> None:
    """Type `value` into the number box labelled `label` and submit it. A box that moved on the page (an element
    above it came or went) is drawn twice, old and new, until the script run that moved it ends, and that run can
    start after `wait_idle` looked: the box is filled once it is drawn once."""
    box = page.get_by_label(label, exact=True)
    deadline = time.time() + 60
    while box.count() != 1:
        assert time.time() < deadline, f"the box {label!r} was drawn {box.count()} times for a minute"
        page.wait_for_timeout(100)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def set_text(page, label: str, text: str, attempts: int = 3) -> None:
    """Type `text` into the text box labelled `label` and submit it (an Enter that lands during a rerun can be
    dropped with the typed text: tried again until the box holds it after the rerun)."""
    box = page.get_by_label(label, exact=True)
    for _ in range(attempts):
        wait_idle(page)
        box.fill(text)
        box.press("Enter")
        wait_idle(page)
        if box.input_value() == text:
            return
    pytest.fail(f"the text box {label!r} never kept {text!r}")


def edit_grid_cell(page, grid, column: str, row: int, text: str, shown: str, attempts: int = 5) -> None:
    """Type `text` into the data-editor cell (`column`, `row`), until `shown` appears.

    The grid draws on a canvas, but beside it keeps an accessibility table (a `th` per column title, a `td`
    per visible cell, both with `aria-colindex`). Focusing a `td` selects its cell (the grid's first focus
    lands on its first cell, so that can take two); then, as a keyboard user does, Enter on the grid opens
    the selected cell's editor and Enter again commits it (a click on the `td` opens the editor too, but its
    edits were dropped about half the time). No pixel positions or arrow keys: fonts and column
    widths cannot move the edit to another cell (1.7 typed into an integer column becomes 17). Each step
    waits for the state it needs and checks it (the cell selected, the editor's starting text, the text it
    holds); a miss is retried.
    """
    message = page.get_by_text(shown, exact=False)
    header = grid.locator("th[role=columnheader]").filter(has_text=re.compile(f"^{re.escape(column)}$")).first
    header.wait_for(state="attached", timeout=30_000)
    cell = grid.locator(f"tr[aria-rowindex='{row + 2}'] td[aria-colindex='{header.get_attribute('aria-colindex')}']")
    selected = "(cell) => cell.getAttribute('aria-selected') === 'true' && document.activeElement === cell"
    editing = "() => ['INPUT', 'TEXTAREA'].includes(document.activeElement.tagName)"
    editor_text = "document.activeElement.value"
    for _ in range(attempts):
        wait_idle(page)  # an edit that lands during a rerun can be dropped when the rerun redraws the grid
        try:
            for _ in range(3):
                cell.focus()
                try:
                    page.wait_for_function(selected, arg=cell.element_handle(), timeout=1_500)
                    break
                except PlaywrightTimeout:
                    continue
            before = cell.inner_text()
            grid.locator("[data-testid=data-grid-canvas]").focus()  # the selection stays
            page.keyboard.press("Enter")
            page.wait_for_function(editing, timeout=5_000)
        except PlaywrightTimeout:
            continue
        if page.evaluate(editor_text) != before:  # opened on another cell
            page.keyboard.press("Escape")
            continue
        page.keyboard.press("Control+A")
        page.keyboard.type(text)
        if page.evaluate(editor_text) != text:
            page.keyboard.press("Escape")
            continue
        page.wait_for_timeout(400)  # a person's pause: an Enter right after the last key can commit the old value
        page.keyboard.press("Enter")
        try:
            message.wait_for(timeout=20_000)
            return
        except PlaywrightTimeout:
            continue
    pytest.fail(f"typing {text!r} into the table's cell ({column!r}, row {row}) never showed {shown!r} "
                f"({attempts} attempts)")


def open_page(page, link_text: str) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_text(link_text, exact=True).click()


NODE_TRACE = """() => {  // the drawn group of the tree figure's node trace (empty traces draw no group)
        const gd = document.querySelector('.js-plotly-plot');
        return Array.from(gd.querySelectorAll('.scatterlayer .trace')).find(
            g => g.__data__ && ((g.__data__[0].trace || {}).name || '').startsWith('node'));
    }"""


def click_tree_node(page, node: int) -> None:
    """Click the `node`-th drawn node of the explorer's tree figure (the first plot), where plotly drew it."""
    page.wait_for_function(f"""(node) => {{  // drawn (a tab switch redraws the figure)
        const trace = ({NODE_TRACE})();
        return trace && trace.querySelectorAll('.points path').length > node;
    }}""", arg=node, timeout=30_000)
    box = page.evaluate(f"""(node) => {{
        const point = ({NODE_TRACE})().querySelectorAll('.points path')[node];
        point.scrollIntoView({{block: 'center'}});
        const r = point.getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2}};
    }}""", node)
    page.mouse.click(box["x"], box["y"])


def chosen_node_text(page) -> str:
    """What the explorer's node selectbox shows ("7: ' your' (depth 1)")."""
    return page.get_by_role("combobox", name="node", exact=True).input_value()


def round_slider(page):
    return page.locator('[data-testid="stSlider"] input[type="range"]').first


def move_round_slider(page, key: str, times: int) -> None:
    thumb = round_slider(page)
    for _ in range(times):
        thumb.focus()
        thumb.press(key)
        wait_idle(page)  # each step reruns the page


def wait_for_text(page, text: str, timeout_s: float, failure: str, log: Path) -> None:
    """Until `text` shows (no reload); fails early with `log`'s tail when `failure` shows instead."""
    deadline = time.time() + timeout_s
    while page.get_by_text(text, exact=False).count() == 0:
        tail = log.read_text(errors="replace")[-3000:] if log.is_file() else "(no log)"
        if page.get_by_text(failure, exact=False).count():
            pytest.fail(f"{failure} shown instead of {text!r}; {log}:\n{tail}")
        if time.time() > deadline:
            page.screenshot(path=str(log.with_suffix(".timeout.png")))
            pytest.fail(f"{text!r} did not show within {timeout_s:.0f} s (no reload); {log}:\n{tail}")
        page.wait_for_timeout(500)


def plot_boxes(page, title_start: str) -> dict:
    """Screen boxes in the plotly figure whose title starts with `title_start`: each annotation's text, and the
    drawn points of each trace by trace name (the figure's own elements, found through plotly's data)."""
    return page.evaluate("""(start) => {
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
            e => e.layout && ((e.layout.title || {}).text || '').replace(/<[^>]*>/g, '').startsWith(start));
        if (!gd) return null;
        const box = el => { const r = el.getBoundingClientRect();
                            return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
        const notes = Array.from(gd.querySelectorAll('.annotation')).map(
            g => ({text: g.textContent, box: box(g.querySelector('.annotation-text-g text') || g)}));
        const points = {};
        gd.querySelectorAll('.scatterlayer .trace').forEach(g => {
            const name = g.__data__ && g.__data__[0].trace ? g.__data__[0].trace.name || '' : '';
            points[name] = Array.from(g.querySelectorAll('.points path')).map(box);
        });
        return {notes, points};
    }""", title_start)


def overlaps(a: dict, b: dict, pad: float = 0.0) -> bool:
    return not (a["right"] <= b["left"] + pad or b["right"] <= a["left"] + pad
                or a["bottom"] <= b["top"] + pad or b["bottom"] <= a["top"] + pad)


def click_box(page, box: dict) -> None:
    page.mouse.click((box["left"] + box["right"]) / 2, (box["top"] + box["bottom"]) / 2)


def grid_rows(grid) -> list[dict[str, str]]:
    """The rows of a data grid as the page shows them, column title -> cell text, read from the accessibility
    table the grid keeps beside its canvas (`edit_grid_cell`)."""
    return grid.evaluate("""(g) => {
        const titles = {};
        g.querySelectorAll('th[role=columnheader]').forEach(th => titles[th.getAttribute('aria-colindex')] =
                                                               th.innerText.trim());
        return Array.from(g.querySelectorAll('tr[aria-rowindex]')).filter(tr => tr.querySelector('td')).map(tr => {
            const row = {};
            tr.querySelectorAll('td').forEach(
                td => row[titles[td.getAttribute('aria-colindex')]] = td.innerText.trim());
            return row;
        });
    }""")


def grid_with_column(page, column: str):
    """The first data grid on the page with a column titled `column` (waits until one is drawn)."""
    grid = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator("th[role=columnheader]").filter(has_text=re.compile(f"^{re.escape(column)}$"))).first
    grid.wait_for(timeout=60_000)
    return grid


def wait_for_plot(page, title_start: str, timeout: float = 60_000) -> None:
    """Until a plotly figure whose title starts with `title_start` is drawn with data (scrolled to it first: a
    chart below the window may be drawn only when seen)."""
    page.wait_for_function("""(start) => {
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(e => e.layout && e.data &&
            e.data.length && (((e.layout.title || {}).text || '')).replace(/<[^>]*>/g, '').startsWith(start));
        if (gd) gd.scrollIntoView({block: 'center'});
        return !!gd;
    }""", arg=title_start, timeout=timeout)


def plot_traces(page, title_start: str) -> dict | None:
    """The plotly figure whose title starts with `title_start`, as drawn: its title, legend title and shown, and
    each trace's name, colour, x and y as plotly drew them (None when no such figure is on the page)."""
    return page.evaluate("""(start) => {
        const title = e => ((e.layout || {}).title || {}).text || '';
        const gd = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
            e => e.layout && title(e).replace(/<[^>]*>/g, '').startsWith(start));
        if (!gd) return null;
        const full = gd._fullLayout || {};
        return {title: title(gd), legend: full.showlegend, legend_title: ((full.legend || {}).title || {}).text || '',
                traces: (gd._fullData || gd.data).map(t => ({name: t.name || '', type: t.type,
                    colour: (t.line || {}).color || (t.marker || {}).color,
                    x: Array.from(t.x || []), y: Array.from(t.y || [])}))};  // _fullData: the arrays decoded
    }""", title_start)


def pick_option(page, combobox: str, option, attempts: int = 4) -> str:
    """Open the selectbox labelled `combobox` and click `option` (a name, or the n-th option when an int); a click
    that lands during a rerun leaves the list closed, so it is tried again. Returns the picked option's text."""
    for attempt in range(attempts):
        wait_idle(page)
        page.get_by_role("combobox", name=combobox, exact=True).click()
        choice = page.get_by_role("option").nth(option) if isinstance(option, int) else \
            page.get_by_role("option", name=option, exact=True)
        try:
            text = choice.inner_text(timeout=10_000)
            choice.click(timeout=10_000)
            wait_idle(page)
            return text.strip()
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            page.keyboard.press("Escape")
    raise AssertionError("unreachable")


def offered_options(page, combobox: str, attempts: int = 4) -> list[str]:
    """The options the selectbox (or multiselect) labelled `combobox` offers: opened, read, closed (a click that
    lands during a rerun leaves the list closed, so it is tried again)."""
    for attempt in range(attempts):
        wait_idle(page)
        page.get_by_role("combobox", name=combobox, exact=True).click()
        try:
            page.get_by_role("option").first.wait_for(timeout=10_000)
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            continue
        texts = [t.strip() for t in page.get_by_role("option").all_inner_texts()]
        page.keyboard.press("Escape")
        return texts
    raise AssertionError("unreachable")


def metric_value(page, label: str) -> str:
    """The value a metric card labelled `label` shows."""
    card = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').filter(has_text=re.compile(f"^{re.escape(label)}$"))).first
    return card.locator('[data-testid="stMetricValue"]').inner_text(timeout=30_000).strip()
