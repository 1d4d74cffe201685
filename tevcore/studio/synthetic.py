"""Made-up rounds on a random toy target (no model): examples for the pages and their tests."""

from __future__ import annotations

import torch

from tevcore.config import SAMPLING_TEMPERATURE
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import target_flow
from tevcore.engine.records import RoundRecord, StageTimings
from tevcore.engine.sampling import make_generator
from tevcore.verify.verifiers import get_verifier


def synthetic_record(budget: int = 16, seed: int = 0, vocab: int = 40, depth: int = 6,
                     temperature: float = SAMPLING_TEMPERATURE, index: int = 0, builder: str = "best_first",
                     verifier: str = "tev") -> tuple[RoundRecord, torch.Tensor]:
    """A made-up round on a random toy target: the tree, its flow and node logits.

    The tree comes from the engine's builder (best-first unless named; a
    sampled one draws with the seed's generator) on random draft rows and the
    verdict from the engine's verifier on the round's flow; only the stage
    timings are made up (nothing is timed on a toy target).
    """
    gen = torch.Generator().manual_seed(seed)
    depth_logq = torch.log_softmax(3.0 * torch.randn(depth, vocab, generator=gen), -1)
    tree = parse_builder(builder, budget)(0, depth_logq, budget, temperature, make_generator(seed))
    logits = 3.0 * torch.randn(tree.num_nodes, vocab, generator=gen)
    # make the target like the tree a little, so flows look like real ones
    if tree.draws is not None:  # a drafter that knows its target: each drawing node's row leans on its proposal q
        for node in range(tree.num_nodes):
            if int(tree.draws.row_of[node]) >= 0:
                logits[node] = tree.draws.proposal(node).log().clamp_min(-30.0).float() + logits[node] / 3.0
    else:
        logits[tree.parents[1:], tree.tokens[1:]] += 2.5
    flow = target_flow(tree, logits, temperature)
    verdict = get_verifier(verifier)(tree, logits, temperature, make_generator(seed), flow=flow)
    path, exit_node, bonus = list(verdict.path), int(verdict.exit_node), int(verdict.bonus_token)
    texts = [f"t{int(t)}" for t in tree.tokens.tolist()]
    missing = [[f"t{int(t)}" for t in row] for row in flow.missing_tokens.tolist()]
    emitted = tree.tokens[path[1:]].tolist() + [bonus]
    record = RoundRecord(
        index=index, proposer="synthetic", builder=builder, budget=budget, temperature=temperature,
        context_length=10, tree=tree, flow=flow, token_texts=texts, missing_texts=missing, verifier=verifier,
        path=path, exit_node=exit_node, bonus_token=bonus, bonus_text=f"t{bonus}", emitted_tokens=emitted,
        emitted_text="".join(f" t{t}" for t in emitted),
        timings=StageTimings(draft=0.004, tree_build=0.001, tree_forward=0.02, flow=0.001, verify_decision=0.0004,
                             commit=0.001))
    return record, logits


def synthetic_records(rounds: int = 5, budget: int = 16, seed: int = 0, builder: str = "best_first",
                      verifier: str = "tev") -> list[RoundRecord]:
    return [synthetic_record(budget=budget, seed=seed + i, index=i, builder=builder, verifier=verifier)[0]
            for i in range(rounds)]
