"""The room load test's report is the one result record every measuring command writes (the app reads it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tevcore.results import read_result

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import room_load  # noqa: E402


def _report() -> dict:
    return {"mode": "lessons", "sessions": 2, "completed": 2, "checks_right": 2, "p50_s": 1.5, "p95_s": 2.0,
            "server_rss_peak_mb": 500.0, "server_alive_at_end": True, "server_log_tracebacks": 0, "errors": [],
            "session_rows": [{"index": 0, "lesson": "coupling", "seconds": 1.5, "path": Path("x")},
                             {"index": 1, "lesson": "largest-x", "seconds": 2.0, "path": Path("y")}]}


def test_the_report_is_written_as_a_result_record_and_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(room_load, "CHROMIUM", tmp_path)  # exists: the run itself is replaced below
    monkeypatch.setattr(room_load, "lessons_load_test", lambda *args, **kwargs: _report())
    out = tmp_path / "load.json"
    assert room_load.main(["--mode", "lessons", "--sessions", "2", "--out", str(out)]) == 0
    record = read_result(out)
    assert record.command == "room-load" and record.settings["sessions"] == 2 and record.summary["checks_right"] == 2
    assert [row["lesson"] for row in record.rows] == ["coupling", "largest-x"] and record.rows[0]["path"] == "x"
    assert "room_load.py --mode lessons --sessions 2" in record.meta.command_line


def test_an_existing_report_is_not_replaced_without_force(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(room_load, "CHROMIUM", tmp_path)
    monkeypatch.setattr(room_load, "lessons_load_test", lambda *args, **kwargs: pytest.fail("ran before refusing"))
    out = tmp_path / "load.json"
    out.write_text("mine")
    assert room_load.main(["--mode", "lessons", "--sessions", "2", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err and out.read_text() == "mine"
