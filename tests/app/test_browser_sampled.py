"""Sampled trees in a real browser: the workshop's coupling preset edited in its grid and kept across a preset
switch, and the verifier comparison's sampled rounds (the server, browser and screenshot folder of
test_browser.py)."""

from __future__ import annotations

import pytest

import browser_kit as kit
from test_browser import app_url, browser_page, shots  # noqa: F401  (module fixtures shared with test_browser)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

COUPLING_PRESET = "coupling: a sampled draw against a fixed guess"
SAMPLED_SOURCE = "sampled trees (toy target, fresh draws at one context)"


def _pick_preset(page, preset: str) -> None:
    page.get_by_role("combobox", name="preset", exact=True).click(timeout=10_000)
    page.get_by_role("option", name=preset, exact=True).click()
    kit.wait_idle(page)


def test_coupling_preset_edit_survives_a_switch_and_sampled_rounds_draw(app_url, browser_page, shots):  # noqa: F811
    page = browser_page
    page.goto(app_url)
    kit.open_page(page, "Exit law workshop")
    page.get_by_text("The law in plain words", exact=False).wait_for(timeout=60_000)
    kit.wait_for_plots(page, 6)
    page.wait_for_timeout(1000)  # a rerun that starts late (a busy machine) is over before the click
    kit.wait_idle(page)
    _pick_preset(page, COUPLING_PRESET)
    page.get_by_text("sampled node + rrs: 1 − TV(p, q)", exact=False).wait_for(timeout=30_000)
    assert page.get_by_text("1.0000", exact=True).count() >= 1  # p = q uniform over 10 tokens
    assert page.get_by_text("0.1000", exact=True).count() >= 1
    # p(' cat') 0.1 -> 0.05: the fixed guess is accepted with 0.05, the coupled draw with 0.05 + 9 x 0.1
    grid = page.locator('[data-testid="stDataFrame"]').first
    kit.edit_grid_cell(page, grid, "p", 0, "0.05", "0.9500")
    kit.wait_idle(page)
    assert page.get_by_text("0.0500", exact=True).count() >= 1
    for preset in ("chain", COUPLING_PRESET):
        _pick_preset(page, preset)
    page.get_by_text("0.9500", exact=True).wait_for(timeout=30_000)
    page.get_by_role("button", name="▶ Draw the rounds").click()
    page.get_by_text("accepted in", exact=False).first.wait_for(timeout=120_000)
    kit.wait_for_plots(page, 2)
    kit.no_exception(page)
    # both charts hold token or design labels: category axes, as plotly drew them
    assert page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot')).map(e => e.layout.xaxis.type)") \
        == ["category", "category"]
    page.locator(".js-plotly-plot").nth(1).scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "workshop-coupling.png"))

    kit.open_page(page, "Verifier comparison")
    page.get_by_text(SAMPLED_SOURCE, exact=True).wait_for(timeout=60_000)
    page.get_by_text(SAMPLED_SOURCE, exact=True).click()
    kit.wait_idle(page)
    kit.set_number(page, "rounds (fresh trees)", 60)
    kit.set_number(page, "draws per verifier", 10_000)
    page.get_by_role("button", name="▶ Run every verifier").click()
    page.get_by_text("This realised tree: TEV's exit law against rrs's outcomes", exact=False).wait_for(
        timeout=240_000)
    kit.wait_idle(page)
    page.get_by_role("button", name="▶ Verify every round").click()
    page.get_by_text("across rounds: each rule's E[L]", exact=False).first.wait_for(timeout=240_000)
    kit.wait_idle(page)
    kit.no_exception(page)
    page.screenshot(path=str(shots / "verifiers-sampled.png"))
