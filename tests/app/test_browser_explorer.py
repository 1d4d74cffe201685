"""Issue 50 on the tree explorer, in a real browser: the round on screen survives a page switch and a reload, and a
saved trace is listed under "Open a trace" on the run its Save made.

One app server for the module and a fresh browser (its own cookies: its own participant) per test. On a10088a
both fail: the round slider went back to round 0 on coming back (streamlit forgets a widget's value when its page
is left), and the list of saved traces was drawn before the Save button wrote the file, so it stayed empty until
some other click. `TEV_APP_ROOT=<checkout>` serves another checkout's app (`browser_kit.app_root`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import browser_kit as kit
from test_browser import app_url  # noqa: F401  (module fixtures)
from test_browser_truth import browser, page  # noqa: F401  (a Chromium per module, a fresh browser per test)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def open_explorer(page) -> None:
    kit.open_page(page, "Tree explorer")
    page.get_by_text("Press Run live to stream a generation", exact=False).or_(
        page.get_by_text("tree nodes", exact=True)).first.wait_for(timeout=120_000)
    kit.wait_idle(page)


def shown_round(page) -> int | None:
    """The round the explorer shows, as its slider says (None: it shows no rounds)."""
    kit.wait_idle(page)
    if page.get_by_text("tree nodes", exact=True).count() == 0:
        return None
    return int(kit.round_slider(page).input_value())


def test_the_round_on_screen_survives_a_page_switch_and_a_reload(page):
    open_explorer(page)
    kit.set_number(page, "budget (tree nodes)", 4)  # small trees: short blocks, so several rounds in few tokens
    kit.set_number(page, "max new tokens", 16)
    page.get_by_role("button", name="▶ Run live").click()
    page.get_by_text("Across rounds").wait_for(timeout=300_000)
    kit.wait_idle(page)
    rounds = int(kit.round_slider(page).get_attribute("max")) + 1
    assert rounds >= 3, f"the generation made {rounds} rounds; this test needs three"
    kit.move_round_slider(page, "ArrowLeft", 1)
    chosen = rounds - 2  # neither the first round nor the latest
    assert shown_round(page) == chosen

    kit.open_page(page, "Exit law workshop")
    page.get_by_text("The law in plain words", exact=False).wait_for(timeout=60_000)
    kit.wait_idle(page)
    open_explorer(page)
    after_switch = shown_round(page)
    page.reload(wait_until="domcontentloaded")  # a new streamlit session of the same browser
    open_explorer(page)
    after_reload = shown_round(page)
    kit.no_exception(page)
    assert (after_switch, after_reload) == (chosen, chosen), (
        f"round {chosen} of {rounds} was on screen; after a page switch round {after_switch}, after a reload round "
        f"{after_reload}")


def test_the_first_saved_trace_is_listed_under_open_a_trace_at_once(page, tmp_path):
    folder = tmp_path / "saved"
    open_explorer(page)
    kit.set_number(page, "max new tokens", 4)
    page.get_by_role("button", name="⏭ Step one round").click()
    page.get_by_text("tree nodes", exact=True).wait_for(timeout=300_000)
    kit.wait_idle(page)
    page.get_by_text("Open a trace (replay without a model)").click()
    kit.set_text(page, "or open a saved trace from a folder", str(folder))
    kit.set_text(page, "save to folder", str(folder))
    assert page.get_by_role("combobox", name="saved traces", exact=True).count() == 0  # nothing saved yet

    page.get_by_role("button", name="💾 Save trace").click()
    page.get_by_text(f"saved {folder}", exact=False).wait_for(timeout=60_000)
    kit.wait_idle(page)
    saved = [path.name for path in Path(folder).glob("*.jsonl*")]
    assert len(saved) == 1, saved
    listed = page.get_by_role("combobox", name="saved traces", exact=True)
    assert listed.count() == 1, "the saved trace is not listed under Open a trace after the first save"
    assert listed.input_value() == saved[0]
    kit.no_exception(page)
