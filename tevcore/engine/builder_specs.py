"""Builder requests: which kinds of builder exist, and the one parser of builder names into a `BuilderSpec`.

Each kind of builder is one `BuilderFamily` entry in `BUILDER_FAMILIES` (its
name, what its counts mean, the traits of its trees, the function from
`builders.py` that grows them); `parse_builder` turns a name like
'sampled:3,2,1' into the `BuilderSpec` the loop, the proposers and the app
pass around, so a name is parsed once, where it is typed. The tree-growing
functions live in `builders.py`; this module imports them, never the reverse.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import torch

from tevcore.engine.builders import (POLICY_SHARP, Build, Rows, best_first, chain, check_budget, check_width_budget,
                                     fixed_width, sampled_build, sampled_shape)
from tevcore.engine.sampled import SampledShape
from tevcore.engine.tree import DRAWN, DRAWN_CHAIN, DraftTree
from tevcore.parsing import comma_list


@dataclass(frozen=True)
class BuilderFamily:
    """One kind of builder, stated once: its name, what its counts mean, the traits of its trees, how it builds.

    Adding a family is one entry in `BUILDER_FAMILIES`; the parser, the help
    texts, the pairing with rules (through `traits`) and the app's menu read it.
    """

    kind: str  # the name before the colon: 'best_first', 'width', 'sampled', ...
    help: str  # one line: what a tree of this family is
    make: Callable[..., Build]  # counts (and the options, where it takes any) -> the function that builds a tree
    counts: str | None = None  # how the counts after the colon are written, 'W1,W2,...' (None: it takes none)
    counts_help: str = ""  # what they mean: 'nodes per depth'
    example: str | None = None  # counts a menu opens with
    traits: Callable[[tuple[int, ...]], frozenset[str]] = lambda counts: frozenset()  # noqa: E731
    replace: bool | None = None  # draws with replacement (True), without (False); None: nothing is drawn
    fixes_top1: bool = False  # each node's top-1 child of q fixed (a point-mass draw), its siblings drawn: mixed
    check_budget: Callable[[tuple[int, ...], int], None] | None = None  # refuse a shape the budget cannot hold
    # the options its name may carry after '@' ('qt': proposal temperature, 'sib': rows given each sibling's path)
    options: tuple[str, ...] = ()
    # for a proposer that grows a fixed tree itself (a draft LM): children per expanded node at each depth, from
    # (counts, budget, proposer depth); and whether the tree is then the top-`budget` prefixes of what it expanded
    expansion: Callable[[tuple[int, ...], int, int], list[int]] | None = None
    keeps_best: bool = False

    @property
    def draws(self) -> bool:
        """Whether its trees' children are drawn from the drafter's q (with or without replacement)."""
        return self.replace is not None

    @property
    def pattern(self) -> str:
        """How a name of this family is written: 'best_first', 'width:W1,W2,...'."""
        return self.kind if self.counts is None else f"{self.kind}:{self.counts}"

    def spec(self, counts: str | tuple[int, ...] = (), budget: int | None = None,
             options: tuple[tuple[str, float], ...] = ()) -> BuilderSpec:
        """This family's spec with `counts` (text like '4,2,1', or numbers) and `options`, checked here."""
        for key, value in options:
            if key not in self.options:
                raise ValueError(f"builder {self.kind!r} takes "
                                 + (f"the options {', '.join(self.options)}" if self.options else "no options")
                                 + f", not {key!r}")
            if key == "sib" and value != 1:
                raise ValueError(f"builder option sib is written @sib1 (rows given each sibling's path), "
                                 f"got sib{value:g}")
            if not (math.isfinite(value) and value > 0) or (key == "sharp" and value > 1):
                raise ValueError(f"builder option {key} must be a number above 0" +
                                 (" and at most 1" if key == "sharp" else "") + f", got {value:g}")
        if self.counts is None:
            if counts:
                raise ValueError(f"builder {self.kind!r} takes no counts, got {counts!r}")
            return BuilderSpec(self, (), options)
        values = tuple(comma_list(counts, int, f"{self.counts_help} like '{self.kind}:{self.example}'")
                       if isinstance(counts, str) else (int(c) for c in counts))
        if not values or any(v < 1 for v in values):
            raise ValueError(f"builder {self.kind}:{','.join(map(str, values))}: the {self.counts_help} must be "
                             "positive integers")
        if budget is not None and self.check_budget is not None:
            self.check_budget(values, budget)
        return BuilderSpec(self, values, tuple(options))


@dataclass(frozen=True)
class BuilderSpec:
    """A parsed builder name, the value the loop, the proposers and the app pass around.

    `spec(root, rows, budget, temperature, generator)` builds the round's
    tree: a fixed builder ignores the temperature and the generator; a
    sampled one draws from the rows at that temperature with that generator.
    """

    family: BuilderFamily
    counts: tuple[int, ...] = ()  # widths of a fixed-width tree, draws per node of a sampled one
    options: tuple[tuple[str, float], ...] = ()  # (key, value) in the order typed: 'mixed@qt0.7:3,2,1'

    @property
    def kind(self) -> str:
        return self.family.kind

    @property
    def name(self) -> str:
        """The name as typed ('sampled:3,2,1', 'mixed@qt0.7:3,2,1'): what records, tables and files keep."""
        return (self.kind + "".join(f"@{key}{value:g}" for key, value in self.options)
                + (":" + ",".join(map(str, self.counts)) if self.counts else ""))

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"BuilderSpec({self.name!r})"

    def __reduce__(self):
        """Pickled as its name (a family holds functions): torchrun ranks gather results that carry a spec."""
        return parse_builder, (self.name,)

    @property
    def traits(self) -> frozenset[str]:
        """The `TREE_TRAITS` every tree of this spec has (what a rule may need of it)."""
        return self.family.traits(self.counts)

    @property
    def sampled(self) -> bool:
        """Whether the children are drawn from the drafter's q (the tree records its draws)."""
        return DRAWN in self.traits

    @property
    def replace(self) -> bool | None:
        return self.family.replace

    @property
    def depth(self) -> int | None:
        """Drafter depths the shape needs (None: any)."""
        return len(self.counts) or None

    @property
    def shape(self) -> SampledShape:
        """The draw mode and counts of a sampled spec (a ValueError for a fixed one)."""
        if self.replace is None:
            raise ValueError(f"builder {self.name!r} draws nothing: it has no sampled shape")
        return sampled_shape("iid" if self.replace else "wor", self.counts, self.family.fixes_top1,
                             **self._option_values())

    def _option_values(self) -> dict[str, float]:
        """The options as keywords, with a policy's default threshold where its name gives none."""
        values = dict(self.options)
        if "sharp" in self.family.options:
            values.setdefault("sharp", POLICY_SHARP)
        return values

    def expansion(self, budget: int, depth: int) -> list[int]:
        """Children per expanded node at each depth when a proposer grows this fixed tree itself."""
        if self.family.expansion is None:
            raise ValueError(f"builder {self.name!r} draws its tree: it has no fixed expansion")
        self.check_depth(depth)
        return self.family.expansion(self.counts, check_budget(budget), depth)

    @property
    def keeps_best(self) -> bool:
        """Whether the tree is the top-`budget` prefixes of the nodes expanded (best-first)."""
        return self.family.keeps_best

    def __call__(self, root_token: int, depth_logq: Rows, budget: int | None, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> DraftTree:
        make = self.family.make(self.counts, **self._option_values()) if self.family.options else \
            self.family.make(self.counts)
        return make(root_token, depth_logq, budget, temperature, generator)

    def check_depth(self, drafter_depth: int) -> None:
        """Refuse a shape deeper than the drafter's rows, before any work."""
        if self.depth is not None and self.depth > drafter_depth:
            raise ValueError(f"builder {self.name!r} needs {self.depth} draft depths but the proposer gives "
                             f"{drafter_depth}")


def _drawn(counts: tuple[int, ...]) -> frozenset[str]:
    """Children drawn from q; a chain drawn one draw per node when every count is 1."""
    return frozenset({DRAWN, DRAWN_CHAIN} if all(c == 1 for c in counts) else {DRAWN})


BUILDER_FAMILIES: dict[str, BuilderFamily] = {family.kind: family for family in (
    BuilderFamily("best_first", "the top-B prefixes by draft score, grown with a heap (DDTree)",
                  lambda counts: lambda root, logq, budget, t, g: best_first(root, logq, budget),
                  expansion=lambda counts, budget, depth: [budget] * min(depth, budget), keeps_best=True),
    BuilderFamily("chain", "the top-1 path",
                  lambda counts: lambda root, logq, budget, t, g: chain(root, logq, budget),
                  expansion=lambda counts, budget, depth: [1] * min(depth, budget)),
    BuilderFamily("width", "fixed widths: every node at depth d-1 gets the top W_d tokens",
                  lambda counts: lambda root, logq, budget, t, g: fixed_width(root, logq, list(counts), budget),
                  counts="W1,W2,...", counts_help="widths (nodes per depth)", example="4,2,2,1",
                  check_budget=lambda counts, budget: check_width_budget(list(counts), budget),
                  expansion=lambda counts, budget, depth: list(counts)),
    BuilderFamily("sampled", "children drawn i.i.d. from the drafter's q: K1 draws at the root, K2 at each "
                  "depth-1 node, ... (equal draws share a node; all 1 is a sampled chain)",
                  sampled_build("iid"), counts="K1,K2,...", counts_help="draw counts (per node, at each depth)",
                  example="3,2,1", traits=_drawn, replace=True),
    BuilderFamily("sampled-wor", "children drawn from q without replacement, K1 at the root, K2 at each "
                  "depth-1 node, ...", sampled_build("wor"), counts="K1,K2,...",
                  counts_help="draw counts (per node, at each depth)", example="3,2,1",
                  traits=_drawn, replace=False),
    # mixed trees are drawn but never a drawn chain: their fixed children were chosen, not drawn from q
    BuilderFamily("mixed", "each node's top-1 child of q fixed and K - 1 siblings drawn i.i.d. from q without it: "
                  "K1 children at the root, K2 at each depth-1 node, ...", sampled_build("iid", fixes_top1=True),
                  counts="K1,K2,...", counts_help="children per node at each depth (the top-1 fixed)",
                  example="3,2,1", traits=lambda counts: frozenset({DRAWN}), replace=True, fixes_top1=True),
    BuilderFamily("mixed-wor", "each node's top-1 child of q fixed and K - 1 siblings drawn from q without it, "
                  "without replacement", sampled_build("wor", fixes_top1=True), counts="K1,K2,...",
                  counts_help="children per node at each depth (the top-1 fixed)", example="3,2,1",
                  traits=lambda counts: frozenset({DRAWN}), replace=False, fixes_top1=True, options=("qt",)),
    BuilderFamily("policy", "a shape per node from the draft row alone: where q's top-1 holds at least 'sharp' "
                  f"(default {POLICY_SHARP:g}) the top K tokens all fixed, elsewhere the top-1 fixed and K - 1 "
                  "siblings drawn i.i.d. from q without it; at T = 0 the best-first tree, every child fixed",
                  sampled_build("iid", fixes_top1=True, policy=True), counts="K1,K2,...",
                  counts_help="children per node at each depth", example="3,2,1",
                  traits=lambda counts: frozenset({DRAWN}), replace=True, fixes_top1=True,
                  options=("qt", "sharp")),
)}
# every drawn family takes a proposal temperature of its own, and rows given each sibling's path
for _kind in ("sampled", "sampled-wor", "mixed", "mixed-wor", "policy"):
    BUILDER_FAMILIES[_kind] = dataclasses.replace(
        BUILDER_FAMILIES[_kind], options=tuple(dict.fromkeys(BUILDER_FAMILIES[_kind].options + ("qt", "sib"))))
del _kind


def builder_patterns() -> list[str]:
    """How each family's names are written, for help texts and menus."""
    return [family.pattern for family in BUILDER_FAMILIES.values()]


def sampled_builder_help() -> str:
    """The help of a flag that takes only builders whose trees are drawn."""
    return "; ".join(f"{f.pattern} = {f.help}" for f in BUILDER_FAMILIES.values() if f.draws)


def builder_help() -> str:
    """The help of a builder flag, from the families."""
    return "; ".join(f"{family.pattern} = {family.help}" for family in BUILDER_FAMILIES.values())


def parse_builder(text: str, budget: int | None = None) -> BuilderSpec:
    """The one parser of builder names: 'best_first', 'chain', 'width:4,2,1', 'sampled:3,2,1', ...

    With a budget, a shape that cannot fit it is refused here, before any work.
    """
    if isinstance(text, BuilderSpec):
        raise TypeError("parse_builder takes a builder name; this is already a parsed spec")
    head, colon, counts = str(text).partition(":")
    kind, *typed = head.split("@")
    family = BUILDER_FAMILIES.get(kind)
    if family is None or (colon and family.counts is None) or (not colon and family.counts is not None):
        raise ValueError(f"unknown builder {text!r}; choose {', '.join(builder_patterns())}")
    return family.spec(counts, budget, tuple(_option(text, item) for item in typed))


def _option(text: str, item: str) -> tuple[str, float]:
    """One '@key<number>' option of a builder name: ('qt', 0.7) from 'qt0.7'."""
    key = item.rstrip("0123456789.eE+-")
    try:
        return key, float(item[len(key):])
    except ValueError:
        raise ValueError(f"builder {text!r}: an option is written @<name><number>, like @qt0.7, "
                         f"not @{item}") from None


def parse_builder_list(text: str) -> list[BuilderSpec]:
    """Builders of a comma-separated flag, where a shape's own counts also use commas:
    'best_first,sampled:3,2,1,chain' -> best_first, sampled:3,2,1, chain. Each name is checked."""
    names: list[str] = []
    for item in comma_list(text, str, "builder names"):
        if item.isdigit() and names and ":" in names[-1]:
            names[-1] += "," + item
        else:
            names.append(item)
    return [parse_builder(name) for name in names]
