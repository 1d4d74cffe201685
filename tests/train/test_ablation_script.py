"""scripts/exit_train_ablation.sh from a naive start (issue 55), end to end on a tiny Llama: the start trains on
text pairs only and says so, every arm (the T = 1 arms too) is scored against it and its twin in one pass, the
committed drafter's stand-in is scored against it, and every arm's gradient probe reaches ablation.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tevcore.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "exit_train_ablation.sh"


@pytest.fixture(scope="module")
def tiny_drafter(tiny_model_folder, tmp_path_factory):
    """(target folder, a drafter of a tiny shape for it): the shape the naive start copies, and the reference."""
    folder = tiny_model_folder("llama", chat_template=True)
    root = tmp_path_factory.mktemp("shape")
    assert main(["build-data", str(root / "data"), "--target", str(folder), "--device", "cpu", "--top-k", "8",
                 "--max-new-tokens", "6", "--max-shards", "1", "--python-files", "0", "--text-pairs", "false",
                 "--sets", "mt-bench", "--gen-batch", "4"]) == 0
    assert main(["train", str(root / "run"), "--data", str(root / "data"), "--target", str(folder), "--device", "cpu",
                 "--layers", "1", "--heads", "4", "--ffn", "32", "--draft-vocab", "64", "--steps", "1",
                 "--batch-size", "4", "--warmup", "1"]) == 0
    return folder, root / "run" / "drafter"


def _run(out: Path, **settings: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [
        os.environ.get("PYTHONPATH")])]), "HF_HUB_OFFLINE": "1", **settings}
    return subprocess.run(["bash", str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=900)


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.slow
def test_the_ablation_from_a_naive_start_runs_to_its_report(tiny_drafter, tmp_path):
    target, shape = tiny_drafter
    out = tmp_path / "abl"
    done = _run(out, TARGET=str(target), START="naive", SHAPE_OF=str(shape), REFERENCE=str(shape),
                TEXT_SHARDS="1", NAIVE_STEPS="2", NAIVE_BATCH="4", NAIVE_CHECKPOINT_EVERY="2", SHARDS="1",
                MAX_NEW_DATA="6", STEPS="2", POINTS="1", BATCH="4", SHARE="0.5", POOL="2", BUDGET="4", BUDGETS="4",
                TEMPS="0,1", SETS="mt-bench", PER_SET="1", MAX_NEW="4", THREADS="1", DEVICE="cpu")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no generated response" in done.stdout

    naive = _json(out / "naive-start" / "run" / "drafter" / "how_made.json")
    assert naive["saw_generated_responses"] is False and naive["kinds_seen"] == ["text"]
    assert naive["start"] == "a new drafter (random weights)"
    made = _json(out / "naive-start" / "run" / "config.json")
    assert (made["heads"], made["ffn"], made["draft_vocab"], made["layers"]) == (4, 32, 64, 1)  # SHAPE_OF's shape
    for arm, temperatures in (("soft-0.1", [0.0]), ("t1-soft-0", [1.0])):
        record = _json(out / arm / "drafter" / "how_made.json")
        assert record["saw_generated_responses"] is True and record["kinds_seen"] == ["gen"]
        assert record["start_how_made"]["saw_generated_responses"] is False
        assert [d["config"]["temperatures"] for d in record["data"].values()] == [temperatures]

    result = _json(out / "ablation.json")
    pairs = {(r["arm"], r["step"], r["against"]) for r in result["rows"]}
    arms = ["soft-0", "soft-0.1", "hard-0", "hard-0.1", "t1-soft-0", "t1-soft-0.1"]
    assert pairs == {("reference", 0, "start"), *((a, 2, "start") for a in arms),
                     *((a, 2, "twin") for a in arms if a.endswith("0.1"))}
    assert {r["temperature"] for r in result["rows"]} == {0.0, 1.0}
    probes = {(p["arm"], p["step"]): p for p in result["settings"]["gradient_probe"]}
    assert set(probes) == {(a, 2) for a in arms}  # lambda-0 twins probe too
    assert all(-1 <= p["grad_cosine"] <= 1 for p in probes.values())
    assert all((p["tree_E_minus_twin"] is None) == p["arm"].endswith("-0") for p in probes.values())
    assert "gradient probe" in done.stdout


def test_an_unknown_start_is_refused_in_one_line(tmp_path):
    done = _run(tmp_path / "abl", START="pretrained")
    assert done.returncode == 2 and done.stderr.strip() == "START must be committed or naive, not pretrained"
    assert not (tmp_path / "abl").exists()
