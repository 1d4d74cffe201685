"""The pages in the room profile (AppTest, no model): no server path is typed anywhere, the host's models only,
caps refused in one line naming them, training locked behind the host secret. These fail on a server without
the room profile, which had a text box for every path and no lock."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import appdata
from explorer_kit import put_explorer

APP = Path(__file__).resolve().parents[2] / "app"
PAGES = APP / "pages"
PATH_BOXES = {"ex_target", "ex_open_folder", "ex_save_folder", "vc_bench_folder", "et_root", "et_init_other",
              "et_cmp_extra"}


@pytest.fixture
def room(monkeypatch, tmp_path):
    config = tmp_path / "room.toml"
    config.write_text(f'targets = ["default"]\ndrafters = ["rollout"]\nruns = "{tmp_path / "runs"}"\n'
                      f'space_root = "{tmp_path / "spaces"}"\n')
    monkeypatch.setenv("TEV_ROOM", "1")
    monkeypatch.setenv("TEV_ROOM_CONFIG", str(config))
    monkeypatch.setenv("TEV_ROOM_SECRET", "open-sesame")
    st.cache_resource.clear()  # the room's services are made once per server: this test's server
    yield tmp_path
    st.cache_resource.clear()


def page(name: str) -> AppTest:
    return AppTest.from_file(str(PAGES / name), default_timeout=120)


def typed_boxes(at: AppTest) -> set[str]:
    return {box.key for box in at.text_input} & PATH_BOXES


def test_the_explorer_offers_the_hosts_models_and_no_path_box(room):
    at = page("1_Tree_explorer.py")
    put_explorer(at, records=appdata.synthetic_records(rounds=2, budget=8), done=True)
    at.run()
    assert not at.exception
    assert typed_boxes(at) == set()
    assert at.selectbox(key="ex_target").options == ["default"]
    assert at.selectbox(key="ex_proposer").options == ["rollout"]


def test_the_largest_budget_and_token_count_are_refused_naming_the_rooms_cap(room):
    at = page("1_Tree_explorer.py").run()
    at.number_input(key="ex_budget").set_value(10**6)
    at.number_input(key="ex_max_new").set_value(10**6).run()
    errors = " ".join(e.value for e in at.error)
    assert "budget (tree nodes) must lie in [0, 64]" in errors and "max new tokens must lie in [1, 128]" in errors
    assert at.button(key="ex_run").disabled


def test_the_largest_number_of_draws_is_refused_naming_the_cap(room):
    at = page("2_Verifier_comparison.py").run()
    at.number_input(key="vc_n").set_value(2_000_000).run()
    assert not at.exception
    assert any(e.value == "Refused: draws per verifier 2000000 is over this server's cap of 200000 (draws)"
               for e in at.error)
    assert typed_boxes(at) == set()


def test_training_is_locked_until_the_host_secret_and_then_no_path_is_typed(room):
    at = page("3_ExitTrain.py").run()
    assert not at.exception
    assert not [b for b in at.button if b.key in ("et_start", "et_dbuild")] and typed_boxes(at) == set()
    at.text_input(key="room_secret").set_value("guess").run()
    assert any("not the host secret" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "et_start"]
    at.text_input(key="room_secret").set_value("open-sesame").run()
    assert not at.exception
    assert [b for b in at.button if b.key == "et_start"] and typed_boxes(at) == set()
    assert "other" not in at.selectbox(key="et_init").options  # no drafter folder typed beside it


def test_the_single_user_profile_keeps_its_path_boxes(monkeypatch):
    monkeypatch.delenv("TEV_ROOM", raising=False)
    st.cache_resource.clear()
    at = page("3_ExitTrain.py").run()
    assert not at.exception and "et_root" in typed_boxes(at)
    st.cache_resource.clear()
