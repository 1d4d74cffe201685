"""The ExitTrain page in a real browser keeps its form across a page switch and a reload (issue 50).

Streamlit forgets a page's widgets once another page is shown, and a reload starts a new session: the New run form
went back to the recipe's numbers, and the Compare tab to its own settings. Skips without Chromium, as
test_browser.py does. Run against another checkout with TEV_APP_ROOT (browser_kit.app_root).
"""

from __future__ import annotations

import json

import pytest

import browser_kit as kit
from test_browser import app_url  # noqa: F401  (module fixtures)
from test_browser_truth import browser, finished_run, page  # noqa: F401  (a Chromium per module, a fresh browser per test)
from tevcore.train.data import MANIFEST, shard_path
from tevcore.train.runs import DATA_LOG

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NUMBERS = {"steps": 321, "batch size (anchors)": 16, "tree budget": 12,
           "λ (tree loss weight; 0 = plain distillation)": 0.25}


def runs_folder_box(page):
    box = page.get_by_label("runs folder", exact=True)
    box.wait_for(timeout=180_000)  # the page's first import of torch and the engine is slow
    kit.wait_idle(page)
    return box


def shown_form(page) -> dict[str, object]:
    """The runs folder, the form's numbers and the Compare tab's budgets as the page shows them now."""
    shown: dict[str, object] = {"runs folder": runs_folder_box(page).input_value()}
    shown.update({label: float(page.get_by_label(label, exact=True).input_value()) for label in NUMBERS})
    page.get_by_role("tab", name="Compare checkpoints").click()
    shown["budgets"] = page.get_by_label("budgets", exact=True).input_value()
    page.get_by_role("tab", name="New run").click()
    return shown


def open_exittrain_at(page, root):
    """The ExitTrain page on a new, empty runs folder `root`."""
    root.mkdir()
    kit.open_page(page, "ExitTrain")
    box = runs_folder_box(page)
    box.fill(str(root))
    box.press("Enter")
    kit.wait_idle(page)
    return root


def test_the_exittrain_form_is_kept_across_a_page_switch_and_a_reload(page, tmp_path):
    root = open_exittrain_at(page, tmp_path / "runs")
    for label, value in NUMBERS.items():
        kit.set_number(page, label, value)
    page.get_by_role("tab", name="Compare checkpoints").click()
    budgets = page.get_by_label("budgets", exact=True)
    budgets.fill("4,chain")
    budgets.press("Enter")
    kit.wait_idle(page)
    page.get_by_role("tab", name="New run").click()
    wanted = {"runs folder": str(root), **{label: float(value) for label, value in NUMBERS.items()},
              "budgets": "4,chain"}
    assert shown_form(page) == wanted  # set, before leaving

    kit.open_page(page, "Exit law workshop")  # streamlit forgets the ExitTrain widgets here
    page.get_by_text("seed of the draws", exact=False).first.wait_for(timeout=60_000)
    kit.wait_idle(page)
    kit.open_page(page, "ExitTrain")
    after_switch = shown_form(page)

    page.reload(wait_until="domcontentloaded")  # a new session of the same browser
    after_reload = shown_form(page)
    kit.no_exception(page)
    assert after_switch == wanted, f"after a page switch: {after_switch}"
    assert after_reload == wanted, f"after a reload: {after_reload}"


def test_a_data_set_that_becomes_ready_is_chosen_as_the_distillation_set(page, tmp_path):
    """The build's progress (a fragment) reruns the page once the set is ready: the set box must show it chosen,
    not the "none found" line it showed before (the form keeps its choice in the page's state object)."""
    root = open_exittrain_at(page, tmp_path / "runs")
    chosen = page.get_by_role("combobox", name="distillation set", exact=True)
    assert "none found" in chosen.input_value()
    folder = root / "data-small"  # what a build the page did not start leaves: its log, its plan, its one shard
    folder.mkdir()
    (folder / DATA_LOG).write_text("done\n")
    (folder / MANIFEST).write_text(json.dumps({"shards": 1, "target_name": "tiny",
                                               "config": {"hidden_layers": [8, 16, 24, 30]}}))
    shard_path(folder, 0).write_bytes(b"x")
    page.get_by_text("data-small is ready (1 shards)", exact=False).wait_for(timeout=60_000)
    kit.wait_idle(page)
    kit.no_exception(page)
    assert chosen.input_value() == str(folder)


def test_a_drafter_made_active_after_the_explorer_was_visited_is_the_one_the_explorer_selects(page, tmp_path):
    """Issue 50: after a visit to the explorer, its kept sidebar value came back over ExitTrain's "Make this the
    explorer's drafter", and the next round ran the old drafter while ExitTrain said otherwise."""
    checkpoint = finished_run(tmp_path / "runs", "trained", 30)
    kit.open_page(page, "Tree explorer")  # visited first: its sidebar keeps the drafter it shows
    page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=180_000)
    kit.wait_idle(page)
    before = page.get_by_role("combobox", name="drafter", exact=True).input_value()
    kit.open_page(page, "ExitTrain")
    box = runs_folder_box(page)
    box.fill(str(tmp_path / "runs"))
    box.press("Enter")
    kit.wait_idle(page)
    page.get_by_role("tab", name="Runs").click()
    page.get_by_role("button", name="Make this the explorer's drafter").click()
    page.get_by_text(f"The tree explorer will now offer {checkpoint}", exact=False).wait_for(timeout=60_000)
    kit.open_page(page, "Tree explorer")
    page.get_by_text("Press Run live to stream a generation", exact=False).wait_for(timeout=60_000)
    kit.wait_idle(page)
    chosen = page.get_by_role("combobox", name="drafter", exact=True).input_value()
    kit.no_exception(page)
    assert chosen == str(checkpoint) != before, f"the explorer selects {chosen} (before: {before})"
