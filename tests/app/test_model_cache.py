"""The app's model cache: one entry per model however its path is spelt, and a bounded number of entries."""

from __future__ import annotations

import shared_ui
from tevcore.target import loading


def test_spellings_of_one_folder_load_once_and_old_models_are_dropped(tmp_path, monkeypatch):
    loads: list[str] = []
    monkeypatch.setattr(loading, "load_target", lambda spec, device=None: loads.append(spec) or spec)
    monkeypatch.chdir(tmp_path)
    folders = [tmp_path / f"model{i}" for i in range(shared_ui.MODELS_KEPT + 1)]
    for folder in folders:
        folder.mkdir()
    shared_ui._load_target.clear()
    for spelling in ("model0", "model0/", "./model0", str(folders[0])):
        assert shared_ui.get_target(spelling) == str(folders[0])
    assert loads == [str(folders[0])]
    assert shared_ui.model_spec_key("default") == "default"  # names that are no path stay as typed
    for folder in folders[1:]:
        shared_ui.get_target(str(folder))
    shared_ui.get_target("model0")  # pushed out by MODELS_KEPT newer models: loaded again
    assert loads == [str(f) for f in folders] + [str(folders[0])]
    shared_ui._load_target.clear()
