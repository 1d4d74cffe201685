"""A trace's rounds checked against the rules that verified them, by the rule registry.

The engine's reader checks what holds for any round (shapes, probabilities,
a path of the tree, draws that agree with the tree's draft log-probs); what
depends on the rule is asked of its registry entry here: the rule is known,
it may run on the round's realised tree (a proposal-ratio round carries the
draw record it divided by: `pairing_problem`), and its bonus is one its law
can give (no child of the exit, unless the entry says its bonus law may
hold one).
"""

from __future__ import annotations

from pathlib import Path

from tevcore.engine.records import TRACE_TEXT_LIMIT, RoundRecord, Trace
from tevcore.engine.records import read_trace as read_unchecked
from tevcore.verify.registry import check_tree_pairing, get_rule


def check_round(record: RoundRecord) -> None:
    """Refuse a round its rule could not have decided; a round recorded before any verdict passes."""
    if record.verifier is None:
        return
    rule = get_rule(record.verifier)
    check_tree_pairing(record.verifier, record.tree)
    tree = record.tree
    children = tree.tokens[1:][tree.parents[1:] == record.exit_node].tolist()
    if record.bonus_token in children and not rule.bonus_may_repeat_child:
        raise ValueError(f"bonus_token {record.bonus_token} is a child of the exit node {record.exit_node}: "
                         f"{rule.name} would have accepted it")


def read_trace(path: str | Path, name: str | None = None, max_text_bytes: int = TRACE_TEXT_LIMIT) -> Trace:
    """Read a trace (the engine's reader, at most `max_text_bytes` of text) with every round checked against its
    rule."""
    return read_unchecked(path, name, check_round, max_text_bytes)
