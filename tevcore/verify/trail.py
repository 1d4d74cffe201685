"""The trails behind one verdict of a proposal-ratio rule: what rrs tried and what block verification read.

rrs (`rrs_trail`): every try, its odds, its outcome.

rrs walks from the root: at node v it tries v's draws in try order (draw
order, except that a mixed node's drawn siblings come before its fixed
child), try i accepted with the table's probability, which divides the
residual's mass on its token by the probability its own proposal gave it
(`ratio_tables.RrsTables`; each step keeps that proposal), and moves
to the first accepted try's child; an exit is a node all of whose tries were
rejected (or that drew nothing), and the bonus comes from the residual there.

A verdict alone fixes every outcome of that walk. A rejected try leaves its
token with residual max(r - q, 0) = 0 there (it was rejected only because
r < q; a rejected fixed child's residual is max(r - 1, 0) = 0), so a
repeated draw of it can never be accepted later: the path's next
node was accepted at its FIRST try, every earlier try at v was rejected, and
at the exit every try was rejected. So the trail is read off the verdict and
the very tables the verifier decided from, for a verdict made now or one a
decoding round recorded; no second copy of the rule's arithmetic.

block (`block_trail`): on a sampled chain x_1..x_g the rule carries a weight
w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)) down the chain, turns it into a
stop probability h_i, and exits at the LAST chain node whose Bernoulli(h_i)
succeeds, reading the coins from the chain's end. The verdict fixes every
coin it read: the nodes below the exit failed, the exit succeeded, and the
coins above the exit were never needed (those nodes are accepted with the
block, whatever w says about them one by one).
"""

from __future__ import annotations

from dataclasses import dataclass

from tevcore.verify.scored import ScoredRound


@dataclass(frozen=True)
class TrailStep:
    """One try of rrs: at `node`, its `draw`-th draw (0-based, in draw order), which landed on `child`, whose token
    has the drafter's probability `q` in the node's full row; `fixed` marks a mixed tree's fixed child (a point-mass
    proposal, `proposal` 1); a drawn sibling's `proposal` is q over the mass left without the fixed tokens (and,
    without replacement, the earlier draws)."""

    node: int
    draw: int
    child: int
    q: float
    accept_prob: float  # the table's acceptance probability of this try, given the earlier tries were rejected
    accepted: bool
    fixed: bool = False
    proposal: float = 0.0  # the probability the law this try was drawn from gave its token (what rrs divided by)


@dataclass(frozen=True)
class RrsTrail:
    """The tries rrs made, root first, ending at `exit_node`, where the bonus was drawn from the residual."""

    steps: tuple[TrailStep, ...]
    exit_node: int
    bonus_token: int

    @property
    def path(self) -> list[int]:
        """The accepted nodes, root first (the verdict's path)."""
        return [0] + [step.child for step in self.steps if step.accepted]


def rrs_trail(round_: ScoredRound, path: list[int], bonus_token: int) -> RrsTrail:
    """The tries behind an rrs verdict (`path` from the root to the exit, `bonus_token`) on a sampled tree.

    A path rrs could not have taken (a next node never drawn at its parent, or
    first drawn where the table gives it no chance, or a try before it that
    could not be rejected) is refused: the trail would be a made-up one.
    """
    tree = round_.tree
    if not path or path[0] != 0:
        raise ValueError("an rrs path starts at the root (node 0)")
    tables = round_.rrs
    table, accept, draw_of = tables.table.tolist(), tables.accept.tolist(), tables.draw_of.tolist()
    draws = tree.draws
    steps: list[TrailStep] = []
    for position, node in enumerate(path):
        following = path[position + 1] if position + 1 < len(path) else None
        _, q = draws.at(node) if draws is not None else ([], [])
        fixed = draws.fixed_at(node) if draws is not None else []
        tried = [child for child in table[node] if child >= 0]
        if following is not None and following not in tried:
            raise ValueError(f"node {following} was not drawn at node {node}: not an rrs path of this tree")
        for i, child in enumerate(tried):
            won = child == following
            odds, draw = float(accept[node][i]), int(draw_of[node][i])
            if (won and odds <= 0.0) or (not won and odds >= 1.0):
                raise ValueError(f"rrs cannot {'accept' if won else 'reject'} draw {draw} at node {node} "
                                 f"(acceptance probability {odds:g}): not an rrs verdict of this round")
            steps.append(TrailStep(node, draw, int(child), float(q[draw]), odds, won, bool(fixed[draw]),
                                   tables.proposal_prob(node, i)))
            if won:
                break
    return RrsTrail(tuple(steps), int(path[-1]), int(bonus_token))


@dataclass(frozen=True)
class BlockStep:
    """Chain node `node` of a block verdict: p/q of its token, the weight carried to it, and its coin.

    `stop_prob` and `outcome` are None for a node whose coin the verdict never
    read (one above the exit); else `outcome` is True where the coin succeeded.
    """

    node: int
    q: float
    ratio: float  # p_i(x_i) / q_i(x_i) of this node's token
    weight: float  # w_i
    stop_prob: float | None  # h_i
    outcome: bool | None


@dataclass(frozen=True)
class BlockTrail:
    """The chain's nodes root-side first, each with its weight and (where read) its coin; `exit_node` is the last
    success (0 when every coin failed), where the bonus was drawn from the block residual."""

    steps: tuple[BlockStep, ...]
    exit_node: int
    bonus_token: int

    @property
    def path(self) -> list[int]:
        return list(range(self.exit_node + 1))


def block_trail(round_: ScoredRound, path: list[int], bonus_token: int) -> BlockTrail:
    """The weights and coins behind a block verdict (`path`, `bonus_token`) on a sampled chain.

    A path block verification could not have taken (not a prefix of the
    chain, an exit whose stop probability is 0, or a node below it whose coin
    cannot fail) is refused.
    """
    tables = round_.block  # refuses a tree that is not a sampled chain
    if not path or path != list(range(len(path))) or len(path) > tables.length + 1:
        raise ValueError(f"a block path is a prefix 0, 1, 2, ... of the chain's {tables.length + 1} nodes, "
                         f"not {path}")
    exit_node = len(path) - 1
    steps: list[BlockStep] = []
    for node in range(1, tables.length + 1):
        stop = outcome = None
        if node >= exit_node:  # the coins read from the chain's end down to the exit
            stop, outcome = tables.stop(node), node == exit_node
            if (outcome and stop <= 0.0) or (not outcome and stop >= 1.0):
                raise ValueError(f"block verification cannot {'stop at' if outcome else 'go past'} node {node} (stop "
                                 f"probability {stop:g}): not a block verdict of this round")
        steps.append(BlockStep(node, tables.drawn_q[node], tables.ratios[node], tables.weights[node], stop, outcome))
    return BlockTrail(tuple(steps), exit_node, int(bonus_token))
