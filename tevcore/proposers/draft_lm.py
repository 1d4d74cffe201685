"""A draft LM proposer: a small causal LM with the target's tokenizer drafts a chain or a best-first tree.

This is the proposer any target has on day one: no training, just a smaller
model of the same tokenizer. Unlike a block drafter, its rows depend on the
whole path, so it grows the tree itself, one depth at a time, with ONE
batched draft forward over that depth's frontier: each frontier node is a
query over the draft's KV cache (the committed context, then the tree nodes
already expanded) with an ancestor-only mask, at position context + depth.

Best-first growth keeps the top-B prefixes by summed draft log-prob
(builders.grow_best_first). A node outside the top B of the prefixes seen so
far can never enter the final tree (deeper prefixes score no higher than
their parents), so each depth expands only the new nodes still in that top B.

A sampled builder ('sampled:K1,...', 'sampled-wor:K1,...'; a mixed one,
'mixed:K1,...', also fixes each node's top-1, as `spec.shape` says) draws each
node's children from the draft's own next-token distribution given that node's path
(the real path-conditioned q), with the same per-depth batched forward under
`sampled.grow_sampled`'s bookkeeping: the tree records the very rows each
node drew from, for the proposal-ratio verifiers. A wrapper's `mix` (the
context lookup) reweighs each node's row given its path before its children
are chosen or drawn, so a tree drawn from that mixture is still conditioned
on every path.

The draft cache follows the committed path without any callback: each round
compares the tokens it holds with the session's committed tokens, crops to
the common prefix and feeds the rest (the accepted tokens and the new root),
so the root's draft row comes from that same forward.
"""

from __future__ import annotations

import heapq
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import DynamicCache

from tevcore.engine.sampled import SampledShape, check_levels, grow_sampled
from tevcore.engine.sampling import draw_proposals
from tevcore.engine.builders import PartialTree, check_budget, grow_best_first, tree_from_prefix_scores
from tevcore.engine.builder_specs import BUILDER_FAMILIES, BuilderSpec
from tevcore.engine.tree import DraftTree, path_of
from tevcore.proposer_protocol import RowMix
from tevcore.target.kv_cache import roomy_cache, truncate
from tevcore.target.loading import Target, load_target
from tevcore.target.session import TargetSession, one_logit_row
from tevcore.target.tree_masks import frontier_mask
from tevcore.proposers.base import HFAssistant, ProposerBase
from tevcore.proposers.kind import DrafterKind, LoadOptions, prefixed

MODEL_PREFIX = "model:"
DEFAULT_DEPTH = 6
FIRST_ROOM = 256  # cache positions reserved at the first prefill (the cache grows by doubling past them)


@dataclass
class DraftGrowth:
    """A grown tree and, when asked for, the draft log-prob row of each expanded tree node."""

    tree: DraftTree
    rows: dict[int, torch.Tensor] = field(default_factory=dict)  # tree node -> (V,) log-probs of its children


@dataclass
class _Pool:
    """Every prefix seen while growing (node 0 = the root); expanded nodes also hold their ranked children."""

    tokens: list[int]
    parents: list[int]
    scores: list[float]
    depths: list[int]
    columns: dict[int, int] = field(default_factory=dict)  # expanded non-root node -> its draft cache position
    ranked: dict[int, tuple[list[float], list[int]]] = field(default_factory=dict)
    child: dict[tuple[int, int], int] = field(default_factory=dict)  # (node, token) -> child node
    rows: dict[int, torch.Tensor] = field(default_factory=dict)

    def add_children(self, node: int, logq: list[float], tokens: list[int]) -> list[int]:
        self.ranked[node] = (logq, tokens)
        added = []
        for lq, token in zip(logq, tokens):
            added.append(len(self.tokens))
            self.child[(node, token)] = added[-1]
            self.tokens.append(token)
            self.parents.append(node)
            self.scores.append(self.scores[node] + lq)
            self.depths.append(self.depths[node] + 1)
        return added


def tokenizer_mismatch(target: Target, draft: Target) -> str | None:
    """Why the draft's tokenizer is not the target's (compared by vocabulary: token -> id), or None."""
    target_vocab, draft_vocab = _vocab(target.tokenizer), _vocab(draft.tokenizer)
    if target_vocab == draft_vocab:
        return None
    if target_vocab is None or draft_vocab is None:
        return "one of them has no tokenizer"
    differing = next((t for t in target_vocab if draft_vocab.get(t) != target_vocab[t]), None)
    if differing is None:
        differing = next(t for t in draft_vocab if t not in target_vocab)
    return (f"{len(draft_vocab)} vs {len(target_vocab)} tokens, and token {differing!r} is "
            f"{draft_vocab.get(differing)} in the draft's but {target_vocab.get(differing)} in the target's")


def _vocab(tokenizer) -> dict[str, int] | None:
    return None if tokenizer is None else dict(tokenizer.get_vocab())


def _tokenizer_name(target: Target) -> str:
    tokenizer = target.tokenizer
    if tokenizer is None:
        return f"{target.name} (no tokenizer)"
    return f"{type(tokenizer).__name__} of {getattr(tokenizer, 'name_or_path', '') or target.name}"


class DraftLMProposer(ProposerBase):
    """A `Proposer` backed by a small causal LM that shares the target's tokenizer.

    `propose_tree(session, builder, budget, temperature, generator)` grows
    the round's tree for the builder spec the decode asks for: a fixed one
    by its expansion (children per node at each depth, the best-first
    prefixes kept where the spec says), a sampled one by drawing from each
    node's own draft row at the round's temperature with the round's
    generator; `propose(session)` gives the rows of the draft's greedy
    chain, for callers that build trees from rows themselves.
    """

    hidden_layers: tuple[int, ...] = ()
    stand_in = False

    def __init__(self, draft: Target, target: Target, depth: int = DEFAULT_DEPTH) -> None:
        mismatch = tokenizer_mismatch(target, draft)
        if mismatch is not None:
            raise ValueError(f"the draft LM {draft.name!r} does not share the target's tokenizer "
                             f"({_tokenizer_name(draft)} vs {_tokenizer_name(target)}: {mismatch})")
        if depth < 1:
            raise ValueError(f"draft depth must be >= 1, got {depth}")
        self.draft, self.model = draft, draft.model
        self.depth = int(depth)
        self.vocab_size = target.vocab_size
        self.name = f"draft LM {draft.name} (K={self.depth})"
        self.cache: DynamicCache | None = None
        self.cached_tokens: list[int] = []  # the tokens whose keys and values the draft cache holds
        self._lock = threading.Lock()  # one cache: decodes sharing this proposer (app sessions) take turns

    @property
    def hf_assistant(self) -> HFAssistant:
        """The draft model as transformers' assisted generation takes it (`bench` runs it as a peer row)."""
        return HFAssistant(self.model, f"HF assisted generation ({self.draft.name})")

    def propose(self, session: TargetSession) -> torch.Tensor:
        """(depth x V) draft log-probs along the draft's own greedy chain."""
        grown = self.grow(session, BUILDER_FAMILIES["chain"].spec(), self.depth, keep_rows=True)
        return torch.stack([grown.rows[node] for node in range(len(grown.rows))])

    def propose_tree(self, session: TargetSession, builder: BuilderSpec, budget: int, temperature: float,
                     generator: torch.Generator, mix: RowMix | None = None) -> DraftTree:
        if builder.sampled:
            return self.sample(session, builder.shape, budget, temperature, generator, mix)
        return self.grow(session, builder, budget, mix=mix).tree

    @torch.inference_mode()
    def sample(self, session: TargetSession, shape: SampledShape, budget: int, temperature: float,
               generator: torch.Generator, mix: RowMix | None = None) -> DraftTree:
        """The round's sampled tree: each node's children drawn from the draft's row given that node's path.

        `grow_sampled` asks for one depth's rows at a time; they come from
        one draft forward over that depth's nodes (the root's from the
        cache sync), each node seeing the context and its own ancestors.
        """
        check_levels(shape, self.depth)
        budget = check_budget(budget)
        with self._lock:
            committed = list(session.committed)
            context = len(committed)
            root_row = self._root_draft_logp(committed)
            columns: dict[int, int] = {}

            def level_rows(nodes: list[int], tokens: list[int], parents: list[int]) -> tuple[torch.Tensor, list[int]]:
                rows = root_row if nodes == [0] else self._expand(tokens, parents, columns, nodes, context)
                return _mixed(rows, nodes, tokens, parents, mix).cpu(), list(range(len(nodes)))

            try:
                return grow_sampled(committed[-1], level_rows, shape, budget, temperature,
                                    lambda q, k, replace: draw_proposals(q, k, replace, generator))
            finally:
                self._crop(context)

    @torch.inference_mode()
    def grow(self, session: TargetSession, builder: BuilderSpec, budget: int, keep_rows: bool = False,
             mix: RowMix | None = None) -> DraftGrowth:
        """The round's tree under `builder` and `budget`, one draft forward per depth."""
        budget = check_budget(budget)
        widths = builder.expansion(budget, self.depth)
        with self._lock:
            return self._grow(session.committed, builder, budget, widths, keep_rows, mix)

    def _grow(self, committed: list[int], builder: BuilderSpec, budget: int, widths: list[int],
              keep_rows: bool, mix: RowMix | None) -> DraftGrowth:
        """Sync the cache to `committed`, expand one frontier per depth, crop the tree's entries away."""
        context = len(committed)
        pool = _Pool(tokens=[committed[-1]], parents=[-1], scores=[0.0], depths=[0])
        frontier, logp = [0], self._root_draft_logp(committed)
        try:
            for depth in range(1, len(widths) + 1):
                logp = _mixed(logp, frontier, pool.tokens, pool.parents, mix)
                if keep_rows:
                    pool.rows.update(zip(frontier, logp))
                width = min(widths[depth - 1], self.vocab_size)
                top_logq, top_tokens = logp.topk(width, dim=-1)
                top_logq, top_tokens = top_logq.float().cpu().tolist(), top_tokens.cpu().tolist()
                added = [n for node, lq, tk in zip(frontier, top_logq, top_tokens)
                         for n in pool.add_children(node, lq, tk)]
                frontier = _best_first_frontier(pool, added, budget) if builder.keeps_best else added
                if depth == len(widths) or not frontier:
                    break
                logp = self._expand(pool.tokens, pool.parents, pool.columns, frontier, context)
        finally:
            self._crop(context)
        if builder.keeps_best:
            return self._best_first_tree(pool, budget)
        tree = tree_from_prefix_scores(pool.tokens, pool.parents, pool.scores, budget)
        return DraftGrowth(tree, pool.rows)

    def _best_first_tree(self, pool: _Pool, budget: int) -> DraftGrowth:
        """grow_best_first over the expanded nodes' ranked children (its order and tie-breaking)."""
        in_pool = {0: 0}

        def children(node: int, grown: PartialTree) -> tuple[list[float], list[int]]:
            if node not in in_pool:
                in_pool[node] = pool.child[(in_pool[grown.parents[node]], grown.tokens[node])]
            return pool.ranked.get(in_pool[node], ([], []))

        grown = grow_best_first(pool.tokens[0], budget, children)
        tree = tree_from_prefix_scores(grown.tokens, grown.parents, grown.scores, budget)
        rows = {node: pool.rows[in_pool[node]] for node in range(tree.num_nodes)
                if node in in_pool and in_pool[node] in pool.rows}
        return DraftGrowth(tree, rows)

    def _root_draft_logp(self, committed: list[int]) -> torch.Tensor:
        """Bring the draft cache to the committed tokens; the root's (1, V) draft log-probs."""
        common = 0
        limit = min(len(self.cached_tokens), len(committed) - 1)  # the root is always fed: its row is needed
        while common < limit and self.cached_tokens[common] == committed[common]:
            common += 1
        if self.cache is None:
            # every position stays in the cache: the frontier masks index them all
            self.cache = roomy_cache(self.model.config, len(committed) + FIRST_ROOM)
        self._crop(common)
        ids = torch.tensor([committed[common:]], device=self.draft.device)
        positions = torch.arange(common, len(committed), device=self.draft.device)[None]
        logits = self.model(input_ids=ids, position_ids=positions, cache=self.cache, use_cache=True,
                            **one_logit_row(self.model)).logits[0, -1:]
        self.cached_tokens = list(committed)
        return self._log_probs(logits)

    def _expand(self, tokens: list[int], parents: list[int], columns: dict[int, int], frontier: list[int],
                context: int) -> torch.Tensor:
        """One forward of the frontier's tokens, each seeing the context and its own ancestors; (F, V) rows.

        `columns` maps every tree node fed so far to its draft cache position;
        the frontier's nodes join it here.
        """
        start = self.cache.get_seq_length()
        columns.update((node, start + row) for row, node in enumerate(frontier))
        device = self.draft.device
        paths = [path_of(parents, node)[1:] for node in frontier]  # each node and its ancestors below the root
        mask = frontier_mask(context, start + len(frontier), [[columns[n] for n in path] for path in paths],
                             self.model.dtype, device)
        ids = torch.tensor([[tokens[n] for n in frontier]], device=device)
        positions = torch.tensor([[context - 1 + len(path) for path in paths]], device=device)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         cache=self.cache, use_cache=True)
        return self._log_probs(out.logits[0])

    def _log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Draft log-probs over the target's ids (a wider draft head is cut, a narrower one padded with -inf)."""
        logits = logits[:, :self.vocab_size].float()
        if logits.shape[1] < self.vocab_size:
            logits = torch.nn.functional.pad(logits, (0, self.vocab_size - logits.shape[1]), value=-math.inf)
        return torch.log_softmax(logits, -1)

    def _crop(self, length: int) -> None:
        """Keep the first `length` cached positions and the tokens they hold."""
        truncate(self.cache, length)
        self.cached_tokens = self.cached_tokens[:length]


def _mixed(rows: torch.Tensor, nodes: list[int], tokens: list[int], parents: list[int],
           mix: RowMix | None) -> torch.Tensor:
    """`rows` (one per node of `nodes`) with `mix` applied to each given its node's path (as is without one)."""
    if mix is None:
        return rows
    return torch.stack([mix([tokens[n] for n in path_of(parents, node)[1:]], row) for node, row in zip(nodes, rows)])


def _best_first_frontier(pool: _Pool, added: list[int], budget: int) -> list[int]:
    """The new nodes still among the top-`budget` prefixes seen so far (ties kept; never a -inf prefix)."""
    best = heapq.nlargest(budget, (s for s in pool.scores[1:] if s > -math.inf))
    if not best:
        return []
    threshold = best[-1]
    return [n for n in added if pool.scores[n] >= threshold and pool.scores[n] > -math.inf]


def looks_like_folder(spec: str) -> bool:
    """A path rather than a hub id ('name' or 'owner/name')."""
    return spec.startswith(("/", ".", "~")) or spec.count("/") > 1 or "\\" in spec or Path(spec).expanduser().exists()


def load_draft_lm(spec: str, target: Target, depth: int = DEFAULT_DEPTH) -> DraftLMProposer:
    """The proposer of `model:<hub id or folder>`, on the target's device and dtype; one-line errors."""
    from huggingface_hub import constants

    if not spec:
        raise ValueError(f"'{MODEL_PREFIX}' needs a hub id or a model folder after it")
    folder = looks_like_folder(spec)
    if folder and not Path(spec).expanduser().is_dir():
        raise ValueError(f"draft LM folder not found: {spec}")
    try:
        draft = load_target(spec, device=str(target.device), dtype=target.model.dtype)
    except (OSError, ValueError, KeyError) as err:
        if not folder and constants.HF_HUB_OFFLINE:
            raise ValueError(f"draft LM {spec!r} is a hub id, the hub is offline (HF_HUB_OFFLINE) and it is not in "
                             f"the local cache: give a local model folder instead") from None
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"draft LM {spec!r} is not a causal LM transformers can load: {reason}") from None
    return DraftLMProposer(draft, target, depth=depth)


def _load_kind(source: str, target: Target, options: LoadOptions) -> DraftLMProposer:
    proposer = load_draft_lm(source, target)
    proposer.name = options.name or proposer.name
    return proposer


KIND = DrafterKind("draft-lm", MODEL_PREFIX + "<hub id or folder>", "a draft LM with the target's tokenizer",
                   prefixed(MODEL_PREFIX), _load_kind)
