"""ExitTrain vs plain distillation: same data, same starting drafter, same steps, same batches.

Every variant sees the same distillation batches in the same order; the
ExitTrain variants add the tree term on the same tree anchors, and plain
distillation builds no trees (they would not change its loss, only its time).
Without --init every variant starts from the same fresh drafter (same seed,
same draft vocabulary), the setting of a from-scratch comparison. With
`--init dflash:<folder>` every variant fine-tunes that published DFlash
drafter (saved back in its format) and is evaluated through the DFlash
proposer, on the target the shared --target flags name.
Each trained drafter is then evaluated at the given budgets on held-out
prompts, each in its own decode (E and the measured block length), and
every variant after the first is scored against the first at the same round
starts (`paired_coverage`), which gives their difference without the chance
of each decode sampling its own text. Tables go to stdout and everything to
compare.json.

    python -m tevcore compare runs/compare --data runs/data-default --init runs/main/drafter
    python -m tevcore compare runs/scratch --data runs/data-default --steps 3000 --lr 1e-3 --warmup 50
    python -m tevcore compare runs/dflash --target Qwen/Qwen3-4B --data runs/data-qwen3 --init dflash:z-lab/Qwen3-4B-DFlash-b16 \
        --variants distill,exit-F-0.1
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from tevcore.config import SAMPLING_TEMPERATURE, DecodeConfig
from tevcore.flags import add_target_arguments, count_at_least_one, seed_value, target_from_args, thread_count
from tevcore.parsing import comma_list
from tevcore.proposers.flags import add_proposer_arguments, proposer_from_args, proposer_options
from tevcore.proposers.registry import trainable_specs, trainer_for
from tevcore.results import Column, ResultRecord, RunMeta, format_table, write_result
from tevcore.train.config import TrainConfig
from tevcore.train.losses import ANCHOR_LOSSES, TREE_NORMS

VARIANTS = {
    "distill": {"tree_lambda": 0.0},
    "exit-P-0.1": {"tree_lambda": 0.1, "tree_weight": "path"},
    "exit-X-0.1": {"tree_lambda": 0.1, "tree_weight": "exit"},
    "exit-P-1.0": {"tree_lambda": 1.0, "tree_weight": "path"},
    "exit-F-0.1": {"tree_lambda": 0.1, "tree_weight": "flow"},
    "exit-F-1.0": {"tree_lambda": 1.0, "tree_weight": "flow"},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", required=True)
    add_target_arguments(parser)
    parser.add_argument("--init", default=None,
                        help=f"the common starting drafter: {trainable_specs()} (default: a fresh block drafter, "
                             "trained from scratch)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated from {', '.join(VARIANTS)}; 'start' also evaluates the starting drafter")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--tree-anchors", type=int, default=8, help="extra anchors per step that get a tree")
    parser.add_argument("--tree-share", type=float, default=0.0,
                        help="instead of --tree-anchors: this share of each batch's anchors gets a tree (the public "
                             "recipe: 1); every variant then draws its batches from the tree pool, so all see the "
                             "same batches")
    parser.add_argument("--tree-pool", type=int, default=16)
    parser.add_argument("--tree-budget", type=int, default=TrainConfig.tree_budget,
                        help="nodes of the trees built while training")
    parser.add_argument("--tree-norm", choices=TREE_NORMS, default=TrainConfig.tree_norm,
                        help="'anchor': each anchor's tree term sums over its nodes; 'node': divided by their number")
    parser.add_argument("--anchor-loss", choices=ANCHOR_LOSSES, default=TrainConfig.anchor_loss,
                        help="'soft': distil the target's top-k rows; 'hard': one-hot CE on its greedy token")
    parser.add_argument("--tree-alpha", type=float, default=TrainConfig.tree_alpha,
                        help="floor of each target edge probability in the path weights")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--warmup", type=int, default=5, help="warmup steps (at most --steps)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="encoder dropout (default: the starting drafter's; 0 from scratch)")
    parser.add_argument("--seed", type=seed_value, default=TrainConfig.seed)
    parser.add_argument("--budgets", default="8,16")
    parser.add_argument("--temperature", type=float, default=SAMPLING_TEMPERATURE)
    parser.add_argument("--sets", default="mt-bench,humaneval,gsm8k")
    parser.add_argument("--per-set", type=count_at_least_one, default=4)
    parser.add_argument("--max-new-tokens", type=count_at_least_one, default=48)
    parser.add_argument("--threads", type=thread_count, default=1)
    add_proposer_arguments(parser, spec=False)


def run(args: argparse.Namespace) -> int:
    from tevcore.train.eval import cells_to_json, eval_prompts, evaluate, format_paired, paired_coverage
    from tevcore.train.loop import train

    torch.set_num_threads(args.threads)
    names = variant_names(args.variants)
    if args.init is None and "start" in names:
        raise ValueError("the 'start' variant needs --init (there is no starting drafter to evaluate)")
    options = proposer_options(args)
    kind, trainer, _ = trainer_for(args.init)
    if args.dropout is not None and "dropout" not in trainer.shape_fields:
        raise ValueError(f"--dropout applies to block drafters, not to a {kind.name} drafter")
    budgets = comma_list(args.budgets, int, "budgets")
    if min(budgets) < 1:
        raise ValueError(f"--budgets must be integers >= 1, got {args.budgets!r}")
    DecodeConfig(temperature=args.temperature)
    prompts = eval_prompts(tuple(comma_list(args.sets, str, "prompt sets")), args.per_set)
    shape = _shape(args.init, args.data)
    configs = {name: variant_config(args, name, shape) for name in names if name != "start"}  # checked up front
    target = target_from_args(args)
    meta = RunMeta.now(args.command_line, device=str(target.device), seed=args.seed)
    results, proposers = {}, {}
    for name in names:
        start = time.time()
        if name == "start":
            spec, trained = args.init, None
        else:
            spec = str(train(configs[name], args.out / name, target))
            trained = [json.loads(line) for line in (args.out / name / "metrics.jsonl").read_text().splitlines()]
        proposers[name] = proposer_from_args(args, target, replace(options, name=name), spec)
        cells = evaluate(target, proposers[name], prompts, args.temperature, budgets, args.max_new_tokens)
        tail = [m for m in (trained or [])[-10:] if "tree_E" in m]  # plain distillation builds no trees
        results[name] = {"cells": cells_to_json(cells), "seconds": round(time.time() - start, 1),
                         "train_tree_E_last10": (sum(m["tree_E"] for m in tail) / len(tail)) if tail else None}
        _write(args, meta, prompts, results, done=len(results) == len(names) and len(names) == 1)
        print(_table(results, budgets), flush=True)
    first, *others = proposers
    for name in others:
        paired = paired_coverage(target, proposers[first], proposers[name], prompts, args.temperature, budgets,
                                 args.max_new_tokens)
        results[name]["paired_vs_" + first] = cells_to_json(paired)
        _write(args, meta, prompts, results, done=name == others[-1])
        print(format_paired(paired), flush=True)
    return 0


def variant_names(text: str) -> list[str]:
    """The --variants list, every name checked before anything trains: known, and each once."""
    names = comma_list(text, str, "variants")
    for name in names:
        if name not in VARIANTS and name != "start":
            raise ValueError(f"--variants: unknown variant {name!r}; choose from {', '.join(VARIANTS)} or 'start'")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"--variants names {', '.join(repeated)} more than once")
    return names


def variant_config(args: argparse.Namespace, name: str, shape: dict) -> TrainConfig:
    """The training config of one variant; plain distillation leaves the tree settings at their defaults.

    It builds no trees, so one distillation run (resumed, not retrained) serves
    comparisons that differ only in their tree settings. With --tree-share
    every variant draws its batches from the tree pool, so plain distillation
    keeps the pool's settings (its budget sets which positions fit) to see the
    same batches.
    """
    dropout = shape.get("dropout", TrainConfig.dropout) if args.dropout is None else args.dropout
    pool = {"tree_pool": args.tree_pool, "tree_budget": args.tree_budget}
    if args.tree_share:
        trees = {**pool, "tree_share": args.tree_share, "tree_anchors": 0}
    else:
        trees = {**pool, "tree_anchors": args.tree_anchors} if VARIANTS[name]["tree_lambda"] else {}
    if VARIANTS[name]["tree_lambda"]:
        trees.update(tree_alpha=args.tree_alpha, tree_norm=args.tree_norm)
    return TrainConfig(
        data=args.data, target=args.target, init=args.init, **{**shape, "dropout": dropout}, steps=args.steps,
        batch_size=args.batch_size, lr=args.lr, warmup=min(args.warmup, args.steps), seed=args.seed,
        checkpoint_every=min(500, args.steps), threads=args.threads, anchor_loss=args.anchor_loss, **trees,
        **VARIANTS[name])


def _shape(init: str | None, data: str | None = None) -> dict:
    """The TrainConfig shape fields of the starting drafter (its kind's `shape`), or the defaults of a fresh one.

    Fields the starting kind does not fix keep their defaults; a kind that
    fixes no context (a DFlash drafter reads the whole context) takes the
    set's own. A kind without "dropout" among them has no dropout to set.
    """
    from tevcore.train.data import read_manifests

    defaults = TrainConfig(data="-")
    fresh = {k: getattr(defaults, k) for k in ("depth", "context", "layers", "heads", "ffn", "dropout", "draft_vocab")}
    if init is None:
        return fresh
    _, trainer, source = trainer_for(init)
    fixed = trainer.shape(source)
    if "context" not in fixed and data is not None:
        fixed["context"] = int(read_manifests(data)[0]["config"]["context"])
    return {**{k: v for k, v in fresh.items() if k != "dropout"}, **fixed}


def _write(args: argparse.Namespace, meta: RunMeta, prompts: list, results: dict, done: bool) -> None:
    """compare.json, rewritten after each variant (marked partial until the last paired comparison): the CLI
    refused an existing one at the start (unless --force). A row per (variant, budget); the paired cells of
    each later variant against the first go in the summary."""
    rows = [{"variant": name, **cell, "seconds": r["seconds"], "train_tree_E_last10": r["train_tree_E_last10"]}
            for name, r in results.items() for cell in r["cells"]]
    paired = {name: r[key] for name, r in results.items() for key in r if key.startswith("paired_vs_")}
    settings = {**{k: str(v) for k, v in vars(args).items()}, "prompts": len(prompts)}
    record = ResultRecord("compare", meta, rows, settings=settings, summary={"paired_vs_first": paired},
                          partial=None if done else f"{len(results)} variants evaluated, the run goes on")
    write_result(args.out / "compare.json", record, force=True)


def _table(results: dict, budgets: list[int]) -> str:
    columns = [Column("variant", "variant")]
    for i, b in enumerate(budgets):
        columns += [Column(f"E B={b}", lambda r, i=i: r["cells"][i]["expected_length"], ".3f"),
                    Column(f"L B={b}", lambda r, i=i: r["cells"][i]["mean_emitted"], ".3f")]
    columns.append(Column("train E", "train_tree_E_last10", ".3f"))
    return format_table([{"variant": name, **r} for name, r in results.items()], columns)
