"""Training losses: distillation to the target's top-k rows, and the ExitTrain tree loss.

Tree loss = - sum over nodes v of w(v) * log q(x_v | depth(v)) on the tree the
current drafter builds; the weights come from the frozen target's flow on
that tree and carry no gradient. w = P with every edge probability floored at
alpha (so a node behind an unlikely edge still gets a pull), or the exit
weights X(v) * depth(v).
"""

from __future__ import annotations

import torch

from ..flow import edge_log_probs, path_log_probs, target_flow
from ..sampling import log_probs
from ..tree import DraftTree

TREE_WEIGHTS = ("path", "exit")


def distill_loss(draft_logq: torch.Tensor, teacher_ids: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
    """Soft cross-entropy summed over depths, averaged over anchors.

    draft_logq (B, K, Vd); teacher_ids / teacher_probs (B, K, k) in draft-vocabulary ids. A depth past
    the end of its sequence has zero teacher rows and adds nothing. Dividing by the fixed anchor count
    (not by the cells present) keeps a DDP average of rank means equal to the global mean.
    """
    picked = draft_logq.gather(-1, teacher_ids)
    return -(teacher_probs * picked).sum((-1, -2)).mean()


def tree_weights(tree: DraftTree, node_logits: torch.Tensor, temperature: float, kind: str,
                 alpha: float) -> torch.Tensor:
    """Stop-gradient weight of every node (0 at the root) from the target's rows on the tree."""
    if kind == "path":
        log_a = edge_log_probs(tree, log_probs(node_logits.detach(), temperature).double())
        floored = log_a.clamp_min(torch.log(torch.tensor(float(alpha), dtype=log_a.dtype)))
        floored[0] = 0.0
        weights = path_log_probs(tree, floored).exp()
    elif kind == "exit":
        flow = target_flow(tree, node_logits.detach(), temperature)
        weights = flow.exit_mass * tree.depths.to(flow.exit_mass.dtype)
    else:
        raise ValueError(f"tree weight kind must be one of {TREE_WEIGHTS}, got {kind!r}")
    weights = weights.float().cpu()
    weights[0] = 0.0
    return weights


def tree_loss(draft_logq: torch.Tensor, tree: DraftTree, weights: torch.Tensor,
              draft_index: torch.Tensor) -> torch.Tensor:
    """- sum_v w(v) log q(x_v | depth(v)) for one anchor; draft_logq is (K, Vd).

    `draft_index` maps target token ids to draft-vocabulary ids (a tree built
    from the drafter only holds draft-vocabulary tokens).
    """
    if tree.size == 0:
        return draft_logq.sum() * 0.0
    depth_rows = tree.depths[1:].to(draft_logq.device) - 1
    ids = draft_index[tree.tokens[1:]].to(draft_logq.device)
    if (ids < 0).any():
        raise ValueError("the tree holds a token outside the draft vocabulary")
    picked = draft_logq[depth_rows, ids]
    return -(weights[1:].to(draft_logq.device) * picked).sum()
