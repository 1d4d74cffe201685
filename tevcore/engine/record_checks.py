"""Checks that a round record read from a file is one the engine could have written.

A trace is plain JSON anyone can edit, so `read_trace` checks every round in
full: the flow's shapes match the tree, its probabilities are finite and lie
in [0, 1], the accepted path is a root-to-exit chain of the tree, the bonus
is a token id, a sampled tree's draws agree with it (`DrawRecord`) and the tree
has its builder's shape (`check_builder_shape`: a mixed tree fixes exactly one
child per drawing node, first; a plain sampled one none). What
depends on the rule that verified the round (may it run on this tree, may
its bonus be a child of the exit) is the rule registry's to say: `read_trace`
takes its check (`tevcore.verify.trace_checks`). A record that passes can be
drawn and replayed without a model.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.flow import TargetFlow
from tevcore.engine.tree import MAX_TOKEN_ID, DraftTree

SLACK = 1e-6  # float rounding a written probability may carry past [0, 1]
# No model reads a context of more tokens (the longest today are a few million); a larger count is damage.
MAX_COUNT = 2 ** 24
PROBABILITIES = ("edge_prob", "path_prob", "child_mass", "exit_mass")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_counts(data: dict[str, Any]) -> None:
    """index, budget, context_length (and drafted_size, if given) are integers in [0, MAX_COUNT]; temperature a
    finite number >= 0."""
    for name in ("index", "budget", "context_length"):
        if not _is_int(data.get(name)) or not 0 <= data[name] <= MAX_COUNT:
            raise ValueError(f"{name} must be an integer in [0, {MAX_COUNT}], got {data.get(name)!r}")
    drafted = data.get("drafted_size")
    if drafted is not None and (not _is_int(drafted) or not 0 <= drafted <= MAX_COUNT):
        raise ValueError(f"drafted_size must be an integer in [0, {MAX_COUNT}] or null, got {drafted!r}")
    temperature = data.get("temperature")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not \
            (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")


def check_flow(tree: DraftTree, flow: TargetFlow) -> None:
    """One entry per node, finite probabilities in [0, 1], (N+1) x k missing tokens inside the id range."""
    n = tree.num_nodes
    for name in PROBABILITIES:
        values = getattr(flow, name)
        if tuple(values.shape) != (n,):
            raise ValueError(f"the flow and the tree disagree: flow {name} has shape {tuple(values.shape)}, "
                             f"the tree {n} nodes")
    for name in PROBABILITIES:
        values = getattr(flow, name)
        if not bool(torch.isfinite(values).all()) or bool((values < -SLACK).any() or (values > 1 + SLACK).any()):
            raise ValueError(f"flow {name} must hold finite probabilities in [0, 1]")
    tokens, probs = flow.missing_tokens, flow.missing_probs
    if tokens.dim() != 2 or tokens.shape[0] != n or tuple(probs.shape) != tuple(tokens.shape):
        raise ValueError(f"flow missing_tokens and missing_probs must both be {n} x k, "
                         f"got {tuple(tokens.shape)} and {tuple(probs.shape)}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) > MAX_TOKEN_ID):
        raise ValueError("flow missing_tokens must be token ids >= 0")
    if not bool(torch.isfinite(probs).all()) or bool((probs < -SLACK).any() or (probs > 1 + SLACK).any()):
        raise ValueError("flow missing_probs must hold finite probabilities in [0, 1]")


def check_texts(tree: DraftTree, flow: TargetFlow, token_texts: Any, missing_texts: Any) -> None:
    """A text per node, and per node one text per missing token."""
    n, k = tree.num_nodes, flow.missing_tokens.shape[1]
    if not isinstance(token_texts, list) or len(token_texts) != n or not all(isinstance(t, str) for t in token_texts):
        raise ValueError(f"token_texts must be a list of {n} strings (one per node)")
    if not isinstance(missing_texts, list) or len(missing_texts) != n or not all(
            isinstance(row, list) and len(row) == k and all(isinstance(t, str) for t in row) for row in missing_texts):
        raise ValueError(f"missing_texts must be {n} lists of {k} strings (one per missing token)")


def check_verdict(tree: DraftTree, data: dict[str, Any]) -> None:
    """The path is a root-to-exit chain of the tree ending at the exit node, the bonus a token id."""
    path, exit_node, bonus = data.get("path"), data.get("exit_node"), data.get("bonus_token")
    emitted = data.get("emitted_tokens")
    if not isinstance(emitted, list) or not all(_is_int(t) and 0 <= t <= MAX_TOKEN_ID for t in emitted):
        raise ValueError("emitted_tokens must be a list of token ids")
    if data.get("verifier") is None and not path:
        return  # a round recorded before any verdict
    if not isinstance(path, list) or not path or not all(_is_int(v) for v in path):
        raise ValueError(f"path must be a list of node indices starting at the root, got {path!r}")
    if path[0] != 0:
        raise ValueError(f"path must start at the root (node 0), got {path[0]}")
    for parent, child in zip(path, path[1:]):
        if not 0 < child < tree.num_nodes or int(tree.parents[child]) != parent:
            raise ValueError(f"path {path} is not a chain of the tree: node {child} is not a child of node {parent}")
    if exit_node != path[-1]:
        raise ValueError(f"exit_node {exit_node!r} must be the last node of the path ({path[-1]})")
    if not _is_int(bonus) or not 0 <= bonus <= MAX_TOKEN_ID:
        raise ValueError(f"bonus_token must be a token id, got {bonus!r}")


def check_timings(timings: Any, stages: tuple[str, ...]) -> None:
    """Seconds per known stage, each a finite number >= 0."""
    if not isinstance(timings, dict):
        raise ValueError("timings must map stage names to seconds")
    for stage, seconds in timings.items():
        if stage not in stages:
            raise ValueError(f"timings: unknown stage {stage!r} (stages: {', '.join(stages)})")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not \
                (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"timings: {stage} must be a finite number of seconds >= 0, got {seconds!r}")


def check_order(previous_index: int | None, index: int) -> None:
    """Rounds follow one another: each index above the one before, so a replay can never run out of order."""
    if previous_index is not None and index <= previous_index:
        kind = "repeats" if index == previous_index else "comes after"
        raise ValueError(f"round index {index} {kind} round {previous_index}: rounds must be in increasing order")


def check_builder_shape(builder: Any, budget: int, tree: DraftTree, temperature: float | None = None) -> None:
    """The tree is one its builder could have made. A drawn family's tree carries its draw record (the engine
    writes one, empty when nothing was drawn, in every round that drafted: budget > 0), in the family's draw mode,
    with at most its depth's count of draws at each node and none below its last depth; a mixed family's drawing
    node has exactly one fixed child, drawn first (a policy's node that, or all its children fixed); a plain
    sampled tree fixes none; a fixed family's tree records
    no draws. A policy at T = 0 builds the best-first tree, every child fixed, whatever its counts. A builder
    name the parser does not know is left unchecked (its shape is unknown)."""
    if not isinstance(builder, str):
        raise ValueError(f"builder must be a builder name, got {builder!r}")
    try:
        spec = parse_builder(builder)
    except ValueError:
        return
    draws = tree.draws
    if not spec.sampled:
        if draws is not None:
            raise ValueError(f"builder {builder} makes fixed trees, but this round's tree carries a draw record")
        return
    if draws is None:
        if tree.size or budget > 0:
            raise ValueError(f"builder {builder} draws its trees, but this round's tree has no draw record")
        return
    mode = "iid" if spec.replace else "wor"
    if draws.mode != mode:
        raise ValueError(f"builder {builder} draws {mode}, but this round's draws are {draws.mode}")
    counts = spec.counts
    if spec.family.kind == "policy" and temperature == 0:
        if not bool(draws.fixed.all()):
            raise ValueError(f"builder {builder} at T = 0 builds the best-first tree, every child fixed, but this "
                             f"round's tree has {int((~draws.fixed).sum())} drawn")
        return
    for node in torch.unique(draws.parents).tolist():
        depth, flags = int(tree.depths[node]), draws.fixed[draws.parents == node]
        if depth >= len(counts) or flags.numel() > counts[depth]:
            allowed = counts[depth] if depth < len(counts) else 0
            raise ValueError(f"node {node} (depth {depth}) drew {flags.numel()} children; builder {builder} draws at "
                             f"most {allowed} there")
        if spec.family.kind == "policy" and bool(flags.all()):
            continue  # a sharp node of a policy keeps its top children, all fixed
        if spec.family.fixes_top1 and (not bool(flags[0]) or bool(flags[1:].any())):
            raise ValueError(f"builder {builder} fixes exactly one child per node, its first; node {node} has "
                             f"{int(flags.sum())} fixed of {flags.numel()} (flags {flags.tolist()})")
        if not spec.family.fixes_top1 and bool(flags.any()):
            raise ValueError(f"builder {builder} fixes no child, but node {node} has {int(flags.sum())} fixed")
