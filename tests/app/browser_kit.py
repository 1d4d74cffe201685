"""What the browser tests do on a page: wait for streamlit, set a number, open a page, click a tree node."""

from __future__ import annotations

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


def wait_idle(page, timeout: float = 60_000) -> None:
    """Until the script run the last action started is over (streamlit's running indicator is gone)."""
    page.wait_for_timeout(300)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def set_number(page, label: str, value: float) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page)


def edit_grid_cell(page, grid, moves: tuple[str, ...], text: str, shown: str, attempts: int = 3) -> None:
    """Type `text` into the data-editor cell `moves` away from row 0's first column, until `shown` appears.

    The grid is a canvas: the cell is reached by keyboard, and its editor (an input that takes the focus)
    opens on Enter; on a busy machine a step can land before the grid is ready, so the edit is retried.
    """
    message = page.get_by_text(shown, exact=False)
    for _ in range(attempts):
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        page.mouse.click(box["x"] + 100, box["y"] + 35 + 17)  # row 0, right of the row markers, below the header
        for key in moves:
            page.keyboard.press(key)
        page.keyboard.press("Enter")  # open the cell's editor
        try:
            page.wait_for_function("['INPUT', 'TEXTAREA'].includes(document.activeElement.tagName)", timeout=5_000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            continue
        page.keyboard.press("Control+A")
        page.keyboard.type(text)
        page.keyboard.press("Enter")
        try:
            message.wait_for(timeout=20_000)
            return
        except PlaywrightTimeout:
            continue
    pytest.fail(f"typing {text!r} into the table never showed {shown!r} ({attempts} attempts)")


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
