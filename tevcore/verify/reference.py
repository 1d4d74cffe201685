"""The engine-neutral reference verifier: plain tensors in, the accepted path and the bonus token out.

This docstring is the spec an engine's tree verifier implements; the
conformance suite (`python -m tevcore conformance MODULE:FUNCTION`,
`tevcore.verify.conformance`) checks a function against it.

Signature (every argument by keyword, nothing of tevcore's types):

    verify(logits, parents, tokens, *, draw_parents=None, draw_children=None,
           draw_fixed=None, proposals=None, draw_mode="iid", temperature=1.0,
           top_k=None, top_p=None, generator) -> (path, bonus)

- `logits` (N+1, V) float: row v is the target's logits for the token after
  the context plus the tokens on the root path to node v (row 0: the root,
  the last committed token). Probabilities may be given as their logs.
- `parents` (N+1,) long: parents[0] = -1, every other parent precedes its
  child. `tokens` (N+1,) long: tokens[0] is the root token; siblings carry
  distinct tokens.
- A fixed tree gives no draws. A tree drawn from a proposal gives its draws
  in draw order: draw i was made at node `draw_parents[i]` and landed on
  child node `draw_children[i]` (an i.i.d. draw may land on a child an
  earlier draw made: one node, two draws); `draw_fixed[i]` marks a FIXED
  child (a mixed tree's top-1 of q, chosen rather than drawn: a draw from
  the point mass on its token), the others were DRAWN from
  `proposals[draw_parents[i]]` ((N+1, V) probabilities, the row each node
  drew from) without the node's fixed tokens and, with
  `draw_mode="wor"`, without its earlier draws, renormalised. Every
  non-root node comes from at least one draw.
- `temperature` and the warpers `top_k`, `top_p` define the target law
  p(.|v): softmax(logits[v] / T) cut to the top_k most likely tokens, then to
  the smallest set holding top_p of the rest's mass (transformers' order),
  renormalised. T = 0 is the argmax of logits[v] (warpers ignored). The
  warpers apply to the target only: the proposal rows are the law the draws
  came from, whatever shaped them.
- `generator` (torch.Generator) drives every random choice.
- Returns `path`, the accepted node ids from the root (path[0] = 0, each the
  parent of the next), and `bonus`, the token emitted after them.

Exactness, what the suite tests: the emitted tokens (tokens of path[1:],
then bonus), with decoding continued round after round from the extended
context, follow the target law p, for any fixed tree and over the draws of a
drawn tree. Each exact rule of tevcore's registry meets it (`rule_verifier`);
`verify` runs tev on a fixed tree and rrs on a drawn one.

This module is an adapter: it builds tevcore's tree, draw record and warped
rows from the plain tensors and calls the registry's rule, so the rules'
math lives once, in `rules.py` and `ratio_tables.py`.
"""

from __future__ import annotations

from typing import Callable

import torch

from tevcore.engine.draws import DrawRecord
from tevcore.engine.sampling import warp_logits
from tevcore.engine.tree import DRAWN, DRAWN_CHAIN, DraftTree
from tevcore.verify.registry import RULES, pairing_problem
from tevcore.verify.verifiers import get_verifier

TREE_KINDS = {"fixed": frozenset(), "sampled": frozenset({DRAWN}), "mixed": frozenset({DRAWN}),
              "sampled chain": frozenset({DRAWN, DRAWN_CHAIN})}  # the trees a conformance case holds, by their traits
ReferenceVerifier = Callable[..., tuple[list[int], int]]


def plain_tree(logits: torch.Tensor, parents, tokens, draw_parents=None, draw_children=None, draw_fixed=None,
               proposals=None, draw_mode: str = "iid") -> DraftTree:
    """tevcore's `DraftTree` of the plain arguments (validated there), its draws recorded with their rows."""
    tokens = torch.as_tensor(tokens, dtype=torch.long).cpu()
    parents = torch.as_tensor(parents, dtype=torch.long).cpu()
    if draw_parents is None:
        return DraftTree(tokens=tokens, parents=parents, draft_logp=torch.zeros(tokens.numel()))
    if proposals is None:
        raise ValueError("a drawn tree needs the proposal rows its nodes drew from")
    rows = torch.as_tensor(proposals).detach().cpu().double()
    at = torch.as_tensor(draw_parents, dtype=torch.long).cpu()
    landed = torch.as_tensor(draw_children, dtype=torch.long).cpu()
    q = rows[at, tokens[landed]]
    draft_logp = torch.zeros(tokens.numel(), dtype=torch.float64)
    draft_logp[landed] = q.log()
    record = DrawRecord(draw_mode, at, landed, q, rows=rows, row_of=torch.arange(tokens.numel()),
                        fixed=None if draw_fixed is None else torch.as_tensor(draw_fixed, dtype=torch.bool))
    return DraftTree(tokens=tokens, parents=parents, draft_logp=draft_logp.float(), draws=record)


def run_rule(rule: str, logits: torch.Tensor, parents, tokens, *, draw_parents=None, draw_children=None,
             draw_fixed=None, proposals=None, draw_mode: str = "iid", temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator) -> tuple[list[int], int]:
    """The registry rule `rule` on the plain arguments (see the module docstring): (path, bonus)."""
    logits = torch.as_tensor(logits)
    tree = plain_tree(logits, parents, tokens, draw_parents, draw_children, draw_fixed, proposals, draw_mode)
    warped = warp_logits(logits, temperature, top_k, top_p)
    verdict = get_verifier(rule)(tree, warped, temperature, generator)
    return list(verdict.path), int(verdict.bonus_token)


def verify(logits: torch.Tensor, parents, tokens, *, draw_parents=None, draw_children=None, draw_fixed=None,
           proposals=None, draw_mode: str = "iid", temperature: float = 1.0, top_k: int | None = None,
           top_p: float | None = None, generator: torch.Generator) -> tuple[list[int], int]:
    """The reference: tev on a fixed tree (one categorical over the exit law X), rrs (recursive rejection over
    the draws) on a drawn one. Arguments and the exactness it guarantees: the module docstring."""
    rule = "tev" if draw_parents is None or not len(draw_parents) else "rrs"
    return run_rule(rule, logits, parents, tokens, draw_parents=draw_parents, draw_children=draw_children,
                    draw_fixed=draw_fixed, proposals=proposals, draw_mode=draw_mode, temperature=temperature,
                    top_k=top_k, top_p=top_p, generator=generator)


def rule_trees(rule: str) -> tuple[str, ...]:
    """The conformance tree kinds registry rule `rule` may run on (its entry's needs, asked of the registry)."""
    return tuple(kind for kind, traits in TREE_KINDS.items() if pairing_problem(rule, traits, "") is None)


def rule_verifier(rule: str) -> ReferenceVerifier:
    """A function of the reference signature that runs registry rule `rule`, with `conformance_trees` naming the
    tree kinds it runs on (the conformance suite runs only those cases)."""
    if rule not in RULES:
        raise ValueError(f"unknown verifier {rule!r}; choose one of {', '.join(RULES)}")

    def verify_with_rule(logits: torch.Tensor, parents, tokens, **arguments) -> tuple[list[int], int]:
        return run_rule(rule, logits, parents, tokens, **arguments)

    verify_with_rule.__name__ = verify_with_rule.__qualname__ = f"verify_{rule}"
    verify_with_rule.__doc__ = f"Registry rule {rule} through the reference signature."
    verify_with_rule.conformance_trees = rule_trees(rule)
    return verify_with_rule


# the shipped exact rules through the reference signature (`python -m tevcore conformance
# tevcore.verify.reference:verify_rrs`); greedy is exact at T = 0 only and the foil not at all
verify_tev = rule_verifier("tev")
verify_predraw = rule_verifier("predraw")
verify_residual = rule_verifier("residual")
verify_chain = rule_verifier("chain")
verify_rrs = rule_verifier("rrs")
verify_block = rule_verifier("block")
