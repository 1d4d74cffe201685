"""The training loop: distillation, optionally + lambda * ExitTrain tree loss; single process or DDP.

Batches are drawn from a generator seeded by (seed, step), so a resumed or
distributed run sees exactly the batches of an uninterrupted single-process
run: rank r takes rows r, r+W, ... of each global batch, and DDP's gradient
average over equal-sized shares equals the global mean.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from tevcore.diskwrite import write_text_atomic
from tevcore.engine.builders import best_first
from tevcore.proposers.block_config import DEFAULT_LAYERS, BlockDrafterConfig, layer_shape_of
from tevcore.proposers.block import (
    BlockDrafter,
    check_growth,
    load_drafter,
    read_config,
)
from tevcore.proposers.target_record import target_record
from tevcore.engine.flow import target_flow
from tevcore.engine.sampling import seeded_torch_rng
from tevcore.target.loading import Target
from tevcore.train.anchors import AnchorBatch, AnchorSet
from tevcore.train.config import TrainConfig
from tevcore.train.data import check_data_target
from tevcore.train.dflash_train import is_dflash_init, train_dflash
from tevcore.train.losses import distill_loss, tree_objective
from tevcore.train.rundir import (
    RunClock,
    append_metrics,
    held_run_folder,
    latest_checkpoint,
    load_checkpoint,
    reported_end,
    save_checkpoint,
    save_final,
    write_json_atomic,
    write_status,
)
from tevcore.train.treescore import PooledContexts


def _dist() -> tuple[int, int]:
    """(rank, world size); initialises the process group when launched by torchrun or spawn."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def new_drafter(config: TrainConfig, anchors: AnchorSet, target: Target) -> BlockDrafter:
    """A fresh drafter whose draft vocabulary is the tokens with the most teacher mass in the data."""
    vocab = min(config.draft_vocab, target.vocab_size)
    draft_ids = anchors.target_mass(target.vocab_size).topk(vocab).indices.sort().values
    heads, ffn = layer_shape_of(target)
    shape = BlockDrafterConfig(
        target_vocab_size=target.vocab_size, target_hidden_size=int(target.model.config.hidden_size),
        draft_vocab_size=vocab, hidden_layers=tuple(anchors.layers), context=config.context, depth=config.depth,
        layers=config.layers or DEFAULT_LAYERS, heads=config.heads or heads, ffn=config.ffn or ffn, dropout=config.dropout,
        target=target_record(target, tuple(anchors.layers)))
    with seeded_torch_rng(config.seed):  # the initial weights, from the seed alone
        drafter = BlockDrafter(shape, draft_ids)
    return drafter.to(target.device).attach(target)


def _vocab_map(drafter: BlockDrafter) -> torch.Tensor:
    index = torch.full((drafter.config.target_vocab_size,), -1, dtype=torch.long)
    index[drafter.draft_ids.cpu()] = torch.arange(drafter.config.draft_vocab_size)
    return index


def _step_rows(config: TrainConfig, step: int, anchors: AnchorSet, pool_rows: torch.Tensor | None,
               rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's distillation rows, tree rows, and which distillation rows get their depth-1 token."""
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
    rows = torch.randint(len(anchors), (config.batch_size,), generator=generator)
    tree_rows = torch.zeros(0, dtype=torch.long)
    if pool_rows is not None and config.tree_anchors:
        tree_rows = pool_rows[torch.randint(len(pool_rows), (config.tree_anchors,), generator=generator)]
    known = torch.zeros(config.batch_size, dtype=torch.bool)
    if config.known_prob:
        known = torch.rand(config.batch_size, generator=generator) < config.known_prob
    return rows[rank::world], tree_rows[rank::world], known[rank::world]


def _known_inputs(batch: AnchorBatch, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 1) depth-1 tokens given to the drafter (-1 = not given), and teacher probs without the given depth.

    Rows past the end of their sequence have no depth-1 token to give and stay unconditioned.
    """
    given = batch.next_tokens[:, :1].where(known[:, None], torch.full_like(batch.next_tokens[:, :1], -1))
    probs = batch.teacher_probs.clone()
    probs[:, 0] *= (given < 0).float()
    return given, probs


def _tree_pool(config: TrainConfig, anchors: AnchorSet, target: Target) -> tuple[PooledContexts, torch.Tensor]:
    """A seeded pool of whole sequences for tree scoring, and the anchor rows that fall inside it."""
    keys = torch.unique(anchors.index[:, :2], dim=0)
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(config.seed))[:config.tree_pool]
    chosen = {tuple(keys[i].tolist()) for i in order}
    fits = target.max_context - config.tree_budget - 1
    sequences = {k: anchors.sequence(*k) for k in sorted(chosen)}
    sequences = {k: ids[:fits] for k, ids in sequences.items()}
    inside = [(tuple(r[:2]) in chosen) and anchors.full_position(*r) < len(sequences[tuple(r[:2])])
              for r in anchors.index.tolist()]
    rows = torch.nonzero(torch.tensor(inside)).flatten()
    return PooledContexts(target, sequences), rows


def _tree_terms(drafter: BlockDrafter, logq: torch.Tensor, batch: AnchorBatch, anchors: AnchorSet,
                pool: PooledContexts, config: TrainConfig, vocab_map: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean tree loss over this rank's tree anchors, and diagnostics of the trees it built.

    The trees come from an eval-mode forward (no dropout): the trees the drafter really builds.
    """
    device = logq.device
    drafter.eval()
    with torch.no_grad():
        build_logq = drafter(batch.features.to(device), batch.context_mask.to(device), batch.roots.to(device))
    drafter.train()
    losses, stats = [], {"mean_P": 0.0, "root_exit": 0.0, "tree_E": 0.0}
    for i, (s, q, t) in enumerate(batch.anchors.tolist()):
        full = drafter.full_vocab(build_logq[i].float().cpu())
        tree = best_first(int(batch.roots[i]), full, config.tree_budget)
        logits = pool.score((s, q), anchors.full_position(s, q, t), tree)
        losses.append(tree_objective(logq[i], tree, logits, config.tree_weight, config.tree_temperature,
                                     config.tree_alpha, vocab_map))
        flow = target_flow(tree, logits, config.tree_temperature)
        stats["mean_P"] += float(flow.path_prob[1:].mean()) if tree.size else 0.0
        stats["root_exit"] += float(flow.exit_mass[0])
        stats["tree_E"] += flow.expected_length
    n = max(1, len(losses))
    return torch.stack(losses).mean(), {k: v / n for k, v in stats.items()}


def optimizer_step(optimizer: torch.optim.Optimizer, params: list, loss: torch.Tensor, lr: float,
                   grad_clip: float | None) -> float:
    """One step at learning rate `lr`, gradients clipped to `grad_clip` where set; returns the loss."""
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
    if config.init and config.layers is not None and not config.init.startswith("dflash:"):  # before the run folder
        check_growth(read_config(Path(config.init)).layers, config.layers)
    check_data_target(config.data, target)
    if is_dflash_init(config):
        return train_dflash(config, out, target)
    rank, world = _dist()
    if config.batch_size % world or config.tree_anchors % world:
        raise ValueError(f"batch_size and tree_anchors must be divisible by the {world} processes")
    with held_run_folder(Path(out), owner=rank == 0) as folder:
        return _train_locked(config, folder, target, rank, world, on_step)


def _prepare_folder(config: TrainConfig, out: Path) -> None:
    saved = out / "config.json"
    if saved.is_file():
        old = TrainConfig.from_dict(json.loads(saved.read_text())).to_dict()  # keys added since: defaults
        if old != config.to_dict():
            changed = sorted(k for k in set(old) | set(config.to_dict()) if old.get(k) != config.to_dict().get(k))
            raise ValueError(f"{out} holds a run with another config (differs in {changed}); "
                             "resume with the same config or use a new folder")
    else:
        write_json_atomic(saved, config.to_dict())


def _train_locked(config: TrainConfig, out: Path, target: Target, rank: int, world: int,
                  on_step: Callable[[dict], None] | None) -> Path:
    torch.set_num_threads(config.threads)
    clock = RunClock.begin(out)
    if rank == 0:
        _prepare_folder(config, out)
        write_status(out, "starting", clock.start_step, config.steps, clock)
    if world > 1:
        dist.barrier()
    anchors = AnchorSet(config.data, config.context, config.depth, config.max_shards)
    checkpoint = latest_checkpoint(out)
    start_step, opt_state = 0, None
    if checkpoint is not None:
        drafter, state = load_checkpoint(checkpoint, target)
        start_step, opt_state = int(state["step"]), state["optimizer"]
    elif config.init:
        drafter = load_drafter(Path(config.init), target)
        if config.layers is not None:
            drafter.grow_encoder(config.layers)
    else:
        drafter = new_drafter(config, anchors, target)
    if (drafter.config.depth, drafter.config.context, drafter.config.hidden_layers) != (
            config.depth, config.context, anchors.layers):
        raise ValueError("the starting drafter's depth, context or hidden layers differ from the config and data")
    if config.known_prob:
        drafter.enable_known_slots(1)
    drafter.train()
    vocab_map = _vocab_map(drafter)
    params = [p for p in drafter.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    if opt_state is not None:
        optimizer.load_state_dict(opt_state)
    model = DistributedDataParallel(drafter, broadcast_buffers=False) if world > 1 else drafter
    pool, pool_rows = (None, None)
    if config.tree_anchors:
        pool, pool_rows = _tree_pool(config, anchors, target)
    if rank == 0:
        _trim_metrics(out / "metrics.jsonl", start_step)
        print(f"anchors {len(anchors)} from {anchors.tokens} tokens; steps {start_step}->{config.steps}; "
              f"world {world}; tree pool {0 if pool_rows is None else len(pool_rows)} anchors")
    bar = tqdm(range(start_step, config.steps), initial=start_step, total=config.steps, desc="train",
               disable=rank != 0)
    device = target.device
    clock.steps_begin()
    with reported_end(out, config.steps, clock, writes=rank == 0):
        for step in bar:
            rows, tree_rows, known = _step_rows(config, step, anchors, pool_rows, rank, world)
            batch = anchors.batch(torch.cat([rows, tree_rows]), vocab_map)
            n = len(rows)
            teacher_probs, given = batch.teacher_probs, None
            if drafter.config.known_slots:  # always given (maybe all -1): DDP expects every parameter to take part
                given, teacher_probs = _known_inputs(batch, torch.cat([known, torch.zeros(len(tree_rows), dtype=torch.bool)]))
                given = given.to(device)
            with seeded_torch_rng(config.seed * 1_000_003 + step * 101 + rank, device):  # dropout: same masks after a resume
                logq = model(batch.features.to(device), batch.context_mask.to(device), batch.roots.to(device),
                             known=given)
            distill = distill_loss(logq[:n], batch.teacher_ids[:n].to(device), teacher_probs[:n].to(device))
            loss, metrics = distill, {"step": step + 1, "lr": learning_rate(config, step), "distill": distill.item()}
            if len(tree_rows):
                tree_batch = _slice_batch(batch, n)
                tree, stats = _tree_terms(drafter, logq[n:], tree_batch, anchors, pool, config, vocab_map)
                loss = loss + config.tree_lambda * tree
                metrics.update(tree=tree.item(), **stats)
            metrics["loss"] = optimizer_step(optimizer, params, loss, metrics["lr"], config.grad_clip)
            if rank == 0:
                append_metrics(out, metrics)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}", **({"E": f"{metrics['tree_E']:.2f}"}
                                                                 if "tree_E" in metrics else {}))
                if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                    save_checkpoint(out, drafter, optimizer, step + 1)
                write_status(out, "running", step + 1, config.steps, clock)
            if on_step is not None:
                on_step(metrics)
        return save_final(out, drafter) if rank == 0 else out / "drafter"


def _slice_batch(batch: AnchorBatch, start: int) -> AnchorBatch:
    return replace(batch, **{f.name: getattr(batch, f.name)[start:] for f in fields(batch)})


def _trim_metrics(path: Path, step: int) -> None:
    """On resume, drop metric lines past the checkpoint (those steps run again)."""
    if not path.is_file():
        return
    keep = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    write_text_atomic(path, "".join(line + "\n" for line in keep))
