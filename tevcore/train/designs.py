"""Tree designs compared at the same contexts: every design's expected accepted length at every position of ONE
autoregressive decode, and each design's paired difference from the first (or, asked for, from every other), with
standard errors clustered by prompt (what `shared_start_coverage` does for drafters, here for (builder, rule)
pairs).

A design is a builder and the law its verdicts follow: a registry rule
(`tev` on a fixed tree gives 1 + C; `rrs` on a drawn tree its own law), or
`rrs-fixed-first`, the earlier point-mass-first order on mixed trees (a law
kept for this comparison, not a rule). At a position, a fixed builder's
tree is built once and its E[L] is exact; a drawn builder's trees are drawn
`draws` times afresh and their exact E[L | tree] averaged, which estimates
E[L] over the draw. Every tree of every design is merged into one tree
(`tree.union`) and scored in one target forward; the decode then draws its
next token from the root row, so every design sees the same contexts and
the differences are paired.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import mean
from typing import Callable

import torch

from tevcore.engine.builder_specs import BuilderSpec, parse_builder
from tevcore.engine.sampling import draw_seed, make_generator
from tevcore.engine.tree import DraftTree, union
from tevcore.lab.datasets import Prompt
from tevcore.ranks import gather
from tevcore.results import Column, format_table
from tevcore.target.loading import Target
from tevcore.target.session import TargetSession
from tevcore.train.eval import PromptLike, _clustered_se, walk_decode
from tevcore.verify.laws import VerdictLaw, rrs_fixed_first_law
from tevcore.verify.registry import check_pairing, rule_law

FIXED_FIRST = "rrs-fixed-first"  # the earlier order on mixed trees: a law, not a registered rule
LawFn = Callable[[DraftTree, torch.Tensor, float], VerdictLaw]


@dataclass(frozen=True)
class Design:
    """A builder and the rule (or the kept law) its trees are verified by: 'mixed:2,1,1,1=rrs'."""

    builder: BuilderSpec
    rule: str

    @property
    def name(self) -> str:
        return f"{self.builder.name} + {self.rule}"

    def law(self, tree: DraftTree, logits: torch.Tensor, temperature: float) -> VerdictLaw:
        if self.rule == FIXED_FIRST:
            return rrs_fixed_first_law(tree, logits, temperature)
        return rule_law(self.rule, tree, logits, temperature)


def parse_design(text: str) -> Design:
    """The one parser of design names: BUILDER=RULE, the builder any builder name, the rule one the registry
    pairs with it (or rrs-fixed-first on a drawn builder)."""
    builder_text, equals, rule = str(text).rpartition("=")
    if not equals or not builder_text or not rule:
        raise ValueError(f"a design is written BUILDER=RULE, like best_first=tev or mixed:2,1,1=rrs, not {text!r}")
    builder = parse_builder(builder_text)
    check_pairing("rrs" if rule == FIXED_FIRST else rule, builder)
    return Design(builder, rule)


@dataclass(frozen=True)
class DesignCell:
    """One design at one budget over a set of positions: its mean E[L], and its paired difference from the
    baseline design (the first, or with `all_pairs` any design listed before it), both with standard errors
    clustered by prompt."""

    temperature: float
    budget: int
    prompt_set: str
    prompts: int
    positions: int
    design: str
    baseline: str
    length: float
    length_se: float
    difference: float
    difference_se: float


def _trees(design: Design, session: TargetSession, proposer, budget: int, temperature: float, draws: int,
           generator: torch.Generator, rows: dict) -> list[DraftTree]:
    """The design's trees at this context: one for a fixed builder, `draws` fresh ones for a drawn one. A block
    drafter's rows are drafted once per position (`rows` caches them); a draft LM grows each tree itself."""
    count = draws if design.builder.sampled else 1
    out = []
    for _ in range(count):
        tree = proposer.propose_tree(session, design.builder, budget, temperature, generator)
        if tree is None:
            if "rows" not in rows:
                rows["rows"] = proposer.propose(session)
            tree = design.builder(session.root_token, rows["rows"], budget, temperature, generator)
        out.append(tree)
    return out


def compare_designs(target: Target, proposer, designs: list[Design], prompts: list[PromptLike], temperature: float,
                    budgets: list[int], draws: int = 4, max_new_tokens: int = 64, seed: int = 0,
                    by_set: bool = False, progress: bool = True, all_pairs: bool = False) -> list[DesignCell]:
    """Every design's E[L] at every position of one decode of each prompt, at each budget (see the module), and
    its paired difference from the first design; with `all_pairs`, also one cell per later design for every
    other baseline (each pair once), so two designs after the first are compared with their own paired s.e.
    instead of through the first."""
    if not designs:
        raise ValueError("compare at least one design")
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    sets = [p.dataset if isinstance(p, Prompt) else "given" for p in prompts]
    measured: list[tuple[int, list[list[float]]]] = []  # (prompt, per design per budget E[L]) per position
    generators: dict[int, torch.Generator] = {}

    def measure(index: int, session: TargetSession) -> torch.Tensor:
        generator = generators.setdefault(index, make_generator(draw_seed(seed, "designs", temperature, index)))
        rows: dict = {}
        groups = [[_trees(design, session, proposer, budget, temperature, draws, generator, rows)
                   for budget in budgets] for design in designs]
        flat = [tree for per_design in groups for per_budget in per_design for tree in per_budget]
        merged, where = union(flat)
        logits = session.score_tree(merged).logits
        lengths, k = [], 0
        for design, per_design in zip(designs, groups):
            lengths.append([])
            for per_budget in per_design:
                found = [design.law(tree, logits[where[k + i]], temperature).expected_length
                         for i, tree in enumerate(per_budget)]
                k += len(per_budget)
                lengths[-1].append(mean(found))
        measured.append((index, lengths))
        return logits[0]

    walk_decode(target, prompts, temperature, max_new_tokens, seed, proposer.depth, measure,
                proposer.hidden_layers, progress, desc=f"designs T={temperature}")
    positions = sorted(gather(measured), key=lambda row: row[0])
    where = [index for index, _ in positions]
    groups = {"all": list(range(len(where)))}
    if by_set:
        for i, index in enumerate(where):
            groups.setdefault(sets[index], []).append(i)
    cells = []
    baselines = range(len(designs)) if all_pairs else range(1)
    for j, budget in enumerate(budgets):
        for name, rows in groups.items():
            clusters = [where[i] for i in rows]
            for b in baselines:
                base = [positions[i][1][b][j] for i in rows]
                for d, design in enumerate(designs):
                    if b and d <= b:  # each pair once; a design against itself only in the first block
                        continue
                    values = [positions[i][1][d][j] for i in rows]
                    diffs = [v - w for v, w in zip(values, base)]
                    cells.append(DesignCell(float(temperature), budget, name, len(set(clusters)), len(rows),
                                            design.name, designs[b].name, mean(values),
                                            _clustered_se(values, clusters), mean(diffs),
                                            _clustered_se(diffs, clusters) if d != b else 0.0))
    return cells


DESIGN_COLUMNS = (
    Column("T", "temperature", "g"), Column("B", "budget", "d"), Column("prompts", "prompt_set"),
    Column("n", "prompts", "d"), Column("positions", "positions", "d"), Column("design", "design"),
    Column("E[L]", "length", ".3f"), Column("(s.e.)", lambda c: f"({c['length_se']:.3f})", "s"),
    Column("vs first", "difference", "+.3f"), Column("(s.e.)", lambda c: f"({c['difference_se']:.3f})", "s"),
    Column("%", lambda c: 100 * c["difference"] / (c["length"] - c["difference"]), "+.1f"))


PAIR_COLUMNS = (
    Column("T", "temperature", "g"), Column("B", "budget", "d"), Column("prompts", "prompt_set"),
    Column("design", "design"), Column("minus", "baseline"), Column("difference", "difference", "+.3f"),
    Column("(s.e.)", lambda c: f"({c['difference_se']:.3f})", "s"),
    Column("%", lambda c: 100 * c["difference"] / (c["length"] - c["difference"]), "+.1f"))


def format_designs(cells: list[DesignCell]) -> str:
    """Each design's E[L] and its paired difference from the first design; then, where the cells hold other
    baselines (`all_pairs`), a table of those paired differences."""
    first: dict[tuple, str] = {}  # (T, B, prompt set) -> its first baseline: the first design
    against_first, pairs = [], []
    for row in designs_to_json(cells):
        baseline = first.setdefault((row["temperature"], row["budget"], row["prompt_set"]), row["baseline"])
        (against_first if row["baseline"] == baseline else pairs).append(row)
    text = format_table(against_first, DESIGN_COLUMNS)
    if pairs:
        text += "\n\npaired differences between designs after the first (design minus the other):\n" + \
            format_table(pairs, PAIR_COLUMNS)
    return text


def designs_to_json(cells: list[DesignCell]) -> list[dict]:
    return [asdict(cell) for cell in cells]

