"""What the browser tests do on a page: wait for streamlit, set a number, open a page, click a tree node."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


def set_number(page, label: str, value: float) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


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
