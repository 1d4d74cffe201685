"""The room's load test, small: four Chromium sessions at once on a room server with one compute slot.

Each session's text must equal its solo run with the same seed, every session must finish without an error box
or a traceback in the server log, and the waiting sessions must be shown their place in the queue. The full
figures (N = 5, 10, 20) come from `python scripts/room_load.py --sessions N`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
if not Path("/usr/bin/chromium").exists():
    pytest.skip("no system Chromium at /usr/bin/chromium", allow_module_level=True)
sys.path.insert(0, str(REPO / "scripts"))
import room_load  # noqa: E402


def test_four_sessions_at_once_each_get_their_solo_text_and_see_the_queue(tmp_path):
    report = room_load.load_test(4, budget=8, tokens=8, slots=1, timeout_s=900, folder=tmp_path)
    assert report["errors"] == [] and report["server_log_tracebacks"] == 0 and report["server_alive_at_end"], report
    assert report["completed"] == 4 and report["text_equal_to_solo"] == 4 and report["pages_ok"] == 4, report
    assert report["sessions_shown_a_queue_place"] >= 1  # one slot, four requests: someone waited, and was told
    assert report["server_rss_peak_mb"] < 4096


def test_lessons_mode_three_participants_at_once_each_see_their_right_answer_checked(tmp_path):
    report = room_load.lessons_load_test(3, slots=1, timeout_s=600, folder=tmp_path)
    assert report["errors"] == [] and report["server_log_tracebacks"] == 0 and report["server_alive_at_end"], report
    assert report["completed"] == 3 and report["checks_right"] == 3, report
    assert len(report["lessons_done"]) == 3  # three different lessons, one heavy (its truth in a queue turn)
    assert report["server_rss_peak_mb"] < 4096


def test_heaviest_mode_two_participants_each_draw_the_largest_sampled_trees_the_servers_caps_allow(tmp_path):
    """The mode the N = 20 figure of the heaviest action comes from, small: the script writes caps of 10 trees of 8
    nodes into its server's room.toml and both sessions draw exactly that, one compute slot between them."""
    assert room_load.heaviest_caps(10, 8) == "[caps]\nsampled_rounds = 10\nsampled_budget = 8\n"
    report = room_load.heaviest_load_test(2, rounds=10, tree_budget=8, slots=1, timeout_s=600, folder=tmp_path)
    assert report["errors"] == [] and report["server_log_tracebacks"] == 0 and report["server_alive_at_end"], report
    assert report["completed"] == 2 and report["refused"] == 0, report
    assert "sampled_rounds = 10" in (tmp_path / "room.toml").read_text()
    assert 0 < report["server_rss_started_mb"] < report["server_rss_peak_mb"] < 4096
