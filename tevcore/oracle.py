"""The oracle tree: the best tree of B nodes under the target's own law.

Coverage is the sum of target path probabilities over the tree, and a path
probability never rises along a path, so the B prefixes of highest target
path probability form a prefix-closed tree of the largest coverage any
B-node tree can have. Its 1 + C is the ceiling of E at budget B for every
drafter and builder: how much of a drafter's gap is the drafter, and how much
is the target's own uncertainty. Growing it needs the target's row at each
added node, one tree forward per node, so it is a measuring tool, not a
drafter.
"""

from __future__ import annotations

import heapq
import math

import torch

from .builders import check_budget
from .sampling import check_temperature, log_probs
from .target import TargetSession
from .tree import DraftTree


def oracle_tree(session: TargetSession, budget: int, temperature: float) -> DraftTree:
    """The top-`budget` prefixes after the session's root by target path probability.

    Nodes come in descending path probability (ties by discovery order), so
    `tree.first(b)` is the oracle tree of every smaller budget b. Prefixes of
    zero probability (all but the argmax at T = 0) are never added; the tree
    is then smaller than the budget. The tree's `draft_logp` holds the
    target's own edge log-probabilities. The session is left as it was.
    """
    budget = check_budget(budget)
    temperature = check_temperature(temperature)
    tokens, parents, edge_logp, path_logp = [session.root_token], [-1], [0.0], [0.0]
    options: dict[int, tuple[list[float], list[int]]] = {}
    heap: list[tuple[float, int, int, int]] = []  # (-path log-prob, push order, parent, rank)
    pushes = 0

    def expand(node: int) -> None:
        nonlocal pushes
        tree = DraftTree(tokens=torch.tensor(tokens), parents=torch.tensor(parents), draft_logp=torch.tensor(edge_logp))
        row = log_probs(session.score_tree(tree).logits[node], temperature)
        session.rollback()
        top = row.topk(min(budget, row.shape[-1]))
        options[node] = (top.values.tolist(), top.indices.tolist())
        pushes += 1
        heapq.heappush(heap, (-(path_logp[node] + options[node][0][0]), pushes, node, 0))

    if budget:
        expand(0)
    while heap and len(tokens) - 1 < budget:
        neg_logp, _, parent, rank = heapq.heappop(heap)
        if neg_logp == math.inf:
            break  # every remaining prefix has probability zero
        values, ids = options[parent]
        tokens.append(ids[rank])
        parents.append(parent)
        edge_logp.append(values[rank])
        path_logp.append(-neg_logp)
        if rank + 1 < len(values):
            pushes += 1
            heapq.heappush(heap, (-(path_logp[parent] + values[rank + 1]), pushes, parent, rank + 1))
        if len(tokens) - 1 < budget:
            expand(len(tokens) - 1)
    return DraftTree(tokens=torch.tensor(tokens), parents=torch.tensor(parents),
                     draft_logp=torch.tensor(edge_logp), budget=budget)
