"""Each verification rule, written once, as a batched exit sampler over n independent draws.

A rule decides where a round exits; the bonus is then the shared masked draw
(`bonus.py`) from p(.|exit) without the tokens the rule tried there. The
decoding verifier is the n = 1 case of the same function, the simulator and
the app's comparison its n = 1e5 case. All rules read the round's flow
(a(v) from the row normalisers of the scored parents), never re-normalise a row.

- tev: one categorical draw over X.
- predraw: at each node the target draw hits child c with a(c), or no child with 1 - m.
- residual: children tried in index order, c accepted with the residual's probability of x_c.
- naive_ratio (NOT exact, a foil): c accepted with min(1, a(c) / q(c)).
- greedy: follow the argmax child of each row (the T = 0 target).
- chain: predraw on the top-1 chain only; its bonus masks only the chain child.
- rrs (drawn trees only): recursive rejection over each node's draws, exact over the tree's draws (sampled
  and mixed trees); a mixed node's drawn siblings are tried first (against the full p, each divided by its
  own proposal, q without the fixed child), its fixed child last as a draw from a point mass (accepted with
  the final residual's probability of its token, the only way that token is emitted); its bonus is the
  residual left at the exit (`ratio_tables.py`).
- block (drawn chains only): block verification; its bonus is the block residual at the exit.

What each rule may run on, its law, standing, trail and name are its entry in
`registry.py`; this module holds only the samplers.
"""

from __future__ import annotations

from typing import Callable

import torch

from tevcore.engine.sampling import sample_index, uniform
from tevcore.verify.scored import ScoredRound

ExitSampler = Callable[[ScoredRound, torch.Generator, int], torch.Tensor]
BannedAt = Callable[[ScoredRound, int], torch.Tensor]


def child_token_row(round_: ScoredRound, node: int) -> torch.Tensor:
    """(V,) boolean mask of the tokens `node` holds as children in the whole tree."""
    tree = round_.tree
    banned = torch.zeros(round_.vocab_size, dtype=torch.bool, device=round_.device)
    banned[tree.tokens[1:][tree.parents[1:] == node].to(round_.device)] = True
    return banned


def foil_child_token_row(round_: ScoredRound, node: int) -> torch.Tensor:
    """The foil's banned bonus tokens: the children, unless they are the whole vocabulary. The foil can reject
    every child where an exact rule never exits (X = 0 there); its bonus then draws from the whole row."""
    row = child_token_row(round_, node)
    return torch.zeros_like(row) if bool(row.all()) else row


def chain_child_token_row(round_: ScoredRound, node: int) -> torch.Tensor:
    """(V,) boolean mask of the one token chain-only tried at `node`: its chain child's (none at the end)."""
    banned = torch.zeros(round_.vocab_size, dtype=torch.bool, device=round_.device)
    chain = round_.chain_nodes.tolist()
    position = chain.index(node)
    if position + 1 < len(chain):
        banned[int(round_.tree.tokens[chain[position + 1]])] = True
    return banned


def exits_tev(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """n categorical draws over X, the flow's exit mass."""
    return sample_index(round_.flow.exit_mass, generator, n).to(round_.device)


def exits_predraw(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Follow the draws: a node's target draw lands on child c with a(c), on no child with 1 - m."""
    table, hits = round_.child_table, round_.child_probs
    device = round_.device
    cdf = torch.cat([hits, (1.0 - hits.sum(-1, keepdim=True)).clamp_min(0.0)], -1).cumsum(-1)
    cdf = cdf / cdf[:, -1:]
    stay = torch.arange(round_.tree.num_nodes, device=device)[:, None]
    successor = torch.cat([table, stay], -1)
    node = torch.zeros(n, dtype=torch.long, device=device)
    live = torch.arange(n, device=device)  # draws whose last draw hit a child
    for _ in range(round_.tree.max_depth):
        at = node[live]
        pick = torch.searchsorted(cdf[at], uniform((live.numel(), 1), generator, device), right=True)
        following = successor[at, pick.squeeze(-1).clamp_max(table.shape[1])]
        node[live] = following
        live = live[following != at]
        if not live.numel():
            break
    return node


FirstAccepted = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _walk_tries(round_: ScoredRound, generator: torch.Generator, n: int, table: torch.Tensor,
                first_accepted: FirstAccepted) -> torch.Tensor:
    """Tries in table order, one uniform each: level by level, every live draw takes (K,) uniforms and
    `first_accepted(nodes, uniforms)` says which try at its node is accepted first (K if none)."""
    device = round_.device
    node = torch.zeros(n, dtype=torch.long, device=device)
    live = torch.arange(n, device=device)  # draws that accepted a child at the last level
    for _ in range(round_.tree.max_depth):
        at = node[live]
        first = first_accepted(at, uniform((live.numel(), table.shape[1]), generator, device)).to(device)
        moved = first < table.shape[1]
        live, at, first = live[moved], at[moved], first[moved]
        node[live] = table[at, first]
        if not live.numel():
            break
    return node


def _exits_by_tries(round_: ScoredRound, generator: torch.Generator, n: int, bar: torch.Tensor,
                    table: torch.Tensor | None = None, p: torch.Tensor | None = None) -> torch.Tensor:
    """Tries in table order (children by index unless a `table` is given): try c is accepted when
    u * bar(c) < p(c) (p = a(c) unless given).

    A try's bar depends only on its node, so all tries of all live draws
    are one (draws x K) comparison per level.
    """
    table = round_.child_table if table is None else table
    p = round_.child_probs if p is None else p

    def first_accepted(at: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        accepted = uniforms * bar[at] < p[at]
        return torch.where(accepted.any(-1), accepted.to(torch.uint8).argmax(-1), table.shape[1])

    return _walk_tries(round_, generator, n, table, first_accepted)


def exits_residual(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Sequential residual: after rejecting earlier siblings the residual's mass left is 1 - their a.

    Its probability of x_c is a(c) / (mass left): tracking that mass is the
    renormalisation without a pass over the vocabulary.
    """
    p = round_.child_probs
    return _exits_by_tries(round_, generator, n, (1.0 - (p.cumsum(-1) - p)).clamp_min(0.0))


def exits_naive_ratio(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """NOT EXACT: accept c with min(1, a(c) / q(c)), q = exp(draft_logp[c]); valid only for trees sampled from q."""
    table = round_.child_table
    q = round_.tree.draft_logp.double().exp().to(round_.device)
    return _exits_by_tries(round_, generator, n, torch.where(table >= 0, q[table.clamp_min(0)], 1.0))


def exits_greedy(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Follow the argmax of each visited row while it is a child token; n copies of that exit."""
    tokens = round_.tree.tokens.tolist()
    child_by_token = [{tokens[kid]: kid for kid in kids} for kids in round_.tree.children()]
    node = 0
    while child_by_token[node]:
        best = int(round_.logits[node].argmax())
        if best not in child_by_token[node]:
            break
        node = child_by_token[node][best]
    return torch.full((n,), node, dtype=torch.long, device=round_.device)


def exits_chain(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Standard speculative sampling on the top-1 chain: step i goes on with a(chain[i + 1])."""
    chain = round_.chain_nodes.to(round_.device)
    if chain.numel() == 1:
        return torch.zeros(n, dtype=torch.long, device=round_.device)
    go_on = uniform((n, chain.numel() - 1), generator, round_.device) < round_.edge_prob[chain[1:]]
    return chain[go_on.to(torch.long).cumprod(-1).sum(-1)]


def exits_rrs(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Recursive rejection: each node's draws tried in draw order with their acceptance probabilities,
    computed only for the tries a verdict reaches."""
    tables = round_.rrs
    return _walk_tries(round_, generator, n, tables.table.to(round_.device), tables.first_accepted)


def exits_block(round_: ScoredRound, generator: torch.Generator, n: int) -> torch.Tensor:
    """Block verification: the exit is the last chain node whose Bernoulli(h) succeeds (the root if none)."""
    g = round_.tree.num_nodes - 1
    if g == 0:
        return torch.zeros(n, dtype=torch.long, device=round_.device)
    return round_.block.last_success(uniform((n, g), generator, round_.device)).to(round_.device)


def rrs_bonus_row(round_: ScoredRound, node: int) -> torch.Tensor | None:
    """The residual left after every draw at `node` was rejected; None where it drew nothing (p itself)."""
    return round_.rrs.residual(node)


def block_bonus_row(round_: ScoredRound, node: int) -> torch.Tensor | None:
    """The block residual at chain node `node`; None at the chain's end (p itself)."""
    return round_.block.residual(node)


BonusRow = Callable[[ScoredRound, int], "torch.Tensor | None"]
