"""The end-to-end benchmark on the real default target: rows, ratios, fixed-tree equivalence, the JSON file."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from tevcore.engine.sampling import draw_seed
from tevcore.lab.bench import MethodStats, run_bench
from tevcore.lab.bench_table import format_table
from tevcore.cli import main
from tevcore.results import git_commit, read_result


@pytest.fixture(scope="module")
def rows(default_target, default_proposer):
    return run_bench(default_target, default_proposer, ["gsm8k"], n=2, max_new_tokens=12, temperatures=[0.0],
                     budgets=[4], verifiers=["tev", "residual"])


def test_every_method_gets_a_row_with_its_ratio_to_our_ar(rows):
    methods = [(r["method"], r["verifier"]) for r in rows]
    assert methods == [("ours AR", None), ("ours speculative", "tev"), ("ours speculative", "residual"),
                       ("HF generate", None), ("HF prompt lookup (10)", None)]
    assert rows[0]["speedup"] == 1.0
    assert all(r["prompts"] == 2 and r["tokens_per_s"] > 0 and r["speedup"] > 0 for r in rows)


def test_at_temperature_zero_emitted_equals_one_plus_coverage(rows):
    for row in rows[1:3]:  # greedy target: the tree's flow is 0/1, so E = 1 + C is what gets accepted
        assert row["mean_emitted"] == pytest.approx(row["mean_expected_length"], abs=1e-9)
        assert row["length_gap"] == pytest.approx(0.0, abs=1e-9) and row["length_gap_se"] == pytest.approx(0.0, abs=1e-9)
        assert row["rounds"] >= 2  # at least a round per prompt
        assert sum(row["stage_shares"].values()) == pytest.approx(1.0) and 0 <= row["stage_shares"]["other"] < 1
        counts = row["spec_decode"]  # vLLM's counts of the same rounds; every round drafted a tree of 4
        assert counts["num_drafts"] == row["rounds"] and counts["num_draft_tokens"] == 4 * row["rounds"]
        assert counts["mean_acceptance_length"] == pytest.approx(row["mean_emitted"], abs=1e-9)


def test_the_length_gap_is_the_mean_per_round_difference_with_its_standard_error():
    stats = MethodStats("ours speculative", emitted=[1.0, 2.0, 3.0], expected_lengths=[1.5, 1.5, 1.5])
    gap, se = stats.length_gap()
    assert gap == pytest.approx(0.5) and se == pytest.approx(1 / math.sqrt(3))
    row = stats.row("gsm8k", 1.0)
    assert row["rounds"] == 3 and "+33.3 (38.5)" in format_table([row])
    assert MethodStats("ours AR").length_gap() == (None, None)


def test_the_table_has_one_line_per_row(rows):
    lines = format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows) and "HF prompt lookup" in lines[-1]


def test_the_cli_writes_the_json_with_its_metadata(tmp_path, capsys, default_target):
    out = tmp_path / "bench.json"
    assert main(["bench", "--dataset", "gsm8k", "--n", "1", "--max-new-tokens", "6", "--temperatures", "1",
                 "--budgets", "2", "--verifiers", "tev", "--no-peers", "--threads", "1", "--trim", "off,auto",
                 "--refresh-curve", "--out", str(out)]) == 0
    record = read_result(out).to_dict()
    assert record["command"] == "bench" and record["meta"]["torch_threads"] == 1 and record["meta"]["seed"] == 0
    assert record["meta"]["command_line"].startswith("python -m tevcore bench --dataset gsm8k --n 1")
    assert record["settings"]["proposer"].endswith("+ context lookup")
    assert record["settings"]["trim"] == ["off", "auto"] and set(record["settings"]["cost_curve_s"]) == {"0", "1", "2"}
    off, auto = record["rows"][1:]  # the two trims, measured side by side
    assert (off["trim"], off["tree_costs"], auto["trim"]) == ("off", None, "auto")
    assert len(auto["tree_costs"]) == 3 and auto["tree_costs"][0] == 1.0  # per tree size 0..2, relative to one token
    assert [r["method"] for r in record["rows"]] == ["ours AR", "ours speculative", "ours speculative"]
    assert "ours speculative" in capsys.readouterr().out


def test_a_bad_temperature_fails_before_loading_anything(capsys):
    assert main(["bench", "--temperatures", "-1", "--out", "unused.json"]) == 2
    assert "temperature" in capsys.readouterr().err


def test_a_bad_trim_fails_before_loading_anything(capsys):
    assert main(["bench", "--trim", "often", "--out", "unused.json"]) == 2
    assert "'off', 'auto' or a number" in capsys.readouterr().err


def test_every_decode_of_a_bench_draws_from_its_own_seed():
    """Cells that shared a seed drew the same uniforms in lockstep: their gaps could not be pooled."""
    cells = [("humaneval", 1.0, 0, "spec", 8, "tev", "auto"), ("humaneval", 1.0, 0, "spec", 16, "tev", "auto"),
             ("humaneval", 1.0, 0, "spec", 8, "residual", "auto"), ("gsm8k", 1.0, 0, "spec", 8, "tev", "auto"),
             ("humaneval", 1.0, 1, "spec", 8, "tev", "auto"), ("humaneval", 0.0, 0, "spec", 8, "tev", "auto"),
             ("humaneval", 1.0, 0, "ar")]
    seeds = [draw_seed(0, *cell) for cell in cells]
    assert len(set(seeds)) == len(cells)
    assert seeds == [draw_seed(0, *cell) for cell in cells]  # reproducible
    assert draw_seed(1, *cells[0]) == seeds[0] + 1  # --seed still moves every decode


def test_the_recorded_commit_says_when_the_checkout_had_changes(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "weights.txt").write_text("stage 1")
    git("add", "weights.txt")
    git("commit", "-q", "-m", "one")
    head = git_commit(tmp_path)
    assert len(head) == 40 and not head.endswith("-dirty")
    (tmp_path / "weights.txt").write_text("stage 2")
    assert git_commit(tmp_path) == head + "-dirty"
    assert git_commit(tmp_path.parent / "no-such-folder") == "unknown"


SETS = ("first", "second", "third")


def _bench_argv(folder, tmp_path, out, *extra: str) -> list[str]:
    sets = []
    for name in SETS:
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({"prompt": f"The {name} set: say hi"}) + "\n")
        sets.append(str(tmp_path / f"{name}.jsonl"))
    return ["bench", "--dataset", ",".join(sets), "--n", "1", "--max-new-tokens", "4", "--temperatures", "0",
            "--budgets", "2", "--verifiers", "tev", "--no-peers", "--proposer", "rollout", "--target", str(folder),
            "--device", "cpu", "--out", str(out), *extra]


@pytest.mark.parametrize("decodes_before", [1, 2])
def test_ctrl_c_during_bench_keeps_the_finished_cells_marked_partial(decodes_before, tiny_model_folder, tmp_path,
                                                                    capsys, monkeypatch):
    """One speculative decode per set: interrupted in a later set, the finished sets' rows are written."""
    import tevcore.lab.bench as bench

    real, calls = bench.generate, []

    def generate(*args, **kwargs):
        if len(calls) == decodes_before:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "generate", generate)
    out = tmp_path / "bench.json"
    code = main(_bench_argv(tiny_model_folder("llama"), tmp_path, out))
    captured = capsys.readouterr()
    assert code == 130 and captured.err.strip().splitlines()[-1] == "interrupted: bench stopped by Ctrl-C"
    assert "Traceback" not in captured.err
    result = read_result(out).to_dict()
    assert [Path(row["dataset"]).stem for row in result["rows"] if row["method"] == "ours AR"] == \
        list(SETS[:decodes_before])
    assert result["partial"] == f"interrupted after {len(result['rows'])} rows"
    assert f"wrote {out} (partial" in captured.err and "wrote" not in captured.out


def test_ctrl_c_before_any_cell_finishes_never_replaces_a_result(tiny_model_folder, tmp_path, capsys, monkeypatch):
    import tevcore.lab.bench as bench

    def generate(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "generate", generate)
    out = tmp_path / "bench.json"
    out.write_text('{"rows": ["the first run"]}')
    code = main(_bench_argv(tiny_model_folder("llama"), tmp_path, out, "--force"))
    captured = capsys.readouterr()
    assert code == 130 and "wrote" not in captured.out + captured.err
    assert out.read_text() == '{"rows": ["the first run"]}'
