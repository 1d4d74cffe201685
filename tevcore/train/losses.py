"""Training losses: distillation to the target's top-k rows, and the ExitTrain tree loss.

Tree loss = - sum over nodes v of w(v) * log q(x_v | depth(v)) on the tree the
current drafter builds; the weights come from the frozen target's flow on
that tree and carry no gradient. w = P with every edge probability floored at
alpha (so a node behind an unlikely edge still gets a pull), or the exit
weights X(v) * depth(v).

Both only reward tokens already in the tree. The "flow" variant also pulls in
the tokens the target wanted that the tree lacked: at every prefix v it fits
the next depth's row to the target's whole row at v, weighted by P(v). Its
optimum for a per-depth drafter is the target's next-token law mixed over the
tree's own prefixes rather than over every prefix the target could take.
"""

from __future__ import annotations

import torch

from tevcore.engine.flow import edge_log_probs, path_log_probs, target_flow
from tevcore.engine.sampling import log_probs
from tevcore.engine.tree import DraftTree

TREE_WEIGHTS = ("path", "exit", "flow")
ANCHOR_LOSSES = ("soft", "hard")
TREE_NORMS = ("anchor", "node")


def distill_loss(draft_logq: torch.Tensor, teacher_ids: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
    """Soft cross-entropy summed over depths, averaged over anchors.

    draft_logq (B, K, Vd); teacher_ids / teacher_probs (B, K, k) in draft-vocabulary ids. A depth past
    the end of its sequence has zero teacher rows and adds nothing. Dividing by the fixed anchor count
    (not by the cells present) keeps a DDP average of rank means equal to the global mean.
    """
    picked = draft_logq.gather(-1, teacher_ids)
    return -(teacher_probs * picked).sum((-1, -2)).mean()


def anchor_loss(kind: str, draft_logq: torch.Tensor, teacher_ids: torch.Tensor,
                teacher_probs: torch.Tensor) -> torch.Tensor:
    """The anchor term: "soft" distils the target's whole top-k row at every depth; "hard" is one-hot
    cross-entropy on the target's greedy token at every depth (the public TEV recipe), so the tree term is
    then the drafter's only sibling-level signal.

    The stored rows are sorted (top-k), so column 0 is the greedy token; a depth whose greedy token lies
    outside the draft vocabulary (or past the end of the sequence, or given to the drafter) has probability 0
    there and adds nothing, as in the soft loss.
    """
    if kind == "soft":
        return distill_loss(draft_logq, teacher_ids, teacher_probs)
    if kind == "hard":
        return distill_loss(draft_logq, teacher_ids[..., :1], (teacher_probs[..., :1] > 0).to(draft_logq.dtype))
    raise ValueError(f"anchor loss must be one of {ANCHOR_LOSSES}, got {kind!r}")


def tree_weights(tree: DraftTree, node_logits: torch.Tensor, temperature: float, kind: str,
                 alpha: float) -> torch.Tensor:
    """Stop-gradient weight of every node (0 at the root) from the target's rows on the tree ("path" or "exit")."""
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


def flow_loss(draft_logq: torch.Tensor, tree: DraftTree, node_logits: torch.Tensor, temperature: float,
              draft_index: torch.Tensor) -> torch.Tensor:
    """- sum over prefixes v above the last depth of P(v) * sum_x p(x | v) log q(x | depth(v) + 1).

    draft_logq is (K, Vd); the target rows are cut to the draft vocabulary (the
    mass outside it is dropped) and carry no gradient.
    """
    ids = torch.nonzero(draft_index >= 0).flatten()
    columns = torch.empty_like(ids)
    columns[draft_index[ids]] = ids  # column j of the draft rows is target token columns[j]
    flow = target_flow(tree, node_logits.detach(), temperature)
    prefixes = torch.nonzero(tree.depths < draft_logq.shape[0]).flatten()
    device = draft_logq.device
    rows = log_probs(node_logits.detach()[prefixes], temperature).exp()[:, columns.to(node_logits.device)]
    weights = flow.path_prob[prefixes].float().to(device)[:, None] * rows.float().to(device)
    return -(weights * draft_logq[tree.depths[prefixes].to(device)]).sum()


def tree_objective(draft_logq: torch.Tensor, tree: DraftTree, node_logits: torch.Tensor, kind: str,
                   temperature: float, alpha: float, draft_index: torch.Tensor, norm: str = "anchor") -> torch.Tensor:
    """The ExitTrain term of one anchor for a weight kind (see the module docstring).

    `norm` "anchor" keeps the sum over the tree's nodes; "node" divides it by the number of non-root nodes,
    as the public TEV code does, so the term's weight does not grow with the budget.
    """
    if norm not in TREE_NORMS:
        raise ValueError(f"tree norm must be one of {TREE_NORMS}, got {norm!r}")
    if kind == "flow":
        total = flow_loss(draft_logq, tree, node_logits, temperature, draft_index)
    else:
        total = tree_loss(draft_logq, tree, tree_weights(tree, node_logits, temperature, kind, alpha), draft_index)
    return total / max(1, tree.size) if norm == "node" else total
