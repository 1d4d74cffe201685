"""How long the heaviest turn of each room-capped service takes: the room's caps, one torch thread, the default
target and drafter. Prints a JSON record (and the machine's load average before and after, since other work on the
machine slows every figure).

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python scripts/room_turns.py [--trees 200]

Timed, one after another: a live generation of the room's new-token cap at its budget cap (the decoding loop);
the room's sampled trees at the prompt's context, each drawn by the drafter (`sampled:4,4,4`, trimmed to the
sampled budget cap) and scored by the target, as the verifier comparison's service draws them (each tree's rows
let go once every rule's verdicts and the ceilings are made: `tevcore.lab.context_rounds`); every rule over those
rounds at another seed than the draw's (each tree scored again); the room's verifier draws of every rule on the
largest of those trees (`tevcore.lab.simulate`). Also printed: the bytes the drawn rounds keep.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from tevcore.config import DecodeConfig
from tevcore.decoding.loop import prompt_ids, rounds
from tevcore.engine.builder_specs import parse_builder
from tevcore.lab.context_rounds import rounds_at_context
from tevcore.lab.simulate import simulate
from tevcore.proposers import resolve_proposer
from tevcore.room.limits import ROOM
from tevcore.target.loading import load_target
from tevcore.verify.registry import rules_for

PROMPT = "Write a long story about a lighthouse keeper who finds a map."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=ROOM.sampled_rounds, help="sampled trees (the room's cap)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    out: dict = {"load_average_start": os.getloadavg()}
    target = load_target("default")
    proposer = resolve_proposer("default", target)
    ids = prompt_ids(target, PROMPT, chat=True)
    began = time.perf_counter()
    made = list(rounds(target, proposer, ids, DecodeConfig(max_new_tokens=ROOM.new_tokens, budget=ROOM.budget,
                                                           temperature=1.0, seed=0)))
    out.update(generation_s=time.perf_counter() - began, generation_rounds=len(made),
               generation_tokens=sum(r.emitted for r in made))
    began = time.perf_counter()
    drawn = rounds_at_context(target, proposer, list(ids), parse_builder("sampled:4,4,4", ROOM.sampled_budget),
                              ROOM.sampled_budget, 1.0, args.trees, 0, keep_rows=False)
    out.update(sampled_trees_s=time.perf_counter() - began, sampled_trees=args.trees,
               sampled_tree_sizes=[min(t.size for t in drawn.trees), max(t.size for t in drawn.trees)],
               sampled_kept_mb=drawn.kept_bytes() / 2**20)
    began = time.perf_counter()
    drawn.verify(rules_for(drawn.builder), seed=1)
    out.update(rules_over_rounds_rescored_s=time.perf_counter() - began)
    largest = max(range(len(drawn.trees)), key=lambda i: drawn.trees[i].size)
    tree, logits = drawn.rounds[largest]
    per_rule = {}
    for name in rules_for(drawn.builder):
        began = time.perf_counter()
        simulate(name, tree, logits, 1.0, ROOM.draws, 0)
        per_rule[name] = time.perf_counter() - began
    out.update(draws_s=per_rule, draws_total_s=sum(per_rule.values()), draws_tree_size=tree.size,
               load_average_end=os.getloadavg())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
