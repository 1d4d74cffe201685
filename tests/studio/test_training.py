"""The ExitTrain page's door to run folders: drafters with identical weights, and Compare's starting pair. (Run
folders are read by `tevcore.train.runs`, runs started and stopped by `tevcore.room.training`: their tests mirror the
package.)"""

from __future__ import annotations

import json
from pathlib import Path

from tevcore.studio import training


def _drafter(folder: Path, payload: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(payload)
    return folder


def test_identical_weight_files_are_found_and_compare_starts_with_two_drafters(tmp_path):
    a = _drafter(tmp_path / "run" / "checkpoint-20", b"weights A")
    (a / "trainer.pt").write_bytes(b"x")
    (tmp_path / "run" / "latest.json").write_text(json.dumps({"checkpoint": "checkpoint-20", "step": 20}))
    b = _drafter(tmp_path / "run" / "drafter", b"weights A")
    c = _drafter(tmp_path / "other", b"weights C")
    assert training.identical_weights([str(a), str(b), str(c)]) == [(str(a), str(b))]
    assert training.identical_weights([str(a), str(c)]) == []
    (tmp_path / "run" / "config.json").write_text("{}")
    pair = training.default_comparison(training.list_runs(tmp_path))
    assert pair == [str(b), str(training.DEFAULT_DRAFTER)]  # the newest checkpoint against the committed drafter
    assert training.identical_weights(pair) == []
    assert training.missing([str(b), str(tmp_path / "gone")]) == [str(tmp_path / "gone")]
