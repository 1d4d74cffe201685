"""A trained drafter's how_made.json: the kinds of data it really trained on, and whether any run in its lineage
saw a response the target generated (the naive start of issue 55 must say it saw none)."""

from __future__ import annotations

import argparse

import json
from dataclasses import replace

import pytest

from tevcore.train.data import build_dataset
from tevcore.train.how_made import HOW_MADE, lineage_saw_generated, start_record
from tevcore.train.loop import train

from test_loop import tiny_config


def _record(folder) -> dict:
    return json.loads((folder / HOW_MADE).read_text())


@pytest.fixture(scope="module")
def text_only_data(tiny_target, tiny_data_setup, tmp_path_factory):
    """A set built as `build-data --generate false` builds one: teacher-forced text only."""
    config, plan = tiny_data_setup
    folder = tmp_path_factory.mktemp("tiny-text")
    build_dataset(tiny_target, replace(config, generate=False), folder,
                  plan=[jobs for jobs in plan if jobs[0].kind == "text"])
    return folder


def _plain(data, **changes):
    return tiny_config(data, steps=2, tree_lambda=0.0, tree_anchors=0, checkpoint_every=1, keep_checkpoints=True,
                       **changes)


def test_a_drafter_trained_on_text_only_says_it_saw_no_generated_response(tiny_target, text_only_data, tmp_path,
                                                                          one_thread):
    final = train(_plain(text_only_data), tmp_path / "naive", tiny_target)
    record = _record(final)
    assert record["saw_generated_responses"] is False and record["kinds_seen"] == ["text"]
    assert record["start"] == "a new drafter (random weights)" and record["start_how_made"] is None
    used = record["data"][str(text_only_data)]
    assert used["config"]["generate"] is False and used["kinds"]["text"]["shards"] == 2
    assert _record(tmp_path / "naive" / "checkpoint-1") == record  # every checkpoint carries it


def test_a_drafter_trained_on_a_set_with_generated_responses_says_it_saw_them(tiny_target, tiny_data, tmp_path,
                                                                              one_thread):
    record = _record(train(_plain(tiny_data), tmp_path / "mixed", tiny_target))
    assert record["saw_generated_responses"] is True and record["kinds_seen"] == ["gen", "text"]
    generated = record["data"][str(tiny_data)]["kinds"]["gen"]
    assert (generated["shards"], generated["sequences"]) == (1, 3) and generated["stored_tokens"] > 0
    # the same set cut to its first shard (teacher-forced) never reaches the generated one: the record says so
    first = _record(train(_plain(tiny_data, max_shards=1), tmp_path / "first", tiny_target))
    assert first["saw_generated_responses"] is False and first["kinds_seen"] == ["text"]


def test_a_fine_tune_inherits_its_start_s_answer(tiny_target, tiny_data, text_only_data, tmp_path, one_thread):
    naive = train(_plain(text_only_data), tmp_path / "naive", tiny_target)
    mixed = train(_plain(tiny_data), tmp_path / "mixed", tiny_target)
    on_text = _record(train(_plain(text_only_data, init=str(naive)), tmp_path / "a", tiny_target))
    assert on_text["saw_generated_responses"] is False and on_text["start_how_made"] == _record(naive)
    after_mixed = _record(train(_plain(text_only_data, init=str(mixed)), tmp_path / "b", tiny_target))
    assert after_mixed["kinds_seen"] == ["text"] and after_mixed["saw_generated_responses"] is True
    (naive / HOW_MADE).unlink()  # a start whose history is unrecorded: unknown, not "none"
    unknown = _record(train(_plain(text_only_data, init=str(naive)), tmp_path / "c", tiny_target))
    assert unknown["saw_generated_responses"] is None and unknown["start_how_made"] is None


@pytest.mark.parametrize("kinds, init, start, expected", [
    ({"text"}, None, None, False), ({"gen", "text"}, None, None, True), ({"unknown"}, None, None, None),
    ({"text"}, "d", None, None), ({"text"}, "d", {"saw_generated_responses": False}, False),
    ({"text"}, "d", {"saw_generated_responses": True}, True), ({"gen"}, "d", None, True),
    ({"text"}, "d", {"summary": "hand-written, no answer"}, None)])
def test_the_lineage_answer(kinds, init, start, expected):
    assert lineage_saw_generated(kinds, init, start) is expected


def test_the_export_carries_the_record(tiny_target, text_only_data, tmp_path, monkeypatch, one_thread):
    from tevcore.train import train_cli

    monkeypatch.setattr(train_cli, "target_from_args", lambda *a, **k: tiny_target)
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "run"), "--data", str(text_only_data), "--target", "tiny",
                              "--depth", "3", "--context", "4", "--layers", "1", "--heads", "4", "--ffn", "64",
                              "--draft-vocab", "40", "--steps", "1", "--batch-size", "4", "--warmup", "1",
                              "--export", str(tmp_path / "export")])
    assert train_cli.run(args) == 0
    assert _record(tmp_path / "export") == _record(tmp_path / "run" / "drafter")
    assert _record(tmp_path / "export")["saw_generated_responses"] is False


def test_the_committed_drafter_s_record_says_it_saw_generated_responses_as_its_data_shows():
    """A fine-tune from the committed drafter inherits a known answer (its hand-kept record states it)."""
    record = start_record("drafter")
    generated = [d for d in record["data"].values() if d.get("stored_tokens", {}).get("gen", 0) > 0]
    assert generated and record["saw_generated_responses"] is True and "gen" in record["kinds_seen"]
    assert lineage_saw_generated({"text"}, "drafter", record) is True
