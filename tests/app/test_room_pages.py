"""The pages in the room profile (AppTest, no model): no server path is typed anywhere, the host's models only,
caps refused in one line naming them, training locked behind the host secret. These fail on a server without
the room profile, which had a text box for every path and no lock."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import appdata
from explorer_kit import put_explorer
from tevcore.room.jobs import HOST, Job, JobBoard
from tevcore.room.training import REGISTRY
from tevcore.studio.training import committed_ablations
from tevcore.train import rundir

APP = Path(__file__).resolve().parents[2] / "app"
PAGES = APP / "pages"
PATH_BOXES = {"ex_target", "ex_open_folder", "ex_save_folder", "vc_bench_folder", "et_root", "et_init_other",
              "et_cmp_extra", "et_ablation_path"}


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


SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def sleeping_run(board: JobBoard, run: Path, step: int, steps: int) -> Job:
    """A training job of `board` on `run` as the page reads one: a process that sleeps, and a running status."""
    job = board.start(HOST, "train", run, SLEEP, run / "train.log", unlocked=False, is_host=True)
    (run / "config.json").write_text(json.dumps({"data": "x", "steps": steps}))
    (run / "status.json").write_text(json.dumps({"state": "running", "pid": job.pid, "step": step,
                                                 "total_steps": steps, "updated": 1.0}))
    return job


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
    at.text_input(key="room_secret").set_value("open-sesame").run()  # too soon after a wrong guess: unchecked
    assert any("too many wrong guesses of the host secret: try again in 1 s" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "et_start"]
    time.sleep(1.1)  # the wait after one wrong guess
    at.run()
    assert not at.exception
    assert [b for b in at.button if b.key == "et_start"] and typed_boxes(at) == set()
    assert "other" not in at.selectbox(key="et_init").options  # no drafter folder typed beside it
    # the Ablation tab opens the committed results or one in the host's runs folder, never a typed path
    assert at.selectbox(key="et_ablation_path").options == [str(p) for p in committed_ablations()]
    assert str(APP.parent / "assets" / "exit_ablation.json") in at.selectbox(key="et_ablation_path").options


def test_the_single_user_profile_keeps_its_path_boxes(monkeypatch):
    monkeypatch.delenv("TEV_ROOM", raising=False)
    st.cache_resource.clear()
    at = page("3_ExitTrain.py").run()
    assert not at.exception and "et_root" in typed_boxes(at)
    st.cache_resource.clear()


def test_a_stop_click_is_not_lost_when_a_new_checkpoint_redraws_the_page(monkeypatch, tmp_path):
    """A fast run writes a checkpoint every few seconds, and the Runs fragment then reruns the whole app to offer it.
    A Stop clicked in that window was read after the rerun had reset the click: the run went on to its end. The
    click must stop it, and say so once."""
    monkeypatch.delenv("TEV_ROOM", raising=False)
    st.cache_resource.clear()
    board = JobBoard(tmp_path / REGISTRY, 4, None)
    run = tmp_path / "fast-run"
    train = sleeping_run(board, run, step=7, steps=40)
    try:
        at = page("3_ExitTrain.py").run()
        at.text_input(key="et_root").set_value(str(tmp_path)).run()
        assert not at.exception and at.button(key="et_stop")
        checkpoint = run / "checkpoint-12"  # written between the page's last draw and the click
        checkpoint.mkdir()
        (checkpoint / "config.json").write_text("{}")
        (checkpoint / rundir.TRAINER_STATE).write_bytes(b"")
        (run / rundir.LATEST).write_text(json.dumps({"checkpoint": checkpoint.name, "step": 12}))
        at.button(key="et_stop").click().run()
        assert not at.exception
        assert train.process.wait(timeout=20) is not None, "the Stop click was lost: the run still runs"
        said = [i.value for i in at.info if "sent a stop signal" in i.value]
        assert said == [f"sent a stop signal to process {train.pid}; the run can be resumed from its newest "
                        "checkpoint"], said
        at.run()
        assert not [i.value for i in at.info if "sent a stop signal" in i.value]  # said once
    finally:
        board.end_all(wait_s=5)
        st.cache_resource.clear()


def test_on_ones_own_machine_a_job_of_an_earlier_server_is_found_again_and_can_be_stopped(monkeypatch, tmp_path):
    """The single-user profile: a data build and a training run an earlier server started (recorded by its job
    board in the runs folder) still run; the page says they were found again and offers their Stop, which works."""
    monkeypatch.delenv("TEV_ROOM", raising=False)
    st.cache_resource.clear()
    earlier = JobBoard(tmp_path / REGISTRY, 4, None)  # the server before the restart
    build = earlier.start(HOST, "data", tmp_path / "data-small", SLEEP, tmp_path / "data-small" / "build-data.log",
                          unlocked=False, is_host=True)
    train = sleeping_run(earlier, tmp_path / "run-a", step=3, steps=10)
    try:
        at = page("3_ExitTrain.py").run()
        at.text_input(key="et_root").set_value(str(tmp_path)).run()
        assert not at.exception
        notes = [c.value for c in at.caption if "found again" in c.value]
        assert notes == [f"process {build.pid} was started from this app before a server restart and found again",
                         f"process {train.pid} was started from this app before a server restart and found again"]
        at.button(key="et_dstop").click().run()
        assert any(f"sent a stop signal to the build of data-small (process {build.pid})" in i.value for i in at.info)
        assert build.process.wait(timeout=20) is not None
        at.button(key="et_stop").click().run()
        assert any(f"sent a stop signal to process {train.pid}" in i.value for i in at.info)
        assert train.process.wait(timeout=20) is not None
    finally:
        earlier.end_all(wait_s=5)
        st.cache_resource.clear()


def test_a_closed_tab_stops_the_studios_work_through_the_pages_check(monkeypatch):
    """The check a page hands the studio raises `Left` once Streamlit no longer counts the page's session as
    active (its browser tab closed), so the service stops and frees its queue slot; while open it passes."""
    import room_ui
    from streamlit import runtime
    from streamlit.runtime import scriptrunner

    from tevcore.studio.turns import Left

    active = {"tab-1"}

    class Server:
        @staticmethod
        def is_active_session(session_id: str) -> bool:
            return session_id in active

    class Context:
        session_id = "tab-1"

    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: Server())
    monkeypatch.setattr(scriptrunner, "get_script_run_ctx", lambda: Context())
    still_here = room_ui._page_check()
    still_here()  # the tab is open
    active.clear()  # the participant closes it
    with pytest.raises(Left, match="the page that asked was closed"):
        still_here()


def test_a_reload_finds_the_traces_saved_before_and_another_browser_does_not(room, monkeypatch):
    """A reload of the page is a new session: it gets the space of its browser (the same browser key) back, with
    the trace saved before; a session of another browser gets a space of its own. On a10088a a reload got a new,
    empty space."""
    from tevcore.studio import participants

    browser = {"key": "browser-ann"}
    monkeypatch.setattr(participants, "browser_key", lambda cookie: browser["key"])
    first = page("1_Tree_explorer.py").run()
    assert not first.exception and any("kept across reloads" in c.value for c in first.caption)
    saved = first.session_state["room_space"].folder / "trace-1.jsonl.gz"
    saved.write_bytes(b"saved before the reload")
    reloaded = page("1_Tree_explorer.py").run()  # the same browser, a new session
    assert reloaded.session_state["room_space"].folder == saved.parent
    assert "trace-1.jsonl.gz" in reloaded.selectbox(key="ex_open_pick").options
    browser["key"] = "browser-bob"
    other = page("1_Tree_explorer.py").run()
    assert other.session_state["room_space"].folder != saved.parent
    assert not [box for box in other.selectbox if box.key == "ex_open_pick"]
