"""ExitTrain vs plain distillation: same data, same starting drafter, same steps, same batches.

Every variant computes the same training trees (lambda = 0 only drops the
tree term from the loss), so the variants differ in nothing but the loss.
Each trained drafter is then evaluated at the given budgets on held-out
prompts, each in its own decode (E and the measured block length), and
every variant after the first is scored against the first at the same round
starts (`paired_coverage`), which gives their difference without the chance
of each decode sampling its own text. Tables go to stdout and everything to
compare.json.

    python -m tevcore.train.compare runs/compare --data runs/data-default --init runs/main/drafter
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from ..flags import comma_list
from .config import TrainConfig

VARIANTS = {
    "distill": {"tree_lambda": 0.0},
    "exit-P-0.1": {"tree_lambda": 0.1, "tree_weight": "path"},
    "exit-X-0.1": {"tree_lambda": 0.1, "tree_weight": "exit"},
    "exit-P-1.0": {"tree_lambda": 1.0, "tree_weight": "path"},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path)
    parser.add_argument("--data", required=True)
    parser.add_argument("--init", required=True, help="the common starting drafter folder")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated from {', '.join(VARIANTS)}; 'start' also evaluates the starting drafter")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--tree-anchors", type=int, default=8)
    parser.add_argument("--tree-pool", type=int, default=16)
    parser.add_argument("--tree-alpha", type=float, default=TrainConfig.tree_alpha,
                        help="floor of each target edge probability in the path weights")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--budgets", default="8,16")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--sets", default="mt-bench,humaneval,gsm8k")
    parser.add_argument("--per-set", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=1)


def run(args: argparse.Namespace) -> int:
    from ..drafters.block import BlockProposer, load_drafter, read_config
    from ..models import load_target
    from .eval import cells_to_json, eval_prompts, evaluate, format_paired, paired_coverage
    from .loop import train

    torch.set_num_threads(args.threads)
    target = load_target("default")
    shape = read_config(Path(args.init))
    prompts = eval_prompts(tuple(comma_list(args.sets, str, "prompt sets")), args.per_set)
    budgets = comma_list(args.budgets, int, "budgets")
    results, proposers = {}, {}
    for name in comma_list(args.variants, str, "variants"):
        start = time.time()
        if name == "start":
            folder, trained = Path(args.init), None
        else:
            config = TrainConfig(
                data=args.data, init=args.init, depth=shape.depth, context=shape.context, layers=shape.layers,
                heads=shape.heads, ffn=shape.ffn, dropout=shape.dropout, draft_vocab=shape.draft_vocab_size, steps=args.steps,
                batch_size=args.batch_size, lr=args.lr, warmup=min(5, args.steps), tree_anchors=args.tree_anchors,
                tree_pool=args.tree_pool, tree_alpha=args.tree_alpha, checkpoint_every=args.steps,
                threads=args.threads, **VARIANTS[name])
            folder = train(config, args.out / name, target)
            trained = [json.loads(line) for line in (args.out / name / "metrics.jsonl").read_text().splitlines()]
        proposers[name] = BlockProposer(load_drafter(folder, target), name=name)
        cells = evaluate(target, proposers[name], prompts, args.temperature, budgets, args.max_new_tokens)
        tail = trained[-10:] if trained else []
        results[name] = {"cells": cells_to_json(cells), "seconds": round(time.time() - start, 1),
                         "train_tree_E_last10": (sum(m["tree_E"] for m in tail) / len(tail)) if tail else None}
        _write(args, prompts, results)
        print(_table(results, budgets), flush=True)
    first, *others = proposers
    for name in others:
        paired = paired_coverage(target, proposers[first], proposers[name], prompts, args.temperature, budgets,
                                 args.max_new_tokens)
        results[name]["paired_vs_" + first] = cells_to_json(paired)
        _write(args, prompts, results)
        print(format_paired(paired), flush=True)
    return 0


def _write(args: argparse.Namespace, prompts: list, results: dict) -> None:
    (args.out / "compare.json").parent.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                       "prompts": len(prompts), "results": results}, indent=2))


def _table(results: dict, budgets: list[int]) -> str:
    head = f"{'variant':<12}" + "".join(f" {'E B=' + str(b):>8} {'L B=' + str(b):>8}" for b in budgets) + \
        f" {'train E':>8}"
    lines = [head]
    for name, r in results.items():
        row = f"{name:<12}"
        for cell in r["cells"]:
            row += f" {cell['expected_length']:>8.3f} {cell['block_length']:>8.3f}"
        train_e = r["train_tree_E_last10"]
        lines.append(row + (f" {train_e:>8.3f}" if train_e is not None else f" {'-':>8}"))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tevcore.train.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
