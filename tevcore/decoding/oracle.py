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

from tevcore.engine.builders import PartialTree, check_budget, grow_best_first, tree_from_prefix_scores
from tevcore.engine.sampling import check_temperature, log_probs
from tevcore.target.session import TargetSession
from tevcore.engine.tree import DraftTree


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

    def children(node: int, grown: PartialTree) -> tuple[list[float], list[int]]:
        """The target's row at `node`, from one forward over the tree grown so far."""
        tree = tree_from_prefix_scores(grown.tokens, grown.parents, grown.scores, None)
        row = log_probs(session.score_tree(tree).logits[node], temperature)
        session.rollback()
        top = row.topk(min(budget, row.shape[-1]))
        return top.values.tolist(), top.indices.tolist()

    grown = grow_best_first(session.root_token, budget, children)
    return tree_from_prefix_scores(grown.tokens, grown.parents, grown.scores, budget)
