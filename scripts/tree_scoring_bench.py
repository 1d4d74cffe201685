"""ExitTrain's tree-scoring stage: a step's trees scored one forward each (`PooledContexts.score`) against one
batched forward (`score_many`), interleaved A B A B on the same trees, median of the per-pair ratios.

    python scripts/tree_scoring_bench.py --data runs/data-greedy --trees 8 --budget 32 --repeats 6
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from tevcore.engine.builders import best_first
from tevcore.proposers.registry import trainer_for
from tevcore.target.loading import load_target
from tevcore.train.anchors import AnchorSet
from tevcore.train.config import TrainConfig
from tevcore.train.loop import pool_members, step_rows
from tevcore.train.treescore import PooledContexts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--init", default="assets/drafter")
    parser.add_argument("--trees", type=int, default=8)
    parser.add_argument("--budget", type=int, default=32)
    parser.add_argument("--pool", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target = load_target("default", device="cpu")
    config = TrainConfig(data=args.data, init=args.init, batch_size=args.trees, tree_share=1.0, tree_pool=args.pool,
                         tree_budget=args.budget, tree_lambda=0.1)
    _, trainer, source = trainer_for(config.init)
    anchors = AnchorSet(config.data, config.context, config.depth)
    adapter = trainer.load(source, config, target)
    sequences, rows = pool_members(config, anchors, target)
    pool = PooledContexts(target, sequences)
    one, many, ratios = [], [], []
    for repeat in range(args.repeats):
        picked, _, known = step_rows(config, repeat, anchors, rows, 0, 1)
        batch = anchors.batch(picked, adapter.vocab_map)
        logq, _ = adapter.rows(adapter.network, batch, anchors, known)
        built = adapter.tree_rows(batch, anchors, logq)
        items = [((s, q), anchors.full_position(s, q, t), best_first(int(batch.roots[i]), built[i], args.budget))
                 for i, (s, q, t) in enumerate(batch.anchors.tolist())]
        start = time.perf_counter()
        alone = [pool.score(*item) for item in items]
        middle = time.perf_counter()
        together = pool.score_many(items)
        end = time.perf_counter()
        gap = max(float((a - b).abs().max()) for a, b in zip(alone, together))
        one.append(middle - start)
        many.append(end - middle)
        ratios.append((middle - start) / (end - middle))
        print(f"repeat {repeat}: one by one {middle - start:.2f} s, batched {end - middle:.2f} s, "
              f"largest logit gap {gap:.2e}", flush=True)
    print(f"{args.trees} trees of {args.budget} nodes, {args.threads} thread(s): one by one median "
          f"{statistics.median(one):.2f} s, batched median {statistics.median(many):.2f} s, "
          f"median ratio {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
