"""Trace files as the explorer saves them: a new file each time, never over one that is there, and read back whole."""

from __future__ import annotations

import time

import pytest
import torch

from tevcore.engine.builders import chain
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, read_trace
from tevcore.studio.traces import save_trace, trace_bytes


def _records() -> list[RoundRecord]:
    logits = torch.randn(3, 6, generator=torch.Generator().manual_seed(0))
    tree = chain(0, torch.log_softmax(logits, -1), 2)
    flow = target_flow(tree, logits, 1.0)
    missing = [["x"] * flow.missing_tokens.shape[1] for _ in range(tree.num_nodes)]
    return [RoundRecord(0, "rollout", "chain", 2, 1.0, 2, tree, flow, ["", "a", "b"], missing)]


def test_saving_twice_in_one_second_keeps_both_files_and_writes_over_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda fmt: "20261206-210000")  # both saves in the same second
    folder = tmp_path / "new" / "folder"
    first = save_trace(folder, _records(), {"prompt": "first"})
    second = save_trace(folder, _records(), {"prompt": "second"})
    assert first != second and sorted(p.name for p in folder.iterdir()) == sorted([first.name, second.name])
    assert read_trace(first).meta["prompt"] == "first" and read_trace(second).meta["prompt"] == "second"
    assert len(read_trace(second).rounds) == 1


def test_a_folder_that_cannot_be_written_is_an_os_error(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(OSError):
        save_trace(blocked, _records())


def test_a_download_is_the_same_trace_as_a_saved_file(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(trace_bytes(_records(), {"prompt": "p"}))
    assert read_trace(path).meta["prompt"] == "p" and len(read_trace(path).rounds) == 1
