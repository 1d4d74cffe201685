"""Target flow of a draft tree: where the target's probability mass goes.

From the target's row p(.|v) at every node: edge probability a(v), path
probability P(v), child mass m(v), exit mass X(v) = P(v)(1 - m(v)), coverage
C = sum of P over non-root nodes, and the tokens the target wanted at v that
the tree lacks. P is accumulated in log space level by level, and 1 - m is
log1p(-m) where m <= 1/2 and a log-sum-exp over the non-child tokens above,
so deep trees and near-one child mass stay exact. One `target_flow` per
round serves the record, the laws and every verifier (TEV draws its exit from
its X): the row normalisers of the scored parents are computed once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from tevcore.engine.sampling import check_temperature, is_greedy, log_probs, token_log_probs
from tevcore.engine.tree import DraftTree

DEFAULT_MISSING_K = 5
FLOAT64_SCRATCH_ELEMENTS = 1 << 22  # float64 rows normalised at once: 32 MB, whatever the vocabulary and tree size


def check_node_logits(tree: DraftTree, node_logits: torch.Tensor) -> None:
    """Raise a ValueError unless `node_logits` is (N+1) x V for `tree`, V covers its tokens, and every row has a law.

    Every verifier and `target_flow` call this, so the check lives once, here.
    """
    if node_logits.dim() != 2 or node_logits.shape[0] != tree.num_nodes:
        raise ValueError(
            f"node logits must be (N+1) x V with N+1 = {tree.num_nodes}, got shape {tuple(node_logits.shape)}"
        )
    if int(tree.tokens.max()) >= node_logits.shape[-1]:
        raise ValueError(f"the tree holds token {int(tree.tokens.max())}, outside the target vocabulary "
                         f"{node_logits.shape[-1]}")
    if not node_logits.is_floating_point():
        raise ValueError(f"node logits must be floating point, got {str(node_logits.dtype).removeprefix('torch.')}")
    # -inf is an exact zero probability (rows rebuilt from probabilities have them); NaN, +inf and a row
    # with no finite entry have no law. A row's max is NaN, +inf or -inf exactly then (amax propagates NaN):
    # one pass over the logits and one read-back per scored tree, instead of a silent verdict.
    usable = torch.isfinite(node_logits.amax(-1))
    if not bool(usable.all()):
        node = int((~usable).nonzero()[0])
        row = node_logits[node]
        kind = "NaN" if bool(torch.isnan(row).any()) else "+inf" if bool((row == torch.inf).any()) else "only -inf"
        raise ValueError(f"the target's logits at node {node} hold {kind} values: refusing to score the tree "
                         "(a broken model or a dtype overflow)")


def edge_log_probs(tree: DraftTree, node_log_probs: torch.Tensor) -> torch.Tensor:
    """log a(v) = log p(x_v | par(v)) for every node (0 at the root)."""
    parents = tree.parents.to(node_log_probs.device)
    tokens = tree.tokens.to(node_log_probs.device)
    log_a = torch.zeros(tree.num_nodes, dtype=node_log_probs.dtype, device=node_log_probs.device)
    if tree.size:
        log_a[1:] = node_log_probs[parents[1:], tokens[1:]]
    return log_a


def parent_edge_log_probs(tree: DraftTree, node_logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """log a(v) from raw logits, normalising only the rows that have children (float64).

    Equal to `edge_log_probs(tree, log_probs(node_logits, T))`, without touching
    the leaf rows: a verifier's hot path needs no softmax of a row it never reads.
    """
    log_a = torch.zeros(tree.num_nodes, dtype=torch.float64, device=node_logits.device)
    if tree.size:
        log_a[1:] = token_log_probs(node_logits, tree.parents[1:], tree.tokens[1:], temperature).double()
    return log_a


def path_log_probs(tree: DraftTree, log_a: torch.Tensor) -> torch.Tensor:
    """log P(v): one gather from the parents per level (no per-node loop)."""
    log_p = torch.zeros_like(log_a)
    parents = tree.parents.to(log_a.device)
    for level in tree.levels():
        level = level.to(log_a.device)
        log_p[level] = log_p[parents[level]] + log_a[level]
    return log_p


def draft_path_probs(tree: DraftTree) -> torch.Tensor:
    """Per node, the drafter's probability of its whole path (the root's is 1): its own forecast of P(v)."""
    return path_log_probs(tree, tree.draft_logp.double()).exp()


def log_missing_mass(tree: DraftTree, row_log_probs: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
    """log(1 - m(v)) for `nodes`, from their rows of log p(.|v): a log-sum-exp over the non-child tokens.

    It never subtracts m from 1, so it stays exact where m is within ~1e-16 of 1.
    """
    banned = _child_tokens_of(tree, nodes.to(row_log_probs.device), row_log_probs.shape[-1])
    return torch.logsumexp(row_log_probs.masked_fill(banned, float("-inf")), dim=-1)


@dataclass(frozen=True)
class TargetFlow:
    """Per-node target flow of one tree at one temperature (all tensors on CPU)."""

    temperature: float
    edge_prob: torch.Tensor  # a(v), (N+1,), 1 at the root
    path_prob: torch.Tensor  # P(v)
    child_mass: torch.Tensor  # m(v)
    exit_mass: torch.Tensor  # X(v)
    missing_tokens: torch.Tensor  # (N+1, k) top tokens of p(.|v) that are not children of v (k <= missing_k)
    missing_probs: torch.Tensor  # (N+1, k) their probabilities

    @property
    def coverage(self) -> float:
        """C = sum of P(v) over non-root nodes."""
        return float(self.path_prob[1:].sum())

    @property
    def expected_length(self) -> float:
        """1 + C: the expected output block length of an optimal exact verifier."""
        return 1.0 + self.coverage

    def length_variance(self, tree: DraftTree) -> float:
        """Var(L | tree) of an optimal exact verifier on `tree`: its exit node is distributed as X, so L = depth + 1
        has variance sum_v X(v) (depth(v) + 1)^2 - (1 + C)^2 (0 when the flow is 0/1, as at T = 0)."""
        lengths = tree.depths.to(self.exit_mass.dtype) + 1.0
        second = float((self.exit_mass * lengths * lengths).sum())
        return max(0.0, second - self.expected_length ** 2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "edge_prob": self.edge_prob.tolist(),
            "path_prob": self.path_prob.tolist(),
            "child_mass": self.child_mass.tolist(),
            "exit_mass": self.exit_mass.tolist(),
            "missing_tokens": self.missing_tokens.tolist(),
            "missing_probs": self.missing_probs.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TargetFlow":
        try:
            return cls(
                temperature=float(data["temperature"]),
                edge_prob=torch.tensor(data["edge_prob"], dtype=torch.float64),
                path_prob=torch.tensor(data["path_prob"], dtype=torch.float64),
                child_mass=torch.tensor(data["child_mass"], dtype=torch.float64),
                exit_mass=torch.tensor(data["exit_mass"], dtype=torch.float64),
                missing_tokens=torch.tensor(data["missing_tokens"], dtype=torch.long),
                missing_probs=torch.tensor(data["missing_probs"], dtype=torch.float64),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a target flow record: {err}") from None


def target_flow(
    tree: DraftTree, node_logits: torch.Tensor, temperature: float, missing_k: int = DEFAULT_MISSING_K
) -> TargetFlow:
    """The target flow of `tree` from its (N+1) x V node logits at `temperature`.

    Every round of a decode records one, so it reads the rows only where it
    must: the edge and missing-token log-probabilities as entries of float64
    rows (fp32 rows over a real vocabulary sum to 1 only within ~1e-5, which
    would break sum X = 1), 1 - m as log1p(-m) where m <= 1/2 and as a log-sum-exp
    over the non-children where m is near 1 (no cancellation), and the missing
    tokens from each row's top k + (its most children) logits. With
    missing_k = 0 (the lean flow a verifier needs) only the parents' rows are read.
    """
    check_node_logits(tree, node_logits)
    temperature = check_temperature(temperature)
    n = tree.num_nodes
    miss_tok = _top_non_children(tree, node_logits, missing_k)
    # one float64 read of the entries needed: each edge in its parent's row, each missing token in its own
    device = node_logits.device
    rows = torch.cat([tree.parents[1:].to(device), torch.arange(n, device=device).repeat_interleave(miss_tok.shape[1])])
    tokens = torch.cat([tree.tokens[1:].to(device), miss_tok.flatten()])
    entries = _float64_entries(node_logits, rows, tokens, temperature)
    log_a = torch.cat([entries.new_zeros(1), entries[:tree.size]])
    log_p = path_log_probs(tree, log_a)
    child_mass = torch.zeros_like(log_a).index_add_(0, tree.parents[1:].to(log_a.device), log_a[1:].exp())
    log_miss = torch.log1p(-child_mass.clamp(0.0, 1.0))
    near_one = torch.nonzero(child_mass > 0.5).flatten()
    if near_one.numel() and not is_greedy(temperature):  # at T = 0, m is exactly 0 or 1
        log_miss[near_one] = log_missing_mass(tree, log_probs(node_logits[near_one].double(), temperature), near_one)
    exit_mass = torch.exp(log_p + log_miss)
    return TargetFlow(
        temperature=float(temperature),
        edge_prob=log_a.exp().cpu(),
        path_prob=log_p.exp().cpu(),
        child_mass=(-torch.expm1(log_miss)).clamp(0.0, 1.0).cpu(),
        exit_mass=exit_mass.cpu(),
        missing_tokens=miss_tok.cpu(),
        missing_probs=entries[tree.size:].view(miss_tok.shape).exp().cpu(),
    )


def _float64_entries(node_logits: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor,
                     temperature: float) -> torch.Tensor:
    """`token_log_probs` in float64, normalising only the rows asked for, a bounded block at a time (on the
    logits' device).

    The lean flow reads only the parents' rows, so the leaves are never copied;
    and a 150k-token vocabulary over a 128-node tree would be a 155 MB float64
    copy in one go: blocks of `FLOAT64_SCRATCH_ELEMENTS` keep the scratch small
    and the values the same.
    """
    device = node_logits.device
    used, slot = torch.unique(rows.to(device), return_inverse=True)
    tokens = tokens.to(device)
    block = max(1, FLOAT64_SCRATCH_ELEMENTS // node_logits.shape[-1])
    out = torch.empty(rows.shape[0], dtype=torch.float64, device=device)
    for first in range(0, used.numel(), block):
        picked = torch.nonzero((slot >= first) & (slot < first + block)).flatten()
        scratch = node_logits.index_select(0, used[first:first + block]).to(torch.float64)
        out[picked] = token_log_probs(scratch, slot[picked] - first, tokens[picked], temperature, scratch=True)
    return out


def _child_tokens_of(tree: DraftTree, nodes: torch.Tensor, vocab: int) -> torch.Tensor:
    """(len(nodes), V) bool on `nodes`' device: True at the child tokens of each node (no V-wide CPU mask)."""
    parents, tokens = tree.parents[1:].to(nodes.device), tree.tokens[1:].to(nodes.device)
    slot = torch.full((tree.num_nodes,), -1, dtype=torch.long, device=nodes.device)
    slot[nodes] = torch.arange(nodes.numel(), device=nodes.device)
    kept = slot[parents] >= 0
    banned = torch.zeros(nodes.numel(), vocab, dtype=torch.bool, device=nodes.device)
    banned[slot[parents][kept], tokens[kept]] = True
    return banned


def _top_non_children(tree: DraftTree, node_logits: torch.Tensor, missing_k: int) -> torch.Tensor:
    """(N+1, k): per node, the k highest-logit tokens that are not its children, best first.

    k is capped by the fewest non-children any node has. Ranking by logits is
    ranking by probability at every T > 0; at T = 0 the argmax comes first and
    the zero-probability rest follow by logit.
    """
    vocab = node_logits.shape[-1]
    if missing_k == 0:
        return torch.zeros(tree.num_nodes, 0, dtype=torch.long, device=node_logits.device)
    most_children = int(torch.bincount(tree.parents[1:], minlength=tree.num_nodes).max())
    k = min(int(missing_k), vocab - most_children)
    candidates = node_logits.topk(min(vocab, k + most_children), dim=-1).indices
    parents, tokens = tree.parents[1:].to(candidates.device), tree.tokens[1:].to(candidates.device)
    hits = (candidates[parents] == tokens[:, None]).to(torch.int32)  # child j against its parent's candidates
    is_child = torch.zeros_like(candidates, dtype=torch.int32).index_add_(0, parents, hits) > 0
    keep = torch.sort(is_child.to(torch.uint8), dim=-1, stable=True).indices[:, :k]  # non-children first, rank kept
    return candidates.gather(-1, keep)
