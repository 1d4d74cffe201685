"""The workshop's lessons, as data: each is one `Lesson` entry in `LESSONS`.

A lesson has a small setting (`lesson_settings`: a hand-written tree with the target's probabilities after each
node, a target row and a drafter row, or the toy target), one question with a checkable answer (a number within a
tolerance, or one of a few choices), a truth that the package's own functions compute on that setting (the
engine's flow, the registry's laws, the shipped verifiers, the simulator and its chi-square), and a short
explanation that points at the figure the page draws from the truth. Adding a lesson is one more entry; its test
(tests/studio/test_lessons.py) checks its truth against the formula of shared/docs/exit-law.md or
sampled-trees.md on its setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from tevcore.engine.builders import chain
from tevcore.engine.flow import TargetFlow, target_flow
from tevcore.engine.sampling import make_generator
from tevcore.engine.tree import DraftTree, path_of
from tevcore.lab.simulate import simulate
from tevcore.studio.lesson_settings import (TOY_WORDS, HandTree, Rows, drawn_tree, hand_tree, rows_after, toy_greedy,
                                            toy_logits)
from tevcore.verify.laws import exit_law, exit_pvalue
from tevcore.verify.registry import rule_law
from tevcore.verify.verifiers import get_verifier

SIMULATED_DRAWS = 20_000  # verifications per rule where a lesson counts draws (the chi-square, the mean lengths)
SEED = 0  # the one seed of every simulated lesson: a truth is a fixed function of its setting
REJECT_BELOW = 0.01  # the chi-square's level


# ---------------------------------------------------------------------- questions and truths

@dataclass(frozen=True)
class NumberAnswer:
    """A number, right when within `tolerance` of the truth."""

    tolerance: float
    low: float = 0.0
    high: float = 1.0
    step: float = 0.01

    def parse(self, raw: object) -> float:
        try:
            value = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(f"the prediction must be a number, got {raw!r}") from None
        if math.isnan(value) or not self.low <= value <= self.high:
            raise ValueError(f"the prediction must lie in [{self.low:g}, {self.high:g}], got {raw!r}")
        return value

    def correct(self, prediction: float | str, truth: float | str) -> bool:
        return abs(float(prediction) - float(truth)) <= self.tolerance + 1e-12


@dataclass(frozen=True)
class ChoiceAnswer:
    """One of `choices`, right when it is the truth."""

    choices: tuple[str, ...]

    def parse(self, raw: object) -> str:
        if raw not in self.choices:
            raise ValueError(f"the prediction must be one of the {len(self.choices)} choices, got {raw!r}")
        return str(raw)

    def correct(self, prediction: float | str, truth: float | str) -> bool:
        return prediction == truth


Answer = NumberAnswer | ChoiceAnswer


@dataclass(frozen=True)
class Bars:
    """A bar chart of the truth: one or more series over `labels`; `marked` the label the answer is about."""

    title: str
    labels: tuple[str, ...]
    series: dict[str, tuple[float, ...]]
    errors: dict[str, tuple[float, ...]] = field(default_factory=dict)  # a series' standard errors, where counted
    marked: str | None = None
    y_title: str = ""


@dataclass(frozen=True)
class Truth:
    """What the package computed on a lesson's setting: the answer, the numbers behind it, what to draw."""

    value: float | str
    facts: tuple[tuple[str, float | str], ...]  # (what, value): shown beside the check
    bars: Bars
    tree: HandTree | None = None  # drawn with its flow (colour P, ring X) where the lesson is about a tree
    flow: TargetFlow | None = None
    path: tuple[int, ...] = (0,)
    exit_node: int | None = None
    bonus_text: str | None = None


@dataclass(frozen=True)
class Lesson:
    """One lesson: everything the page shows and checks, and the function that computes its truth."""

    key: str
    title: str
    setting_text: str  # the setting in words (markdown)
    setting: Callable[[], HandTree | Rows]  # drawn as a table before anything is revealed
    question: str
    answer: Answer
    truth: Callable[[], Truth]
    explanation: str  # two or three sentences pointing at the figure
    heavy: bool = False  # its truth simulates many verifications: computed in a compute-queue turn


# -- 1. where the tree loses mass
def largest_x_setting() -> HandTree:
    return hand_tree("Yesterday I saw", [(0, " a", 0.45), (0, " the", 0.35), (1, " cat", 0.3), (1, " dog", 0.25),
                                         (2, " big", 0.6), (3, " sat", 0.9)],
                     {0: [(" my", 0.1)], 1: [(" bird", 0.2)], 2: [(" old", 0.3)], 5: [(" house", 0.5)]})


def largest_x_truth() -> Truth:
    hand = largest_x_setting()
    flow = target_flow(hand.tree, hand.node_logits, 1.0, missing_k=0)
    node = int(flow.exit_mass.argmax())
    labels = tuple(hand.labels)
    return Truth(labels[node], (("X of that node", float(flow.exit_mass[node])),
                                ("sum of X over the tree", float(flow.exit_mass.sum()))),
                 Bars("X(v) = P(v)(1 − m(v)) per node", labels, {"X(v)": tuple(flow.exit_mass.tolist())},
                      marked=labels[node], y_title="exit mass X"),
                 tree=hand, flow=flow, path=tuple(path_of(hand.tree.parents, node)), exit_node=node)


# -- 2. E[L] = 1 + C for every optimal rule
OPTIMAL_RULES = ("tev", "predraw", "residual")


def optimal_length_setting() -> HandTree:
    return hand_tree("The weather today is", [(0, " sunny", 0.5), (0, " cold", 0.2), (1, " and", 0.6),
                                               (1, " with", 0.2), (3, " warm", 0.5)],
                     {0: [(" nice", 0.2)], 2: [(" but", 0.4)], 3: [(" cool", 0.3)]})


def optimal_length_truth() -> Truth:
    hand = optimal_length_setting()
    flow = target_flow(hand.tree, hand.node_logits, 1.0, missing_k=0)
    laws = {name: rule_law(name, hand.tree, hand.node_logits, 1.0).expected_length for name in OPTIMAL_RULES}
    runs = {name: simulate(name, hand.tree, hand.node_logits, 1.0, SIMULATED_DRAWS, SEED) for name in OPTIMAL_RULES}
    labels = ("1 + C", *(f"{name}: {SIMULATED_DRAWS:,} verifications" for name in OPTIMAL_RULES))
    return Truth(laws["predraw"], (("1 + C of the tree", flow.expected_length),
                                   *((f"E[L] of {name} by its law", laws[name]) for name in OPTIMAL_RULES)),
                 Bars("mean block length: three optimal rules against 1 + C", labels,
                      {"E[L]": (flow.expected_length, *(runs[n].mean_emitted for n in OPTIMAL_RULES))},
                      errors={"E[L]": (0.0, *(runs[n].emitted_stderr for n in OPTIMAL_RULES))},
                      marked="1 + C", y_title="tokens per round"),
                 tree=hand, flow=flow)


# -- 3. greedy follow is autoregressive greedy decoding at T = 0
def greedy_setting() -> HandTree:
    """A tree on the toy target that holds its first two greedy tokens on one branch, among decoys."""
    first, second, third = toy_greedy(3)
    decoy = [t for t in range(1, len(TOY_WORDS)) if t not in (first, second, third)]
    nodes = [(0, decoy[0]), (0, first), (1, decoy[1]), (2, second), (2, decoy[2]), (4, decoy[3])]
    tokens = torch.tensor([0] + [t for _, t in nodes])
    parents = torch.tensor([-1] + [p for p, _ in nodes])
    tree = DraftTree(tokens=tokens, parents=parents, draft_logp=torch.zeros(len(tokens)))
    rows = torch.stack([toy_logits(tokens[path_of(parents, v)[1:]].tolist()) for v in range(tree.num_nodes)])
    return HandTree(tree, torch.log_softmax(rows, -1), TOY_WORDS, "Once upon a time")


def greedy_truth() -> Truth:
    hand = greedy_setting()
    verdict = get_verifier("greedy")(hand.tree, hand.node_logits, 0.0, make_generator(SEED))
    emitted = hand.tree.tokens[verdict.path[1:]].tolist() + [verdict.bonus_token]
    greedy_text = "".join(TOY_WORDS[t] for t in emitted)
    ar_text = "".join(TOY_WORDS[t] for t in toy_greedy(len(emitted)))
    flow = target_flow(hand.tree, hand.node_logits, 0.0, missing_k=0)
    labels = tuple(hand.labels)
    shares = torch.zeros(hand.tree.num_nodes, dtype=torch.float64)
    shares[verdict.exit_node] = 1.0
    return Truth(float(verdict.emitted), (("greedy follow emits", greedy_text),
                                          ("autoregressive greedy, one token at a time", ar_text),
                                          ("the same text", "yes" if greedy_text == ar_text else "no")),
                 Bars("exit node at T = 0 (greedy follow exits there every time)", labels, {"exit share": tuple(
                     shares.tolist())}, marked=labels[verdict.exit_node], y_title="share of rounds"),
                 tree=hand, flow=flow, path=tuple(verdict.path), exit_node=verdict.exit_node,
                 bonus_text=TOY_WORDS[verdict.bonus_token])


# -- 4. a fixed guess is accepted with p(x), a drawn one with 1 - TV(p, q)
def coupling_setting() -> Rows:
    return rows_after("My favourite animal is the", (" cat", " dog", " horse", " owl", " fox"),
                      (0.40, 0.25, 0.15, 0.12, 0.08), (0.15, 0.35, 0.25, 0.15, 0.10))


def coupling_truth() -> Truth:
    rows = coupling_setting()
    fixed = chain(0, rows.q.log().unsqueeze(0), 1)  # the drafter's argmax as the one fixed node
    fixed_accept = float(target_flow(fixed, rows.node_logits, 1.0, missing_k=0).path_prob[1])
    drawn_accept = sum(float(rows.q[t]) * float(rule_law("rrs", drawn_tree(rows, t), rows.node_logits, 1.0)
                                                .exit_probs[1]) for t in torch.nonzero(rows.q > 0).flatten().tolist())
    guess = rows.vocab[int(fixed.tokens[1])]
    labels = (f"fixed guess {guess!r} (any exact rule)", "one node drawn from q (rrs)")
    return Truth(drawn_accept, (("the fixed guess is accepted with p(guess)", fixed_accept),
                                ("the drawn node is accepted with", drawn_accept)),
                 Bars("probability that the one draft token is accepted", labels,
                      {"acceptance": (fixed_accept, drawn_accept)}, marked=labels[1], y_title="probability"))


# -- 5. rrs on a sampled tree can beat the 1 + C of the tree it verifies
def rrs_setting() -> Rows:
    return rows_after("Is it raining? The answer is", (" yes", " no", " maybe"), (0.5, 0.3, 0.2), (0.7, 0.2, 0.1))


DRAWN = 2  # the token the drafter drew in this lesson's round: ' no' (q = 0.2, p = 0.3)


@dataclass(frozen=True)
class DrawnRound:
    """rrs on the one-node tree of one draw: the draw's q, E[L | tree], 1 + C(tree), the first token's law."""

    token: int
    q: float
    rrs_length: float
    yardstick: float
    first_token: torch.Tensor  # (V,) the law of the round's first emitted token, given this tree


def drawn_rounds(rows: Rows) -> list[DrawnRound]:
    """Every tree the one draw can make, with rrs's law on it (the registry's law, read off rrs's tables)."""
    out = []
    for token in torch.nonzero(rows.q > 0).flatten().tolist():
        tree = drawn_tree(rows, token)
        law = rule_law("rrs", tree, rows.node_logits, 1.0)
        first = law.exit_probs[0] * law.bonus_probs(0)
        first[token] += law.exit_probs[1]
        out.append(DrawnRound(token, float(rows.q[token]), law.expected_length,
                              target_flow(tree, rows.node_logits, 1.0, missing_k=0).expected_length, first))
    return out


def rrs_truth() -> Truth:
    rows = rrs_setting()
    rounds = drawn_rounds(rows)
    this = next(r for r in rounds if r.token == DRAWN)
    over_draws = sum(r.q * r.first_token for r in rounds)
    labels = tuple(f"drew {rows.vocab[r.token]!r} (q = {r.q:g})" for r in rounds)
    return Truth(this.rrs_length, (
        ("1 + C of this tree", this.yardstick),
        ("E[L] of rrs on this tree", this.rrs_length),
        ("first token ' no' given this tree (the target says 0.3)", float(this.first_token[DRAWN])),
        ("over the draws: E[L] of rrs", sum(r.q * r.rrs_length for r in rounds)),
        ("over the draws: E[1 + C]", sum(r.q * r.yardstick for r in rounds)),
        ("over the draws: largest gap between the first token's law and p", float((over_draws - rows.p).abs().max()))),
        Bars("each tree the draw can make: rrs's E[L] against its 1 + C", labels,
             {"E[L] of rrs": tuple(r.rrs_length for r in rounds), "1 + C": tuple(r.yardstick for r in rounds)},
             marked=labels[[r.token for r in rounds].index(DRAWN)], y_title="tokens per round"))


# -- 6. the naive ratio rule is not exact: a chi-square catches it
NAIVE_CHOICES = ("yes: the test rejects it (p < 0.01)", "no: its counts pass the test")


def naive_setting() -> HandTree:
    return hand_tree("Please pass the", [(0, " salt", 0.3), (0, " bread", 0.2), (1, " and", 0.5)],
                     {0: [(" butter", 0.3)], 1: [(".", 0.3)]}, q=(0.6, 0.3, 0.9))


def naive_truth() -> Truth:
    hand = naive_setting()
    law = exit_law(hand.tree, hand.node_logits, 1.0)
    runs = {name: simulate(name, hand.tree, hand.node_logits, 1.0, SIMULATED_DRAWS, SEED)
            for name in ("naive_ratio", "tev")}
    pvalues = {name: exit_pvalue(run.exit_counts, law) for name, run in runs.items()}
    labels = tuple(hand.labels)
    return Truth(NAIVE_CHOICES[0] if pvalues["naive_ratio"] < REJECT_BELOW else NAIVE_CHOICES[1], (
        (f"χ² p-value of the naive rule's exits ({SIMULATED_DRAWS:,} verifications)", pvalues["naive_ratio"]),
        (f"χ² p-value of TEV's exits ({SIMULATED_DRAWS:,} verifications)", pvalues["tev"]),
        ("mean block length of the naive rule", runs["naive_ratio"].mean_emitted),
        ("1 + C (what an exact rule averages)", law.flow.expected_length)),
        Bars("exit shares against the exit law X", labels,
             {"X(v)": tuple(law.exit_probs.tolist()),
              **{f"{name} (counted)": tuple(run.exit_shares().tolist()) for name, run in runs.items()}},
             marked=labels[0], y_title="share of verifications"),
        tree=hand, flow=law.flow)


# -- 7. the bonus token, and why it counts in E[L]
BONUS_NODE, BONUS_WORD = 1, " ran"


def bonus_setting() -> HandTree:
    return hand_tree("In the garden the", [(0, " cat", 0.5), (0, " dog", 0.3), (1, " sat", 0.4), (1, " is", 0.2)],
                     {1: [(" ran", 0.3)], 0: [(" bird", 0.1)]})


def bonus_truth() -> Truth:
    hand = bonus_setting()
    law = exit_law(hand.tree, hand.node_logits, 1.0)
    row = law.bonus_probs(BONUS_NODE)
    keep = torch.nonzero(row > 0).flatten().tolist()
    labels = tuple(hand.vocab[t] for t in keep)
    return Truth(float(row[hand.vocab.index(BONUS_WORD)]), (
        ("m(' cat'): the children's share of the target's row", float(law.flow.child_mass[BONUS_NODE])),
        ("p(' ran' | ' cat')", float(hand.probs()[BONUS_NODE, hand.vocab.index(BONUS_WORD)])),
        ("E[L] = 1 + C (the 1 is the bonus)", law.flow.expected_length)),
        Bars("the bonus law at the exit ' cat': p without its children, renormalised", labels,
             {"bonus probability": tuple(float(row[t]) for t in keep)}, marked=BONUS_WORD, y_title="probability"),
        tree=hand, flow=law.flow, path=(0, BONUS_NODE), exit_node=BONUS_NODE, bonus_text=BONUS_WORD)


LESSONS: dict[str, Lesson] = {lesson.key: lesson for lesson in (
    Lesson("largest-x", "Where does the tree lose target mass?",
           "A tree of six draft tokens after *Yesterday I saw*. The table gives the target's probability of each "
           "token after each node; what a node's row leaves of 1 goes to tokens nobody wrote down.",
           largest_x_setting, "Which node has the largest exit mass X(v) = P(v)(1 − m(v))?",
           ChoiceAnswer(tuple(largest_x_setting().labels)), largest_x_truth,
           "The bars are X(v): the target mass that reaches v and goes on into none of v's children. A leaf passes "
           "nothing on, so ' big' loses all of its P = 0.35 × 0.6 and edges out the root and ' a', whose children "
           "catch most of the mass that reaches them; the rings in the tree are the same X, and they add up to 1."),
    Lesson("optimal-length", "E[L] = 1 + C for every optimal rule",
           "A tree of five draft tokens after *The weather today is*. Three exact rules verify it: TEV (one draw of "
           "the exit), predraw-and-follow (one target draw per level) and the sequential residual (children tried "
           "one by one).", optimal_length_setting,
           "What is predraw-and-follow's mean block length E[L] (draft tokens accepted plus the bonus)?",
           NumberAnswer(0.05, 1.0, 6.0), optimal_length_truth,
           "The first bar is 1 + C, with C the sum of P over the tree's nodes; the other bars count "
           f"{SIMULATED_DRAWS:,} verifications of each rule, and all three sit on it within their error bars. "
           "Every optimal exact rule exits at v with X(v), so they share one law and one mean, however differently "
           "they spend their random numbers.", heavy=True),
    Lesson("greedy-is-ar", "Greedy follow is autoregressive greedy decoding at T = 0",
           "A toy target (a seeded row for every prefix) and a tree of six draft tokens after *Once upon a time*, "
           "verified at temperature 0 by greedy follow: follow the argmax child while the target's argmax is a "
           "child; the first argmax that is not a child is the bonus.", greedy_setting,
           "How many tokens does this round emit (accepted draft tokens plus the bonus)?",
           NumberAnswer(0.0, 1.0, 7.0, 1.0), greedy_truth,
           "The highlighted path is the argmax path while the tree holds it; the bonus is the target's argmax where "
           "it leaves the tree. The facts beside the chart show the emitted text equals greedy decoding one token "
           "at a time: at T = 0 the target is a point mass, so 1 + C counts exactly the argmax tokens the tree "
           "holds, plus the bonus."),
    Lesson("coupling", "A fixed guess against a drawn token",
           "The target's row p and the drafter's row q after *My favourite animal is the*. A fixed tree holds the "
           "drafter's best guess; a sampled tree draws its one node from q and verifies it with recursive "
           "rejection (accept x with min(1, p(x)/q(x))).", coupling_setting,
           "With what probability is the drawn node accepted (over the draw and the verdict)?",
           NumberAnswer(0.02), coupling_truth,
           "The left bar is p of the guess: an exact rule on a fixed tree can accept a token only as often as the "
           "target would say it. The right bar is the sum over x of min(p(x), q(x)) = 1 − TV(p, q): drawing from q "
           "couples the draft with the target, so a calibrated drafter wins at high temperature."),
    Lesson("rrs-beats-1-plus-c", "rrs can beat the 1 + C of the very tree it verifies",
           "The same kind of rows after *Is it raining? The answer is*: the drafter drew one node from q and it "
           "drew ' no' (q = 0.2, p = 0.3). rrs verifies that one-node tree; its 1 + C is 1.3.", rrs_setting,
           "What is rrs's E[L] on this tree?", NumberAnswer(0.02, 1.0, 2.0), rrs_truth,
           "The marked pair of bars: rrs accepts ' no' with min(1, 0.3/0.2) = 1, so E[L] = 2 on a tree whose 1 + C "
           "is 1.3. No contradiction: the bound holds for rules that are exact given the tree, and given this tree "
           "rrs always starts with ' no' (the target would only 30% of the time); only over the draws (all the "
           "bars, weighted by q) is its first token a target sample, as the last fact shows."),
    Lesson("naive-chi-square", "The naive ratio rule is not exact",
           "A fixed tree of three nodes after *Please pass the*, with the drafter's q of each node's token. The "
           "naive rule accepts a child with min(1, p/q) as if the child had been drawn from q; it was not.",
           naive_setting,
           f"Count the exit nodes of {SIMULATED_DRAWS:,} naive verifications and test them against X with a "
           f"chi-square. Is the naive rule rejected at the {REJECT_BELOW:g} level?",
           ChoiceAnswer(NAIVE_CHOICES), naive_truth,
           "The bars put the counted exit shares beside X: TEV's sit on X, the naive rule's do not (it stops at the "
           "root far less often than X says, because dividing by q inflates the acceptance). The chi-square turns "
           "that gap into a p-value far below the level, while TEV's p-value is an ordinary one.", heavy=True),
    Lesson("bonus-token", "The bonus token, and why it counts",
           "A tree of four draft tokens after *In the garden the*. A round accepted ' cat' and then the target's "
           "draw after ' cat' was not one of its children (' sat', ' is'): the round exits at ' cat'.",
           bonus_setting, "With what probability is the bonus token ' ran'?", NumberAnswer(0.02), bonus_truth,
           "The bars are the bonus law at the exit: the target's row after ' cat' with its children removed and "
           "renormalised, so ' ran' gets 0.3 / (1 − 0.6). That token is a true target sample given the accepted "
           "path, so it is committed like any accepted token: every round emits depth(exit) + 1 tokens, and the 1 "
           "in E[L] = 1 + C is this bonus."),
)}
