"""Each tree design against its own ceiling, node by node: what the best exact verifier could accept there.

A node's acceptance is the probability that verification moves on to one
of its children, given that it reached the node. Its ceiling depends on how
the children came to be, never on the verifier:

- fixed children (best-first, top-k): the sum of p over their tokens (every
  optimal exact rule reaches it; tev does);
- a mixed node (fixed tokens F, k siblings drawn from q' = q without F):
  p(F) plus the optimal multi-draft acceptance of the k draws from q'
  against p; with one drawn sibling that is p(F) + sum_x min(p(x), q'(x)),
  which rrs's siblings-first order reaches on average over the draws;
- k i.i.d. or without-replacement draws from q: the optimal multi-draft
  acceptance, the largest probability, over every coupling of the target's
  token Y ~ p with the draws, that Y is one of them. A linear program over
  the couplings (`optimal_acceptance`) gives it: variables pi(S, y) for each
  set S of drawn tokens and target token y, rows summing to Pr(S), columns
  to p(y), maximising the mass on y in S. It is solved exactly on the top
  tokens of p and q (the rest of the vocabulary merged into one token, whose
  mass is reported as `tail`: the LP is exact where the tail is 0) for
  k <= MAX_LP_DRAWS; k = 1 is the closed form sum_x min(p(x), q(x)) on the
  whole vocabulary.

Beside each ceiling `reached` is the acceptance the verifier's own law gives
at that node of the realised tree (`laws.node_acceptance`): averaged over
fresh trees it is what the rule reaches there on average over the draws, so
the mean gap per depth says how far the rule is from its design's ceiling.
bench, rounds-at-context and the app call this module; none repeats its math.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
from scipy.optimize import linprog

from tevcore.engine.sampling import probs
from tevcore.engine.tree import DraftTree
from tevcore.results import Column, format_table
from tevcore.verify.laws import node_acceptance
from tevcore.verify.registry import rule_law

MAX_LP_DRAWS = 3  # the LP's outcome sets grow as support^k: exact for k <= 3 draws
LP_TOP = 6  # tokens of p and of q kept apart in the LP (the rest merged into one)


@dataclass(frozen=True)
class NodeCeiling:
    """One node of one tree: its `depth` (its children are at depth + 1), its `design` ('fixed', 'mixed', 'iid'
    or 'wor'), its `drawn` children count, the design's `ceiling` there (None where no LP is run), the rule's
    `reached` acceptance, and the merged `tail` mass of the LP (0 where exact)."""

    depth: int
    design: str
    drawn: int
    ceiling: float | None
    reached: float
    tail: float = 0.0


def _drawn_sets(q: np.ndarray, k: int, replace: bool) -> dict[frozenset[int], float]:
    """The law of the SET of tokens k draws from q make (i.i.d. or without replacement)."""
    law: dict[frozenset[int], float] = defaultdict(float)
    support = [t for t in range(q.size) if q[t] > 0]
    if replace:
        for tokens in itertools.product(support, repeat=k):
            law[frozenset(tokens)] += float(np.prod(q[list(tokens)]))
        return dict(law)
    k = min(k, len(support))
    for tokens in itertools.permutations(support, k):
        prob, left = 1.0, 1.0
        for t in tokens:
            prob, left = prob * q[t] / left, left - q[t]
        law[frozenset(tokens)] += prob
    return dict(law)


def coupling_acceptance(p: np.ndarray, sets: dict[frozenset[int], float]) -> float:
    """max over couplings of Y ~ p with a drawn set S ~ `sets` of Pr(Y in S): the transport LP."""
    outcomes = list(sets)
    n_sets, vocab = len(outcomes), p.size
    gain = np.array([[-1.0 if y in s else 0.0 for y in range(vocab)] for s in outcomes]).ravel()
    rows = np.zeros((n_sets + vocab, n_sets * vocab))
    for i in range(n_sets):
        rows[i, i * vocab:(i + 1) * vocab] = 1.0
    for y in range(vocab):
        rows[n_sets + y, y::vocab] = 1.0
    masses = np.array([sets[s] for s in outcomes])
    bounds = np.concatenate([masses / masses.sum(), p / p.sum()])
    found = linprog(gain, A_eq=rows[:-1], b_eq=bounds[:-1], bounds=(0, None), method="highs")
    if not found.success:
        raise ValueError(f"the coupling LP failed: {found.message}")
    return float(-found.fun)


def optimal_acceptance(p: torch.Tensor, q: torch.Tensor, drawn: int, mode: str,
                       fixed: Iterable[int] = ()) -> tuple[float, float]:
    """(ceiling, tail): the best acceptance of a node whose `fixed` tokens are always tried and whose `drawn`
    siblings are drawn from q without them (renormalised), i.i.d. (`mode` 'iid') or without replacement."""
    p, q = p.double().cpu(), q.double().cpu()
    fixed = sorted(set(int(t) for t in fixed))
    p_fixed = float(p[fixed].sum()) if fixed else 0.0
    rest = q.clone()
    rest[fixed] = 0.0
    if drawn == 0 or float(rest.sum()) <= 0:
        return p_fixed, 0.0
    rest = rest / rest.sum()
    if drawn == 1:
        return p_fixed + float(torch.minimum(p, rest).sum()), 0.0  # rest is 0 on the fixed tokens
    if drawn > MAX_LP_DRAWS:
        raise ValueError(f"the coupling LP is run for at most {MAX_LP_DRAWS} draws, not {drawn}")
    keep = sorted(set(fixed) | set(torch.topk(p, min(LP_TOP, p.numel())).indices.tolist())
                  | set(torch.topk(rest, min(LP_TOP, rest.numel())).indices.tolist()))
    small_p, small_q = p[keep].numpy(), rest[keep].numpy()
    tail_p = tail_q = 0.0
    if len(keep) < p.numel():  # the rest of the vocabulary as one token
        tail_p, tail_q = max(1.0 - float(small_p.sum()), 0.0), max(1.0 - float(small_q.sum()), 0.0)
        small_p, small_q = np.append(small_p, tail_p), np.append(small_q, tail_q)
    sets = _drawn_sets(small_q, drawn, mode == "iid")
    fixed_at = {keep.index(t) for t in fixed}
    accepted = {s | fixed_at: mass for s, mass in sets.items()} if fixed_at else sets
    merged: dict[frozenset[int], float] = defaultdict(float)
    for s, mass in accepted.items():
        merged[frozenset(s)] += mass
    return coupling_acceptance(small_p, dict(merged)), max(tail_p, tail_q)


def node_ceilings(tree: DraftTree, node_logits: torch.Tensor, temperature: float, verifier: str) -> list[NodeCeiling]:
    """Every node with children: its design's ceiling and what `verifier` reaches there on this tree."""
    reached = node_acceptance(rule_law(verifier, tree, node_logits, temperature)).tolist()
    depths, children, draws = tree.depths.tolist(), tree.children(), tree.draws
    out = []
    for node, kids in enumerate(children):
        if not kids:
            continue
        p = probs(node_logits[node].double().cpu(), temperature)
        if draws is None:
            ceiling = float(p[tree.tokens[kids]].sum())
            out.append(NodeCeiling(depths[node], "fixed", 0, ceiling, reached[node]))
            continue
        made, _ = draws.at(node)
        flags = draws.fixed_at(node)
        fixed_tokens = [int(tree.tokens[c]) for c, f in zip(made, flags) if f]
        drawn = len(made) - len(fixed_tokens)
        design = "fixed" if not drawn else "mixed" if fixed_tokens else draws.mode  # a policy's sharp node: fixed
        if drawn > MAX_LP_DRAWS:
            out.append(NodeCeiling(depths[node], design, drawn, None, reached[node]))
            continue
        ceiling, tail = optimal_acceptance(p, draws.proposal(node), drawn, draws.mode, fixed_tokens)
        out.append(NodeCeiling(depths[node], design, drawn, ceiling, reached[node], tail))
    return out


def gap_by_depth(ceilings: Iterable[NodeCeiling]) -> list[dict]:
    """Per (depth of the children, design): nodes, the mean ceiling and mean reached acceptance over the nodes
    with a ceiling, their gap (ceiling - reached) with its standard error, and the largest LP tail."""
    groups: dict[tuple[int, str], list[NodeCeiling]] = defaultdict(list)
    for found in ceilings:
        groups[(found.depth + 1, found.design)].append(found)
    rows = []
    for (depth, design), found in sorted(groups.items()):
        bounded = [f for f in found if f.ceiling is not None]
        gaps = np.array([f.ceiling - f.reached for f in bounded])
        rows.append({"depth": depth, "design": design, "nodes": len(found), "bounded": len(bounded),
                     "ceiling": float(np.mean([f.ceiling for f in bounded])) if bounded else None,
                     "reached": float(np.mean([f.reached for f in found])),
                     "gap": float(gaps.mean()) if bounded else None,
                     "gap_se": float(gaps.std(ddof=1) / np.sqrt(gaps.size)) if gaps.size > 1 else None,
                     "tail": max((f.tail for f in bounded), default=0.0)})
    return rows


def ceilings_of_rounds(scored: Iterable[tuple[DraftTree, torch.Tensor]], temperature: float,
                       verifier: str) -> list[dict]:
    """`gap_by_depth` over many scored trees (tree, node logits) verified by `verifier`."""
    found: list[NodeCeiling] = []
    for tree, logits in scored:
        found += node_ceilings(tree, logits, temperature, verifier)
    return gap_by_depth(found)


def design_ceilings(drawn, with_rrs: bool = True) -> dict[str, list[dict]]:
    """Per depth, each design of a `context_rounds.SampledRounds` against its own ceiling: the drawn trees under
    rrs (where it is among the rules run: `with_rrs`), the matched best-first tree under tev."""
    found = {}
    if with_rrs:
        found[f"{drawn.builder.name} + rrs"] = ceilings_of_rounds(drawn.rounds, drawn.temperature, "rrs")
    found["best_first + tev (matched size)"] = ceilings_of_rounds([drawn.best_first], drawn.temperature, "tev")
    return found


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


CEILING_COLUMNS = (Column("depth", "depth"), Column("design", "design"), Column("nodes", "nodes"),
                   Column("ceiling", lambda r: _cell(r["ceiling"]), "s"),
                   Column("reached", lambda r: _cell(r["reached"]), "s"),
                   Column("gap", lambda r: "-" if r["gap"] is None else
                          f"{r['gap']:+.3f}" + ("" if r["gap_se"] is None else f" ± {r['gap_se']:.3f}"), "s"),
                   Column("LP tail", lambda r: f"{r['tail']:.2g}", "s"))


def format_ceilings(rows: list[dict]) -> str:
    """Per depth of the children and node design: the mean ceiling, what the rule reached, their gap."""
    return format_table(rows, CEILING_COLUMNS)
