"""Real `torchrun` launches with 2 gloo ranks on CPU, each checked against the same command in one process.

Training (block and DFlash): the same global batches give the same weights,
and a run interrupted in one process resumes under torchrun to the weights of
an uninterrupted run. bench and eval-drafter: the ranks share the prompts and
rank 0 writes one JSON whose every figure that is not a time equals the
one-process run's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_models import save_tiny_distillation_set
from safetensors.torch import load_file

from dflash_checkpoints import dflash_config, write_dflash
from tevcore.results import read_result
from tevcore.cli import main
from tevcore.target.loading import load_target

pytestmark = [pytest.mark.ddp, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KINDS = {
    "block-drafter": ["--layers", "1", "--heads", "4", "--ffn", "64", "--draft-vocab", "40", "--known-prob", "0.5"],
    "dflash": [],  # --init is added from the fixture
}


def torchrun(*args: str) -> None:
    """`torchrun --nproc-per-node 2 -m tevcore -- ARGS`, as the README documents it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "tevcore", "--", *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def setup(tiny_model_folder, tmp_path_factory):
    """(target folder, distillation set, DFlash checkpoint, prompts file) on a tiny Qwen3."""
    folder = tiny_model_folder("qwen3")
    target = load_target(str(folder), device="cpu")
    root = tmp_path_factory.mktemp("torchrun")
    save_tiny_distillation_set(target, folder, root / "data")
    checkpoint = write_dflash(root / "dflash", dflash_config(64, 128, 2, block_size=4), seed=5)
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("abcabcab", "hello there", "12 + 12 = 2")))
    return folder, root / "data", checkpoint, prompts


def _train_args(kind: str, run: Path, setup) -> list[str]:
    folder, data, checkpoint, _ = setup
    start = ["--init", f"dflash:{checkpoint}"] if kind == "dflash" else []
    return ["train", str(run), "--data", str(data), "--target", str(folder), *start, *KINDS[kind], "--device", "cpu",
            "--depth", "3", "--context", "4", "--steps", "4", "--batch-size", "4", "--warmup", "1", "--lr", "0.01",
            "--checkpoint-every", "2", "--tree-lambda", "0.1", "--tree-anchors", "2", "--tree-pool", "4",
            "--tree-budget", "4", "--threads", "1"]


def _close(a: Path, b: Path, atol: float = 1e-5) -> None:
    wa, wb = (load_file(str(run / "drafter" / "model.safetensors")) for run in (a, b))
    assert wa.keys() == wb.keys()
    for key in wa:
        gap = float((wa[key].float() - wb[key].float()).abs().max()) if wa[key].numel() else 0.0
        assert gap <= atol, (key, gap)


@pytest.mark.parametrize("kind", list(KINDS))
def test_two_ranks_train_to_the_weights_of_one_process_and_resume_an_interrupted_run(kind, setup, tmp_path,
                                                                                      monkeypatch, one_thread):
    import tevcore.train.loop as loop

    single, ranks, parted = tmp_path / "single", tmp_path / "ranks", tmp_path / "parted"
    assert main(_train_args(kind, single, setup)) == 0
    torchrun(*_train_args(kind, ranks, setup))
    assert json.loads((ranks / "status.json").read_text())["state"] == "finished"
    assert len((ranks / "metrics.jsonl").read_text().splitlines()) == 4  # rank 0 alone writes
    _close(single, ranks)
    _same_metrics(single, ranks)  # the global batch's means, not rank 0's half

    real_step, taken = loop.optimizer_step, []

    def step_then_stop(*args, **kw):
        if len(taken) == 3:  # step 3 of 4: after the checkpoint of step 2
            raise KeyboardInterrupt
        taken.append(1)
        return real_step(*args, **kw)

    monkeypatch.setattr(loop, "optimizer_step", step_then_stop)
    assert main(_train_args(kind, parted, setup)) == 130  # Ctrl-C: one line, exit status 130
    assert json.loads((parted / "latest.json").read_text())["step"] == 2
    torchrun(*_train_args(kind, parted, setup))  # the same command, now under torchrun, resumes it
    assert [json.loads(line)["step"] for line in (parted / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    _close(single, parted)


def _same_metrics(a: Path, b: Path) -> None:
    rows_a, rows_b = ([json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] for run in (a, b))
    assert [sorted(r) for r in rows_a] == [sorted(r) for r in rows_b] and "tree_E" in rows_a[0]
    for ra, rb in zip(rows_a, rows_b):
        for key in ra:
            assert ra[key] == pytest.approx(rb[key], rel=1e-5, abs=1e-7), (key, ra, rb)


def _same_figures(a: dict, b: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        assert a[key] == b[key], (key, a[key], b[key])


def test_sharded_bench_and_eval_drafter_equal_the_one_process_run(setup, tmp_path, one_thread):
    folder, _, checkpoint, prompts = setup
    bench = ["bench", "--proposer", f"dflash:{checkpoint}+lookup", "--dataset", str(prompts), "--n", "3",
             "--max-new-tokens", "8", "--temperatures", "0,1", "--budgets", "4", "--verifiers", "tev,residual",
             "--no-peers", "--target", str(folder), "--device", "cpu", "--threads", "1"]
    assert main([*bench, "--out", str(tmp_path / "one.json")]) == 0
    torchrun(*bench, "--out", str(tmp_path / "two.json"))
    one, two = (read_result(tmp_path / f"{n}.json").to_dict() for n in ("one", "two"))
    assert two["settings"]["processes"] == 2 and len(one["rows"]) == len(two["rows"]) == 6
    for a, b in zip(one["rows"], two["rows"]):
        _same_figures(a, b, ("dataset", "temperature", "method", "budget", "verifier", "prompts", "rounds",
                             "mean_emitted", "mean_expected_length", "length_gap", "length_gap_se",
                             "mean_tree_size", "skipped_share"))
    assert any(r["rounds"] for r in one["rows"])

    evaluate = ["eval-drafter", f"dflash:{checkpoint}", "--target", str(folder), "--device", "cpu", "--budgets",
                "chain,4", "--temperatures", "0,1", "--greedy-sets", str(prompts), "--sample-sets", str(prompts),
                "--per-set", "3", "--max-new-tokens", "8", "--oracle"]
    paired = ["eval-drafter", "lookup", "--compare", f"dflash:{checkpoint}", "--target", str(folder), "--device",
              "cpu", "--budgets", "2,4", "--temperatures", "1", "--sample-sets", str(prompts), "--per-set", "3",
              "--max-new-tokens", "8"]
    for name, args in (("eval", evaluate), ("paired", paired)):
        assert main([*args, "--json", str(tmp_path / f"{name}-one.json")]) == 0
        torchrun(*args, "--json", str(tmp_path / f"{name}-two.json"))
        one, two = (read_result(tmp_path / f"{name}-{n}.json") for n in ("one", "two"))
        assert two.settings["processes"] == 2 and one.rows == two.rows and one.rows
