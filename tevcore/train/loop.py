"""The one training loop: distillation, optionally + lambda * ExitTrain tree loss, for every trainable kind.

The kind of drafter comes from `config.init` through the proposer registry
(none: a fresh block drafter); its `Trainer` checks the start before the run
folder exists and its `TrainingAdapter` gives the rows of each batch and
saves checkpoints in the kind's own layout. Everything else is here once:
the run folder, its lock and status, batches, losses, trees, checkpoints,
resume and metrics, in one process or under torchrun (DDP).

Batches are drawn from a generator seeded by (seed, step), so a resumed or
distributed run sees exactly the batches of an uninterrupted single-process
run: rank r takes rows r, r+W, ... of each global batch, and DDP's gradient
average over equal-sized shares equals the global mean. Only rank 0 writes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from tevcore.diskwrite import write_text_atomic
from tevcore.engine.builders import best_first
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import seeded_torch_rng
from tevcore.outputs import write_json
from tevcore.proposers.kind import TrainingAdapter
from tevcore.proposers.registry import trainer_for
from tevcore.ranks import barrier, gather, mean_over_ranks, mean_tensor_over_ranks, world
from tevcore.target.loading import Target
from tevcore.train.anchors import AnchorBatch, AnchorSet
from tevcore.train.config import TrainConfig
from tevcore.train.data import check_data_target
from tevcore.train.how_made import HOW_MADE, how_made
from tevcore.train.losses import anchor_loss, tree_objective
from tevcore.train.rundir import (
    RunClock,
    RunState,
    TrainingFailed,
    append_metrics,
    held_run_folder,
    latest_checkpoint,
    load_trainer_state,
    read_saved_config,
    reported_end,
    save_checkpoint,
    save_final,
    write_status,
)
from tevcore.train.treescore import PooledContexts


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def step_rows(config: TrainConfig, step: int, anchors: AnchorSet, pool_rows: torch.Tensor | None,
              rank: int, world_size: int, trees: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's distillation rows, tree rows, and how many leading tokens of its path each row is given (0: none).

    With `tree_share` every row comes from the tree pool and the tree rows are the batch's first rows (this
    rank's are then the first of its own rows) when `trees` (default: when the run trains on trees, lambda > 0;
    the gradient probe asks for them at lambda 0 too); otherwise the tree rows are `tree_anchors` extra rows.
    """
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
    if config.tree_share:
        rows = pool_rows[torch.randint(len(pool_rows), (config.batch_size,), generator=generator)]
        wanted = config.exit_train if trees is None else trees
        tree_rows = rows[:config.tree_anchor_count] if wanted else torch.zeros(0, dtype=torch.long)
    else:
        rows = torch.randint(len(anchors), (config.batch_size,), generator=generator)
        tree_rows = torch.zeros(0, dtype=torch.long)
        if pool_rows is not None and config.tree_anchors:
            tree_rows = pool_rows[torch.randint(len(pool_rows), (config.tree_anchors,), generator=generator)]
    known = torch.zeros(config.batch_size, dtype=torch.long)
    if config.known_prob:
        known = (torch.rand(config.batch_size, generator=generator) < config.known_prob).long()
        if config.known_depth > 1:
            known *= torch.randint(1, config.known_depth + 1, (config.batch_size,), generator=generator)
    return rows[rank::world_size], tree_rows[rank::world_size], known[rank::world_size]


def pool_members(config: TrainConfig, anchors: AnchorSet,
                 target: Target) -> tuple[dict[tuple[int, int], list[int]], torch.Tensor]:
    """A seeded pool of whole sequences for tree scoring, and the anchor rows that fall inside it."""
    keys = torch.unique(anchors.index[:, :2], dim=0)
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(config.seed))[:config.tree_pool]
    chosen = {tuple(keys[i].tolist()) for i in order}
    fits = target.max_context - config.tree_budget - 1
    sequences = {k: anchors.sequence(*k) for k in sorted(chosen)}
    sequences = {k: ids[:fits] for k, ids in sequences.items()}
    inside = [(tuple(r[:2]) in chosen) and anchors.full_position(*r) < len(sequences[tuple(r[:2])])
              for r in anchors.index.tolist()]
    return sequences, torch.nonzero(torch.tensor(inside)).flatten()


def builds_trees(config: TrainConfig) -> bool:
    """Whether the run scores draft trees on the target: a pool of sequences, and anchors with a tree term (or a
    gradient probe, which builds trees for lambda-0 runs too)."""
    pooled = bool(config.tree_anchors or config.tree_share)
    return pooled and bool(config.tree_anchors or config.exit_train or config.probe_every)


def check_tree_budget(config: TrainConfig, target: Target) -> None:
    """A tree of `tree_budget` nodes is scored after its root and at least one token of context: refuse a budget
    the target's context cannot hold, before any work (the pool's sequences would be cut to nothing)."""
    if builds_trees(config) and config.tree_budget > target.max_context - 2:
        raise ValueError(f"tree_budget {config.tree_budget} (--tree-budget): a tree of that many nodes after a root "
                         f"and one token of context exceeds the model's context of {target.max_context} tokens; "
                         f"give at most {target.max_context - 2}")


def tree_pool(config: TrainConfig, anchors: AnchorSet,
              target: Target) -> tuple[PooledContexts | None, torch.Tensor | None]:
    """The pool's prefilled target contexts (None when no tree is built) and its anchor rows (None when unused).

    A `tree_share` run draws every row from the pool, so its lambda-0 twin sees the same batches while
    prefilling nothing.
    """
    if not (config.tree_anchors or config.tree_share):
        return None, None
    sequences, rows = pool_members(config, anchors, target)
    return (PooledContexts(target, sequences) if builds_trees(config) else None), rows


def tree_terms(adapter: TrainingAdapter, logq: torch.Tensor, batch: AnchorBatch, anchors: AnchorSet,
               pool: PooledContexts, config: TrainConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean tree loss over this rank's tree anchors, and diagnostics of the trees the drafter built."""
    built = adapter.tree_rows(batch, anchors, logq)
    losses, stats = [], {"mean_P": 0.0, "root_exit": 0.0, "tree_E": 0.0}
    trees = [best_first(int(batch.roots[i]), built[i], config.tree_budget) for i in range(len(built))]
    items = [((s, q), anchors.full_position(s, q, t), tree) for (s, q, t), tree in zip(batch.anchors.tolist(), trees)]
    for i, (tree, logits) in enumerate(zip(trees, pool.score_many(items))):  # one batched target forward
        losses.append(tree_objective(logq[i], tree, logits, config.tree_weight, config.tree_temperature,
                                     config.tree_alpha, adapter.vocab_map, config.tree_norm))
        flow = target_flow(tree, logits, config.tree_temperature)
        stats["mean_P"] += float(flow.path_prob[1:].mean()) if tree.size else 0.0
        stats["root_exit"] += float(flow.exit_mass[0])
        stats["tree_E"] += flow.expected_length
    n = max(1, len(losses))
    return torch.stack(losses).mean(), {k: v / n for k, v in stats.items()}


def step_terms(adapter: TrainingAdapter, model: torch.nn.Module, config: TrainConfig, step: int,
               anchors: AnchorSet, pool: PooledContexts | None, pool_rows: torch.Tensor | None, rank: int, size: int,
               device: torch.device, trees: bool | None = None
               ) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, float], AnchorBatch, torch.Tensor]:
    """Step `step`'s anchor term and tree term (None without tree rows) on this rank's share of its batch, with
    the trees' diagnostics, the batch and the drafter's rows. The forward runs under the step's own seed, so
    dropout draws the same masks after a resume, and the gradient probe sees what training sees."""
    rows, tree_rows, known = step_rows(config, step, anchors, pool_rows, rank, size, trees)
    shared = bool(config.tree_share)  # the tree rows are the batch's first rows, not extra ones
    batch = anchors.batch(rows if shared else torch.cat([rows, tree_rows]), adapter.vocab_map)
    n = len(rows)
    if not shared:
        known = torch.cat([known, torch.zeros(len(tree_rows), dtype=torch.long)])
    with seeded_torch_rng(config.seed * 1_000_003 + step * 101 + rank, device):
        logq, teacher_probs = adapter.rows(model, batch, anchors, known)
    distill = anchor_loss(config.anchor_loss, logq[:n], batch.teacher_ids[:n].to(device), teacher_probs[:n].to(device))
    if not len(tree_rows):
        return distill, None, {}, batch, logq
    first = 0 if shared else n
    tree_batch = _slice_batch(batch, first, first + len(tree_rows))
    tree, stats = tree_terms(adapter, logq[first:first + len(tree_rows)], tree_batch, anchors, pool, config)
    return distill, tree, stats, batch, logq


def gradient_probe(adapter: TrainingAdapter, config: TrainConfig, step: int, anchors: AnchorSet,
                   pool: PooledContexts, pool_rows: torch.Tensor | None, rank: int, size: int,
                   device: torch.device) -> dict[str, float]:
    """Where the tree term's gradient goes, at the weights after `step` updates (checkpoint `step`'s) on the
    batch step `step` draws (one they have not trained on): the cosine between the gradients of the tree term and
    of the anchor term over the drafter's trainable parameters, both norms, both terms and the batch's tree E.

    It builds the trees at lambda 0 too, so twin arms are probed on the same batches. It leaves the run as it
    was: the gradients come from `torch.autograd.grad` (nothing gathers in `.grad`, the optimizer never sees
    them), the forward runs under the step's own seed with the random state given back, and under DDP each
    rank's gradient is averaged into the global batch's before the cosine.
    """
    params = [p for p in adapter.network.parameters() if p.requires_grad]
    distill, tree, stats, _, _ = step_terms(adapter, adapter.network, config, step, anchors, pool, pool_rows, rank,
                                            size, device, trees=True)

    def flat_gradient(term: torch.Tensor, keep: bool) -> torch.Tensor:
        grads = torch.autograd.grad(term, params, retain_graph=keep, allow_unused=True)
        flat = torch.cat([(torch.zeros_like(p) if g is None else g).flatten().double() for p, g in zip(params, grads)])
        return mean_tensor_over_ranks(flat)

    anchor_grad, tree_grad = flat_gradient(distill, True), flat_gradient(tree, False)
    norms = float(anchor_grad.norm()), float(tree_grad.norm())
    values = mean_over_ranks({"probe_distill": distill.item(), "probe_tree": tree.item(),
                              **{f"probe_{k}": v for k, v in stats.items()}})
    values.update(probe_anchor_grad_norm=norms[0], probe_tree_grad_norm=norms[1])
    if norms[0] > 0 and norms[1] > 0:
        values["probe_grad_cosine"] = float(anchor_grad @ tree_grad) / (norms[0] * norms[1])
    return values


def optimizer_step(optimizer: torch.optim.Optimizer, params: list, loss: torch.Tensor, lr: float,
                   grad_clip: float | None) -> float:
    """One step at learning rate `lr`, gradients clipped to `grad_clip` where set; returns this rank's loss."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
    optimizer.step()
    return loss.item()


def train(config: TrainConfig, out: Path, target: Target,
          on_step: Callable[[dict], None] | None = None) -> Path:
    """Train (or resume) into run folder `out`; returns the final drafter folder.

    `on_step` is called with each step's metrics (for progress displays); an
    exception raised from it stops the run like an interruption would.
    """
    _, trainer, source = trainer_for(config.init)
    checked = trainer.check(source, config, target)  # before the run folder: a bad start leaves nothing
    check_data_target(config.data, target)
    check_tree_budget(config, target)
    rank, size = world()
    if config.batch_size % size or config.tree_anchor_count % size:
        raise ValueError(f"batch_size and the tree anchors per step ({config.tree_anchor_count}) must be divisible "
                         f"by the {size} processes")
    with held_run_folder(Path(out), owner=rank == 0) as folder:
        if rank == 0:
            _prepare_folder(config, folder)
        barrier()  # the folder is checked before any rank reads its checkpoint
        return _run(config, folder, target, lambda anchors: trainer.start(checked, config, anchors, target),
                    lambda saved: trainer.load(saved, config, target), on_step)


def _prepare_folder(config: TrainConfig, out: Path) -> None:
    """Record the config in a new run folder; refuse to resume one that holds another config."""
    saved = out / "config.json"
    if saved.is_file():
        old = TrainConfig.from_dict(read_saved_config(out)).to_dict()  # keys added since: defaults
        if old != config.to_dict():
            changed = sorted(k for k in set(old) | set(config.to_dict()) if old.get(k) != config.to_dict().get(k))
            raise ValueError(f"{out} holds a run with another config (differs in {changed}); "
                             "resume with the same config or use a new folder")
    else:
        write_json(saved, config.to_dict(), overwrite=True)


def _run(config: TrainConfig, out: Path, target: Target, start: Callable[[AnchorSet], TrainingAdapter],
         load: Callable[[Path], TrainingAdapter], on_step: Callable[[dict], None] | None) -> Path:
    """The steps, in a locked and checked run folder: from its newest checkpoint when it has one."""
    rank, size = world()
    torch.set_num_threads(config.threads)
    clock = RunClock.begin(out)
    writes = rank == 0
    if writes:
        write_status(out, RunState.STARTING, clock.start_step, config.steps, clock)
    anchors = AnchorSet(config.data, config.context, config.depth, config.max_shards)
    checkpoint = latest_checkpoint(out)
    adapter = load(checkpoint) if checkpoint is not None else start(anchors)
    state = load_trainer_state(checkpoint) if checkpoint is not None else {"step": 0, "optimizer": None}
    start_step = int(state["step"])
    params = [p for p in adapter.network.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    if state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    model = DistributedDataParallel(adapter.network, broadcast_buffers=False) if size > 1 else adapter.network
    pool, pool_rows = tree_pool(config, anchors, target)
    if writes:
        _trim_metrics(out / "metrics.jsonl", start_step)
        print(f"anchors {len(anchors)} from {anchors.tokens} tokens; steps {start_step}->{config.steps}; "
              f"world {size}; tree pool {0 if pool_rows is None else len(pool_rows)} anchors")
    bar = tqdm(range(start_step, config.steps), initial=start_step, total=config.steps, desc="train",
               disable=not writes)
    device = target.device

    record = how_made(config, anchors)

    def save(_, folder: Path) -> Path:
        saved = adapter.save(folder)
        write_json(Path(folder) / HOW_MADE, record, overwrite=True)  # the drafter says what it was trained on
        return saved

    clock.steps_begin()
    with reported_end(out, config.steps, clock, writes=writes):
        for step in bar:
            distill, tree, stats, batch, logq = step_terms(adapter, model, config, step, anchors, pool, pool_rows,
                                                           rank, size, device)
            loss, values = distill, {"distill": distill.item()}
            if tree is not None:
                loss = loss + config.tree_lambda * tree
                values.update(tree=tree.item(), **stats)
            values = mean_over_ranks({**values, "loss": loss.item()})  # the global batch's, not rank 0's share
            if not math.isfinite(values["loss"]):
                _fail(step, values["loss"], batch, logq, anchors)
            optimizer_step(optimizer, params, loss, learning_rate(config, step), config.grad_clip)
            metrics = {"step": step + 1, "lr": learning_rate(config, step), **values}
            if config.probe_every and (step + 1) % config.probe_every == 0:  # the weights just saved as step + 1
                metrics.update(gradient_probe(adapter, config, step + 1, anchors, pool, pool_rows, rank, size, device))
            if writes:
                append_metrics(out, metrics)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", **({"E": f"{metrics['tree_E']:.2f}"}
                                                                 if "tree_E" in metrics else {}))
                if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                    save_checkpoint(out, adapter.network, optimizer, step + 1, save=save,
                                    keep_older=config.keep_checkpoints)
                write_status(out, RunState.RUNNING, step + 1, config.steps, clock)
            if on_step is not None:
                on_step(metrics)
        final = save_final(out, adapter.network, save) if writes else out / "drafter"
        barrier()  # every rank returns once the drafter is on disk
        return final


def _slice_batch(batch: AnchorBatch, start: int, end: int) -> AnchorBatch:
    return replace(batch, **{f.name: getattr(batch, f.name)[start:end] for f in fields(batch)})


def _fail(step: int, loss: float, batch: AnchorBatch, logq: torch.Tensor, anchors: AnchorSet) -> None:
    """End a run whose loss is not finite, naming the step and the shards whose rows are (every rank's)."""
    bad = ~(torch.isfinite(batch.features).flatten(1).all(1) & torch.isfinite(logq.detach().cpu()).flatten(1).all(1))
    rows = batch.anchors[bad] if bad.any() else batch.anchors  # none alone: every shard of the batch is suspect
    names = sorted(set(gather([str(anchors.paths[s]) for s in rows[:, 0].tolist()])))
    raise TrainingFailed(f"step {step + 1}: the loss is {loss} (rows from {', '.join(names)}); the run stopped "
                         "as failed, its last checkpoint kept; check or rebuild that data")


def _trim_metrics(path: Path, step: int) -> None:
    """On resume, drop metric lines past the checkpoint (those steps run again)."""
    if not path.is_file():
        return
    keep = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    write_text_atomic(path, "".join(line + "\n" for line in keep))
