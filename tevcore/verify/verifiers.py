"""Verifiers: a scored draft tree -> an accepted root path and one bonus token.

Every verifier has one calling convention,
`verify(tree, node_logits, temperature, generator) -> Verdict`, where row v
of `node_logits` is the target's logits after the context plus path(v).
The exact ones (`EXACT_VERIFIERS`) emit blocks distributed as target samples;
`greedy` is exact for T = 0, the law it always decodes. `naive_ratio` is
NOT exact and exists only as a foil the statistical tests must catch.
Temperature rules and random draws all go through `sampling`, and P and X
through `flow`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.flow import check_node_logits, exit_mass_from_edges, parent_edge_log_probs
from tevcore.engine.sampling import check_temperature, gumbel_argmax, log_probs, sample_index
from tevcore.engine.tree import DraftTree


@dataclass(frozen=True)
class Verdict:
    """What a verifier decided: the accepted root path (from node 0), its last node and the bonus token."""

    path: list[int]
    exit_node: int
    bonus_token: int

    @property
    def block_length(self) -> int:
        """Tokens this round emits: the accepted draft tokens plus the bonus, depth(exit) + 1."""
        return len(self.path)


Verifier = Callable[[DraftTree, torch.Tensor, float, torch.Generator], Verdict]


def check_inputs(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> float:
    """Validate the (N+1) x V logits against the tree; return the temperature as a float."""
    check_node_logits(tree, node_logits)
    return check_temperature(temperature)


def child_token_row(tree: DraftTree, node: int, vocab_size: int, device: torch.device) -> torch.Tensor:
    """(V,) boolean mask of the tokens `node` holds as children: the tokens its bonus may not be."""
    banned = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    banned[tree.tokens[1:][tree.parents[1:] == node].to(device)] = True
    return banned


def _bonus(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
           generator: torch.Generator, node: int) -> int:
    """One masked Gumbel-max draw from p(.|node) without node's child tokens."""
    banned = child_token_row(tree, node, node_logits.shape[-1], node_logits.device)
    return int(gumbel_argmax(node_logits[node], temperature, generator, banned=banned))


def tev_exit_mass(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """X as TEV computes it: a from the parent rows, then P and m level-parallel (float64)."""
    return exit_mass_from_edges(tree, parent_edge_log_probs(tree, node_logits, temperature))


def verify_tev(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
               generator: torch.Generator) -> Verdict:
    """Tree Exit Verification: one categorical draw of the exit over X, one masked bonus draw.

    a comes from the parent rows only, P by a gather per level, m by a
    scatter-add, X = P(1 - m): no loop over nodes, and the exit index is the
    only value read back before the bonus. At T = 0, X is the greedy exit.
    """
    temperature = check_inputs(tree, node_logits, temperature)
    exit_node = int(sample_index(tev_exit_mass(tree, node_logits, temperature), generator))
    return Verdict(tree.path(exit_node), exit_node, _bonus(tree, node_logits, temperature, generator, exit_node))


def _follow(tree: DraftTree, token_at: Callable[[int], int]) -> Verdict:
    """Walk from the root while a node's drawn token is one of its children; that draw is the bonus."""
    tokens = tree.tokens.tolist()
    child_by_token = [{tokens[kid]: kid for kid in kids} for kids in tree.children()]
    path = [0]
    drawn = token_at(0)
    while drawn in child_by_token[path[-1]]:
        path.append(child_by_token[path[-1]][drawn])
        drawn = token_at(path[-1])
    return Verdict(path, path[-1], drawn)


def verify_predraw(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                   generator: torch.Generator) -> Verdict:
    """Predraw-and-follow: one target draw per node (all rows at once), then follow the child draws."""
    temperature = check_inputs(tree, node_logits, temperature)
    drawn = gumbel_argmax(node_logits, temperature, generator).tolist()
    return _follow(tree, drawn.__getitem__)


def verify_greedy(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                  generator: torch.Generator) -> Verdict:
    """Greedy follow: the argmax of each visited row; decodes the T = 0 target whatever T is."""
    check_inputs(tree, node_logits, temperature)
    return _follow(tree, lambda node: int(gumbel_argmax(node_logits[node], 0.0, generator)))


def chain_subtree(tree: DraftTree) -> tuple[DraftTree, torch.Tensor]:
    """The tree's top-1 chain (at each node the child of highest draft log-prob) and its node ids."""
    children = tree.children()
    draft_logp = tree.draft_logp.tolist()
    nodes = [0]
    while children[nodes[-1]]:
        nodes.append(max(children[nodes[-1]], key=lambda child: draft_logp[child]))
    ids = torch.tensor(nodes, dtype=torch.long)
    chain = DraftTree(tokens=tree.tokens[ids], parents=torch.arange(-1, len(nodes) - 1),
                      draft_logp=tree.draft_logp[ids])
    return chain, ids


def verify_chain(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                 generator: torch.Generator) -> Verdict:
    """Chain-only baseline: standard speculative sampling (predraw) on the top-1 chain only."""
    temperature = check_inputs(tree, node_logits, temperature)
    chain, ids = chain_subtree(tree)
    verdict = verify_predraw(chain, node_logits.index_select(0, ids.to(node_logits.device)), temperature, generator)
    path = ids[verdict.path].tolist()
    return Verdict(path, path[-1], verdict.bonus_token)


AcceptRule = Callable[[list[float], list[float], list[float]], int | None]


def _residual_rule(child_p: list[float], child_q: list[float], uniforms: list[float]) -> int | None:
    """Try children in order; accept with the residual's probability of x_c, else remove x_c.

    The residual after rejecting c_1..c_j is p with those tokens zeroed and
    renormalised, so its probability of x_c is p(x_c) / (remaining mass);
    tracking that mass is the renormalisation without a pass over V.
    """
    remaining = 1.0
    for index, (p, u) in enumerate(zip(child_p, uniforms)):
        if u * remaining < p:
            return index
        remaining = max(remaining - p, 0.0)
    return None


def _naive_ratio_rule(child_p: list[float], child_q: list[float], uniforms: list[float]) -> int | None:
    """Accept c with min(1, p(x_c) / q(x_c)), trying children in order (NOT exact)."""
    for index, (p, q, u) in enumerate(zip(child_p, child_q, uniforms)):
        if u * q < p:
            return index
    return None


def _walk_with_tries(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                     generator: torch.Generator, rule: AcceptRule) -> Verdict:
    """Sequential verification: per level, one row's softmax and one accept-or-reject per child."""
    children = tree.children()
    draft_q = tree.draft_logp.double().exp().tolist()
    device = node_logits.device
    path = [0]
    while children[path[-1]]:
        kids = children[path[-1]]
        row = log_probs(node_logits[path[-1]], temperature)
        child_p = row[tree.tokens[kids].to(device)].double().exp().tolist()
        uniforms = torch.rand(len(kids), generator=generator, dtype=torch.float64, device=device).tolist()
        chosen = rule(child_p, [draft_q[kid] for kid in kids], uniforms)
        if chosen is None:
            break
        path.append(kids[chosen])
    return Verdict(path, path[-1], _bonus(tree, node_logits, temperature, generator, path[-1]))


def verify_residual(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                    generator: torch.Generator) -> Verdict:
    """Sequential residual verification with point-mass proposals (SpecInfer-style); exact.

    Every child rejected: the bonus comes from the last residual, p(.|v)
    without v's child tokens.
    """
    temperature = check_inputs(tree, node_logits, temperature)
    return _walk_with_tries(tree, node_logits, temperature, generator, _residual_rule)


def verify_naive_ratio(tree: DraftTree, node_logits: torch.Tensor, temperature: float,
                       generator: torch.Generator) -> Verdict:
    """NOT EXACT (teaching foil): accept c with min(1, p(x_c)/q(x_c)), q = exp(draft_logp[c]).

    The ratio rule is only valid when the candidate was sampled from q; on a
    deterministic tree it distorts the output law. Bonus: p(.|v) without
    v's child tokens.
    """
    temperature = check_inputs(tree, node_logits, temperature)
    return _walk_with_tries(tree, node_logits, temperature, generator, _naive_ratio_rule)


VERIFIERS: dict[str, Verifier] = {
    "tev": verify_tev,
    "predraw": verify_predraw,
    "residual": verify_residual,
    "greedy": verify_greedy,
    "chain": verify_chain,
    "naive_ratio": verify_naive_ratio,
}
EXACT_VERIFIERS = ("tev", "predraw", "residual", "greedy", "chain")
NOT_EXACT = {"naive_ratio"}


def get_verifier(name: str) -> Verifier:
    """The verifier registered under `name`."""
    try:
        return VERIFIERS[name]
    except KeyError:
        raise ValueError(f"unknown verifier {name!r}; choose one of {', '.join(VERIFIERS)}") from None


def verifier_label(name: str) -> str:
    """Display name; the non-exact foil says so wherever it is shown."""
    get_verifier(name)
    return f"{name} (NOT exact: teaching foil)" if name in NOT_EXACT else name
