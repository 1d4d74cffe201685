"""The ExitTrain page's tables: the runs table and a run's training curves. (Run folders are read through
`tevcore.studio.training`, compared by `tevcore.studio.drafter_compare`: their tests mirror the package.)"""

from __future__ import annotations

import json

import trainruns
from tevcore.room.limits import SINGLE_USER
from tevcore.studio.training import list_runs


def test_the_runs_table_shows_a_stopped_run_as_resumable_and_a_torn_metrics_line_is_skipped(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": "x"}))
    (run / "status.json").write_text(json.dumps({"state": "interrupted", "pid": 2**22 + 4321, "step": 30,
                                                 "total_steps": 100, "updated": 30.0}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2}\n{"step": 2, "lo')
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "status.json").write_text("{oops")
    table = trainruns.runs_table(list_runs(tmp_path))
    assert dict(zip(table["run"], table["state"])) == {"r": "stopped (resumable)", "bad": "unreadable"}
    assert len(trainruns.metrics_frame(run, SINGLE_USER)) == 1
    assert trainruns.metrics_frame(tmp_path / "bad", SINGLE_USER).empty
