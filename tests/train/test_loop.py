"""Training runs: resume after an interruption equals an uninterrupted run; run folder, status and lock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from tevcore.train.config import TrainConfig
from tevcore.train.loop import step_rows, train


def tiny_config(data, **changes) -> TrainConfig:
    values = dict(data=str(data), target="tiny", depth=3, context=4, layers=1, heads=4, ffn=64, draft_vocab=40,
                  steps=6, batch_size=8, warmup=2, lr=3e-3, tree_lambda=0.1, tree_anchors=2, tree_pool=3,
                  checkpoint_every=2)
    values.update(changes)
    return TrainConfig(**values)


def _weights(folder):
    return load_file(str(folder / "model.safetensors"))


def _metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_resume_after_interruption_equals_an_uninterrupted_run(tiny_target, tiny_data, tmp_path):
    config = tiny_config(tiny_data, dropout=0.1)
    whole = train(config, tmp_path / "whole", tiny_target)

    def interrupt(metrics):
        if metrics["step"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config, tmp_path / "cut", tiny_target, on_step=interrupt)
    assert json.loads((tmp_path / "cut" / "status.json").read_text())["state"] == "interrupted"
    resumed = train(config, tmp_path / "cut", tiny_target)
    a, b = _weights(whole), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(tmp_path / "whole") == _metrics(tmp_path / "cut")


def test_run_folder_records_status_metrics_and_checkpoints(tiny_target, tiny_data, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(tiny_data, steps=3, checkpoint_every=10), run, tiny_target)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == status["total_steps"] == 3
    rows = _metrics(run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert {"loss", "distill", "tree", "mean_P", "root_exit", "tree_E", "lr"} <= rows[0].keys()
    assert all(1.0 <= r["tree_E"] <= 1.0 + 8 for r in rows)
    assert json.loads((run / "latest.json").read_text())["step"] == 3
    assert not (run / ".lock").exists()


def test_distillation_only_run_has_no_tree_terms(tiny_target, tiny_data, tmp_path):
    train(tiny_config(tiny_data, steps=2, tree_lambda=0.0, tree_anchors=0), tmp_path, tiny_target)
    assert "tree" not in _metrics(tmp_path)[0]


def test_training_with_a_known_depth1_slot_learns_its_marker(tiny_target, tiny_data, tmp_path):
    final = train(tiny_config(tiny_data, steps=3, known_prob=0.5, tree_lambda=0.0, tree_anchors=0), tmp_path,
                  tiny_target)
    assert json.loads((final / "config.json").read_text())["known_slots"] == 1
    assert torch.count_nonzero(_weights(final)["known_marker"]) > 0
    again = train(tiny_config(tiny_data, steps=1, tree_lambda=0.0, tree_anchors=0, init=str(final)),
                  tmp_path / "plain", tiny_target)  # fine-tuned further without given tokens: the slot stays
    assert json.loads((again / "config.json").read_text())["known_slots"] == 1


def test_training_with_known_paths_gives_the_drafter_a_slot_per_depth(tiny_target, tiny_data, tmp_path):
    final = train(tiny_config(tiny_data, steps=3, known_prob=1.0, known_depth=2, tree_lambda=0.0, tree_anchors=0),
                  tmp_path, tiny_target)
    assert json.loads((final / "config.json").read_text())["known_slots"] == 2
    with pytest.raises(ValueError, match="known_depth"):
        tiny_config(tiny_data, known_prob=0.5, known_depth=3)  # the depth below a path of 3 would be past depth 3


def test_fine_tuning_with_more_layers_grows_the_starting_drafter_and_never_shrinks_it(tiny_target, tiny_data,
                                                                                        tmp_path):
    plain = dict(tree_lambda=0.0, tree_anchors=0)
    start = train(tiny_config(tiny_data, steps=1, **plain), tmp_path / "start", tiny_target)
    grown = train(tiny_config(tiny_data, steps=2, init=str(start), layers=3, **plain), tmp_path / "grown", tiny_target)
    assert json.loads((grown / "config.json").read_text())["layers"] == 3
    weights = _weights(grown)
    assert torch.count_nonzero(weights["encoder.layers.2.linear2.weight"]) > 0  # the new layer has trained
    kept = train(tiny_config(tiny_data, steps=1, init=str(grown), layers=None, **plain), tmp_path / "kept",
                 tiny_target)
    assert json.loads((kept / "config.json").read_text())["layers"] == 3
    with pytest.raises(ValueError, match="cannot shrink"):
        train(tiny_config(tiny_data, steps=1, init=str(grown), layers=2, **plain), tmp_path / "shrunk", tiny_target)
    assert not (tmp_path / "shrunk").exists()  # refused before the run folder is made


def test_a_second_run_on_a_locked_folder_is_refused(tiny_target, tiny_data, tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".lock").write_text(str(owner.pid))
        with pytest.raises(RuntimeError, match=f"in use by training process {owner.pid}"):
            train(tiny_config(tiny_data, steps=1), tmp_path, tiny_target)
    finally:
        owner.kill()
        owner.wait()
    train(tiny_config(tiny_data, steps=1), tmp_path, tiny_target)  # a dead owner's lock is taken over


def test_resuming_with_another_config_is_refused(tiny_target, tiny_data, tmp_path):
    train(tiny_config(tiny_data, steps=1), tmp_path, tiny_target)
    with pytest.raises(ValueError, match="differs in \\['lr'\\]"):
        train(tiny_config(tiny_data, steps=1, lr=1e-2), tmp_path, tiny_target)


def test_the_tree_budget_reaches_the_builder(tiny_target, tiny_data, tmp_path, monkeypatch):
    import tevcore.train.loop as loop

    budgets, real = [], loop.best_first

    def spy(root, rows, budget):
        budgets.append(budget)
        return real(root, rows, budget)

    monkeypatch.setattr(loop, "best_first", spy)
    train(tiny_config(tiny_data, steps=2, tree_budget=5), tmp_path, tiny_target)
    assert budgets == [5] * 4  # two tree anchors a step
    assert all(r["tree_E"] <= 1 + 5 for r in _metrics(tmp_path))


def test_a_tree_share_gives_trees_to_the_batchs_first_rows_and_its_lambda_0_twin_the_same_batches(
        tiny_target, tiny_data, tmp_path):
    from tevcore.train.anchors import AnchorSet

    shared = tiny_config(tiny_data, tree_anchors=0, tree_share=0.5, batch_size=8)
    twin = tiny_config(tiny_data, tree_anchors=0, tree_share=0.5, batch_size=8, tree_lambda=0.0)
    anchors = AnchorSet(shared.data, shared.context, shared.depth)
    pool = torch.arange(5, 40)
    rows, tree_rows, _ = step_rows(shared, 3, anchors, pool, 0, 1)
    assert torch.equal(tree_rows, rows[:4]) and set(rows.tolist()) <= set(pool.tolist())
    twin_rows, twin_trees, _ = step_rows(twin, 3, anchors, pool, 0, 1)
    assert torch.equal(twin_rows, rows) and len(twin_trees) == 0
    halves = [step_rows(shared, 3, anchors, pool, r, 2) for r in (0, 1)]
    assert all(torch.equal(t, r[:2]) for r, t, _ in halves)  # each rank's trees are its own first rows
    assert sorted(torch.cat([t for _, t, _ in halves]).tolist()) == sorted(tree_rows.tolist())
    train(shared, tmp_path / "shared", tiny_target)
    train(twin, tmp_path / "twin", tiny_target)
    assert all("tree" in r for r in _metrics(tmp_path / "shared"))
    assert all("tree" not in r for r in _metrics(tmp_path / "twin"))


def test_keep_checkpoints_keeps_every_checkpoint_folder(tiny_target, tiny_data, tmp_path):
    train(tiny_config(tiny_data, steps=4, checkpoint_every=2, tree_lambda=0.0, tree_anchors=0, keep_checkpoints=True),
          tmp_path / "kept", tiny_target)
    train(tiny_config(tiny_data, steps=4, checkpoint_every=2, tree_lambda=0.0, tree_anchors=0), tmp_path / "one",
          tiny_target)
    assert sorted(p.name for p in (tmp_path / "kept").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert [p.name for p in (tmp_path / "one").glob("checkpoint-*")] == ["checkpoint-4"]


def _probed(data, **changes) -> TrainConfig:
    """A tree-share run (the ablation's shape) that probes the gradients every second step."""
    return tiny_config(data, **{**dict(tree_anchors=0, tree_share=0.5, steps=4, checkpoint_every=2,
                                       keep_checkpoints=True, probe_every=2), **changes})


def test_the_gradient_probe_logs_the_cosine_a_direct_computation_gives(tiny_target, tiny_data, tmp_path, one_thread):
    """Checkpoint 2's weights on step 2's batch, by two separate backward passes: the logged cosine and norms.
    The probe's tree E and anchor term are the ones step 3 itself logs (the same weights, the same batch)."""
    from tevcore.proposers.registry import trainer_for
    from tevcore.train.anchors import AnchorSet
    from tevcore.train.loop import tree_pool, tree_terms
    from tevcore.train.losses import anchor_loss

    config = _probed(tiny_data)
    train(config, tmp_path, tiny_target)
    rows = _metrics(tmp_path)
    assert [("probe_grad_cosine" in r) for r in rows] == [False, True, False, True]
    assert all(-1 <= r["probe_grad_cosine"] <= 1 for r in rows[1::2])
    assert rows[1]["probe_tree_E"] == pytest.approx(rows[2]["tree_E"], abs=1e-9)
    assert rows[1]["probe_distill"] == pytest.approx(rows[2]["distill"], abs=1e-6)

    adapter = trainer_for(None)[1].load(tmp_path / "checkpoint-2", config, tiny_target)
    anchors = AnchorSet(config.data, config.context, config.depth)
    pool, pool_rows = tree_pool(config, anchors, tiny_target)
    batch_rows, tree_rows, known = step_rows(config, 2, anchors, pool_rows, 0, 1)
    batch = anchors.batch(batch_rows, adapter.vocab_map)
    params = [p for p in adapter.network.parameters() if p.requires_grad]

    def gradient(term_of) -> torch.Tensor:
        adapter.network.zero_grad(set_to_none=True)
        logq, teacher = adapter.rows(adapter.network, batch, anchors, known)
        term_of(logq, teacher).backward()
        return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).flatten() for p in params])

    anchor = gradient(lambda logq, teacher: anchor_loss("soft", logq, batch.teacher_ids, teacher))
    first = len(tree_rows)
    tree_batch = type(batch)(**{k: v[:first] for k, v in batch.__dict__.items()})
    tree = gradient(lambda logq, _: tree_terms(adapter, logq[:first], tree_batch, anchors, pool, config)[0])
    assert rows[1]["probe_grad_cosine"] == pytest.approx(float(torch.cosine_similarity(anchor, tree, dim=0)), abs=1e-5)
    assert rows[1]["probe_anchor_grad_norm"] == pytest.approx(float(anchor.norm()), rel=1e-5)
    assert rows[1]["probe_tree_grad_norm"] == pytest.approx(float(tree.norm()), rel=1e-5)


@pytest.mark.parametrize("tree_lambda", [0.0, 0.1])
def test_the_probe_leaves_the_run_as_it_was(tiny_target, tiny_data, tmp_path, tree_lambda, one_thread):
    """A probed run (the lambda-0 twin builds its trees only for the probe) trains exactly as an unprobed one."""
    probed = train(_probed(tiny_data, tree_lambda=tree_lambda, dropout=0.1), tmp_path / "probed", tiny_target)
    plain = train(_probed(tiny_data, tree_lambda=tree_lambda, dropout=0.1, probe_every=0), tmp_path / "plain",
                  tiny_target)
    a, b = _weights(probed), _weights(plain)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    unprobed = [{k: v for k, v in r.items() if not k.startswith("probe_")} for r in _metrics(tmp_path / "probed")]
    assert unprobed == _metrics(tmp_path / "plain")
    assert all("probe_tree_E" in r for r in _metrics(tmp_path / "probed")[1::2])


def test_a_probe_without_trees_is_refused(tiny_data):
    with pytest.raises(ValueError, match="probe_every needs trees"):
        tiny_config(tiny_data, tree_lambda=0.0, tree_anchors=0, probe_every=5)
