"""The one result record: its meta block, its writer (atomic, never replacing without force), reader and table."""

from __future__ import annotations

import json

import pytest
import torch

from tevcore.results import (RECORD_KEYS, Column, ResultRecord, RunMeta, command_line, format_table, read_result,
                             write_result)


def _record(**kw) -> ResultRecord:
    meta = RunMeta.now(command_line("python -m tevcore", ["bench", "--dataset", "my prompts.jsonl"]), "cpu", 7)
    return ResultRecord("bench", meta, [{"verifier": "tev", "budget": 8, "speedup": 1.25}], **kw)


def test_the_meta_block_says_what_ran_where_and_when():
    meta = _record().meta
    assert meta.command_line == "python -m tevcore bench --dataset 'my prompts.jsonl'"  # typed again as it was
    assert meta.seed == 7 and meta.device == "cpu" and meta.torch_threads == torch.get_num_threads()
    assert meta.packages["torch"] == torch.__version__ and meta.packages["python"]
    assert meta.commit and meta.started.endswith("Z")


def test_a_record_round_trips_through_the_writer_and_the_reader(tmp_path, capsys):
    record = _record(settings={"n": 2}, summary={"goals": {}}, partial="interrupted after 1 rows")
    path = write_result(tmp_path / "sub" / "r.json", record, force=False)
    assert read_result(path) == record and set(json.loads(path.read_text())) == RECORD_KEYS
    assert capsys.readouterr().err.startswith(f"wrote {path} (partial")  # a report: stderr, not stdout


def test_without_force_an_existing_result_is_kept_and_the_new_one_goes_beside_it(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text("the first run")
    beside = write_result(path, _record(), force=False)
    assert path.read_text() == "the first run" and beside == tmp_path / "r-2.json" and read_result(beside).rows
    assert write_result(path, _record(), force=True) == path and read_result(path).command == "bench"


@pytest.mark.parametrize("data, message", [
    (b"{", "not a JSON file"),
    (b'{"meta": {}, "rows": []}', "not a tevcore result"),
    (b'[{"verifier": "tev"}]', "not a tevcore result"),
])
def test_anything_else_is_refused_in_one_line(data, message):
    with pytest.raises(ValueError, match=message):
        read_result(data, "x.json")


def test_a_record_of_another_version_or_with_other_keys_is_refused():
    data = _record().to_dict()
    with pytest.raises(ValueError, match="version 2"):
        read_result(json.dumps({**data, "version": 2}).encode())
    with pytest.raises(ValueError, match="extra \\['surprise'\\]"):
        read_result(json.dumps({**data, "surprise": 1}).encode())
    with pytest.raises(ValueError, match="meta block"):
        read_result(json.dumps({**data, "meta": {"commit": "x"}}).encode())


def test_the_table_aligns_figures_right_and_marks_a_missing_one():
    rows = [{"name": "tev", "x": 1.5}, {"name": "residual", "x": None}, {"name": "rrs", "x": 12.25}]
    lines = format_table(rows, [Column("name", "name"), Column("x", "x", ".2f")]).splitlines()
    assert lines[0].split() == ["name", "x"] and len(lines) == 2 + len(rows)
    assert lines[2].endswith(" 1.50") and lines[3].endswith("  -") and lines[4].endswith("12.25")
    assert len({len(line) for line in lines}) == 1


def test_a_result_written_before_the_rename_reads_under_todays_names():
    """A bench row's `mean_block_length` and an eval cell's `block_length` (inside compare's rows too) read as
    `mean_emitted`: "block" now names only the rule, and a user's older file still loads."""
    old = _record().to_dict()
    old["rows"] = [{"verifier": "block", "mean_block_length": 2.5, "mean_block_length_se": 0.1},
                   {"variant": "a", "cells": [{"budget": "8", "expected_length": 2.0, "block_length": 1.9}]}]
    rows = read_result(json.dumps(old).encode()).rows
    assert rows == [{"verifier": "block", "mean_emitted": 2.5, "mean_emitted_se": 0.1},
                    {"variant": "a", "cells": [{"budget": "8", "expected_length": 2.0, "mean_emitted": 1.9}]}]
