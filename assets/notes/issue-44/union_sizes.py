"""How much of the drafters' trees the one-pass comparison shares: at every position of the same decode that
`eval-drafter --compare` walks, the nodes of the union tree the target scores (`tree.union`) against the
nodes of the separate trees (what one forward per tree would score). Nothing is verified; each position's
root is scored alone so the decode goes on as in the pass.

    HF_HUB_OFFLINE=1 python assets/notes/issue-44/union_sizes.py assets/drafter runs/abl-speed/soft-0/checkpoint-8 ...
"""

from __future__ import annotations

import argparse
from statistics import mean

import torch

from tevcore.engine.builders import best_first
from tevcore.engine.tree import union
from tevcore.proposers.registry import resolve_proposer
from tevcore.target.loading import load_target
from tevcore.target.walker import score_root
from tevcore.train.eval import eval_prompts, walk_decode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("drafters", nargs="+")
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--sets", default="mt-bench,humaneval,gsm8k")
    parser.add_argument("--per-set", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    target = load_target(dtype="float32", device="cpu")
    proposers = [resolve_proposer(spec, target, name=spec) for spec in args.drafters]
    sizes: list[tuple[int, int]] = []  # (union nodes, sum of the trees' nodes) per position

    def measure(index, session):
        trees = [best_first(session.root_token, p.propose(session), args.budget) for p in proposers]
        sizes.append((union(trees)[0].size, sum(tree.size for tree in trees)))
        return score_root(session)

    walk_decode(target, eval_prompts(tuple(args.sets.split(",")), args.per_set), args.temperature,
                args.max_new_tokens, 0, max(p.depth for p in proposers), measure,
                tuple(sorted({layer for p in proposers for layer in p.hidden_layers})), progress=False)
    print(f"{len(proposers)} drafters, budget {args.budget}, T = {args.temperature:g}, {len(sizes)} positions: "
          f"union {mean(u for u, _ in sizes):.1f} nodes on average (min {min(u for u, _ in sizes)}, max "
          f"{max(u for u, _ in sizes)}) against {mean(s for _, s in sizes):.1f} in the separate trees "
          f"({mean(u / s for u, s in sizes):.3f} of them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
