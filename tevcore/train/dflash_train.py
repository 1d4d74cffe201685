"""Fine-tuning a published DFlash drafter: distillation, optionally + lambda * the ExitTrain tree loss.

`train --init dflash:<folder>` lands here. The losses, the batches of
anchors, the learning-rate schedule and the tree pool are the block
drafter's (`loop.py`); what differs is the drafter's input: a DFlash block
attends to the target's hidden states over the WHOLE context at its own
layers, not to the distillation set's last C stored positions, so each
sequence's features are recomputed once by the frozen target and kept. Its
rows cover the full target vocabulary (no draft vocabulary). The result is
saved in the published layout, so the DFlash proposer (and any other DFlash
runtime) loads it. The run folder is the block drafter's (`rundir.py`: lock,
config check, status, checkpoint-<step>/ with the drafter in the published
layout plus trainer.pt), so an interrupted run resumes at its last
checkpoint and, batches being drawn per step, ends where an uninterrupted
run ends. Runs are single-process (no DDP).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.proposers.dflash import block_logits
from tevcore.proposers.dflash_format import PREFIX, load_dflash, save_dflash
from tevcore.target.loading import Target
from tevcore.train.anchors import AnchorSet
from tevcore.train.config import TrainConfig
from tevcore.train.losses import distill_loss, tree_objective
from tevcore.train.rundir import (
    RunClock,
    append_metrics,
    held_run_folder,
    latest_checkpoint,
    load_trainer_state,
    reported_end,
    save_checkpoint,
    save_final,
    write_status,
)


def is_dflash_init(config: TrainConfig) -> bool:
    return bool(config.init) and config.init.startswith(PREFIX)


class SequenceFeatures:
    """The target's concatenated hidden states at the drafter's layers over each stored sequence, computed once."""

    def __init__(self, target: Target, layer_indices: tuple[int, ...], anchors: AnchorSet) -> None:
        self.target, self.layers, self.anchors = target, layer_indices, anchors
        self._kept: dict[tuple[int, int], torch.Tensor] = {}

    def __call__(self, shard: int, seq: int) -> torch.Tensor:
        key = (shard, seq)
        if key not in self._kept:
            ids = torch.tensor([self.anchors.sequence(shard, seq)], device=self.target.device)
            with torch.no_grad():  # not inference_mode: these tensors enter the drafter's autograd graph
                states = self.target.model(input_ids=ids, output_hidden_states=True).hidden_states
            self._kept[key] = torch.cat([states[i][0] for i in self.layers], -1).float()
        return self._kept[key]


def _check(config: TrainConfig, depth: int) -> None:
    if config.depth > depth:
        raise ValueError(f"--depth {config.depth} exceeds the DFlash drafter's {depth} draft positions per block: "
                         f"pass --depth {depth} (or less)")
    if config.layers is not None or config.known_prob:
        raise ValueError("--layers and --known-prob apply to block drafters, not to a DFlash drafter")


def train_dflash(config: TrainConfig, out: Path, target: Target) -> Path:
    """Fine-tune (or resume) the DFlash drafter of `config.init` into `out`/drafter (published format)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("DFlash fine-tuning runs in one process; launch it without torchrun")
    initial = load_dflash(config.init.removeprefix(PREFIX), target)  # checked before the run folder is made
    _check(config, initial[1].depth)
    with held_run_folder(Path(out)) as folder:
        return _train_locked(config, folder, target, initial)


def _train_locked(config: TrainConfig, out: Path, target: Target, initial: tuple) -> Path:
    """The run in its locked folder: from its newest checkpoint when it has one, else from `initial`."""
    from tevcore.train.loop import (_prepare_folder, _step_rows, _tree_pool, _trim_metrics,
                                    learning_rate, optimizer_step)

    torch.set_num_threads(config.threads)
    clock = RunClock.begin(out)
    _prepare_folder(config, out)
    checkpoint = latest_checkpoint(out)
    drafter, spec = load_dflash(checkpoint, target) if checkpoint else initial
    state = load_trainer_state(checkpoint) if checkpoint else {"step": 0, "optimizer": None}
    start_step = int(state["step"])
    anchors = AnchorSet(config.data, config.context, config.depth, config.max_shards)
    features = SequenceFeatures(target, spec.hidden_layers, anchors)
    vocab_map = torch.arange(target.vocab_size)  # DFlash rows span the whole target vocabulary
    pool, pool_rows = _tree_pool(config, anchors, target) if config.tree_anchors else (None, None)
    drafter.train()
    params = [p for p in drafter.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    if state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    device = target.device
    _trim_metrics(out / "metrics.jsonl", start_step)
    print(f"DFlash fine-tune: steps {start_step}->{config.steps}")

    def rows_at(anchor: list[int]) -> torch.Tensor:
        """(depth, V) log-probs of the block at one anchor, from its whole context."""
        s, q, t = anchor
        position = anchors.full_position(s, q, t)
        context = features(s, q)[:position][None]
        root = torch.tensor([anchors.sequence(s, q)[position]], device=device)
        positions = torch.arange(position + spec.block_size, device=device)[None]
        logits = block_logits(drafter, spec, target, context, root, positions)[0, :config.depth]
        return torch.log_softmax(logits, -1)

    def save(model, folder: Path) -> Path:
        return save_dflash(model, spec, folder)

    clock.steps_begin()
    with reported_end(out, config.steps, clock):
        for step in range(start_step, config.steps):
            rows, tree_rows, _ = _step_rows(config, step, anchors, pool_rows, 0, 1)
            batch = anchors.batch(torch.cat([rows, tree_rows]), vocab_map)
            logq = torch.stack([rows_at(a) for a in batch.anchors.tolist()])
            n = len(rows)
            loss = distill_loss(logq[:n], batch.teacher_ids[:n].to(device), batch.teacher_probs[:n].to(device))
            metrics = {"step": step + 1, "lr": learning_rate(config, step), "distill": loss.item()}
            if len(tree_rows):
                tree_terms, tree_e = [], 0.0
                for i in range(n, len(batch.anchors)):
                    s, q, t = batch.anchors[i].tolist()
                    tree = best_first(int(batch.roots[i]), logq[i].detach().cpu(), config.tree_budget)
                    logits = pool.score((s, q), anchors.full_position(s, q, t), tree)
                    tree_terms.append(tree_objective(logq[i], tree, logits, config.tree_weight,
                                                     config.tree_temperature, config.tree_alpha, vocab_map))
                    tree_e += target_flow(tree, logits, config.tree_temperature).expected_length
                tree = torch.stack(tree_terms).mean()
                loss = loss + config.tree_lambda * tree
                metrics.update(tree=tree.item(), tree_E=tree_e / len(tree_terms))
            metrics["loss"] = optimizer_step(optimizer, params, loss, metrics["lr"], config.grad_clip)
            append_metrics(out, metrics)
            if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                save_checkpoint(out, drafter, optimizer, step + 1, save=save)
            write_status(out, "running", step + 1, config.steps, clock)
        final = save_final(out, drafter.eval(), save)
    print(f"saved the fine-tuned DFlash drafter to {final}")
    return final
