"""Frozen, validated configuration of a decoding run."""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass, field, fields

from tevcore.engine.builder_specs import BuilderSpec, builder_help, parse_builder
from tevcore.engine.flow import DEFAULT_MISSING_K
from tevcore.engine.records import RECORD_LEVELS
from tevcore.engine.sampling import MAX_SEED, check_temperature, check_warpers
from tevcore.verify.registry import check_pairing, verifier_help

DEFAULT_BUDGET = 8
# The temperature of studies of the sampled law (verifier latency, drafter comparisons): decoding itself
# defaults to greedy (DecodeConfig.temperature = 0).
SAMPLING_TEMPERATURE = 1.0
TRIM_HELP = ("per-round tree trimming: 'off' (score the whole drafted tree), 'auto' (score the prefix of the tree "
             "with the most forecast tokens per forward cost, from the cost curve measured on this machine), or a "
             "number X (every tree costs X plain steps: keep the whole tree when its forecast exceeds X, else a "
             "plain step)")


def parse_trim(text: str | float) -> str | float:
    """A trim intent: 'off', 'auto' or a flat cost (a finite number > 0)."""
    if text in ("off", "auto"):
        return text
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"trim must be 'off', 'auto' or a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"a flat trim cost must be a finite number > 0, got {text!r}")
    return value


@dataclass(frozen=True)
class DecodeConfig:
    """How to decode: every field is checked on construction, before any model work."""

    max_new_tokens: int = field(default=128, metadata={"help": "tokens to generate at most", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy; > 0 samples from p^(1/T)", "min": 0.0})
    top_k: int | None = field(default=None, metadata={
        "help": "at T > 0, verify against the target cut to its k most likely tokens (transformers' top_k; "
                "None or 0 = off)"})
    top_p: float | None = field(default=None, metadata={
        "help": "at T > 0, verify against the target cut to its top-p nucleus after top_k (transformers' top_p; "
                "None or 1 = off)"})
    budget: int = field(default=DEFAULT_BUDGET, metadata={"help": "draft-tree node budget (0 = no draft)", "min": 0})
    builder: BuilderSpec | str = field(default="best_first", metadata={"help": builder_help()})  # a name is parsed
    verifier: str = field(default="tev", metadata={"help": verifier_help()})
    seed: int = field(default=0, metadata={"help": "seed of the verifier's random draws", "min": 0})
    stop_tokens: tuple[int, ...] | None = field(default=None, metadata={"help": "None = the model's EOS and chat end tokens"})
    chat: bool = field(default=True, metadata={"help": "wrap a text prompt in the model's chat template"})
    missing_k: int = field(default=DEFAULT_MISSING_K, metadata={"help": "top missing tokens recorded per node (record level full)", "min": 0})
    record: str = field(default="full", metadata={
        "help": "what each round records: full (missing tokens and texts, for the app and `round`) or lean "
                "(what the loop needs: tree, flow, verdict; for benchmarks)"})
    trim: str | float = field(default="off", metadata={"help": TRIM_HELP})
    tree_costs: tuple[float, ...] | None = field(default=None, metadata={
        "help": "the trim's forward cost of a tree of k drafted nodes in one-token forwards, k = 0..budget (None "
                "until a front end resolves the trim on its target: `autobudget.trim_costs`); each round then "
                "scores the prefix of its tree with the most forecast tokens per cost (see tevcore.decoding.trim), "
                "and rounds without cheap evidence skip the drafter while such rounds keep choosing a plain step"})

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "budget", "seed", "missing_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < self.lowest(name):
                raise ValueError(f"{name} must be an integer >= {self.lowest(name)}, got {value!r}")
        if self.seed > MAX_SEED:
            raise ValueError(f"seed must be an integer in [0, {MAX_SEED}], got {self.seed}")
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        top_k, top_p = check_warpers(self.top_k, self.top_p)
        object.__setattr__(self, "top_k", top_k)
        object.__setattr__(self, "top_p", top_p)
        if not isinstance(self.builder, BuilderSpec):  # a name typed at the edge: parsed here, once
            object.__setattr__(self, "builder", parse_builder(self.builder, self.budget if self.budget > 0 else None))
        check_pairing(self.verifier, self.builder)
        if self.record not in RECORD_LEVELS:
            raise ValueError(f"record must be one of {', '.join(RECORD_LEVELS)}, got {self.record!r}")
        if self.tree_costs is not None:
            object.__setattr__(self, "tree_costs", _checked_costs(self.tree_costs, self.budget))
        object.__setattr__(self, "trim", parse_trim(self.trim))
        if self.trimmed and self.builder.sampled:
            raise ValueError(f"trim {self.trim} cuts a tree to a prefix, which a sampled tree's draws do not "
                             f"survive: use trim off with builder {self.builder.name!r}")
        if self.tree_costs is not None and not self.trimmed:
            raise ValueError("tree_costs are the costs of a trim: give trim 'auto' or a flat cost with them")
        if self.stop_tokens is not None:
            object.__setattr__(self, "stop_tokens", tuple(int(t) for t in self.stop_tokens))

    def to_dict(self) -> dict:
        """Plain values for a file's metadata: the builder by its name."""
        return {**asdict(self), "builder": self.builder.name}

    @property
    def trimmed(self) -> bool:
        """Whether rounds score only the part of their tree that pays for its forward."""
        return self.trim != "off"

    @classmethod
    def lowest(cls, name: str):
        """The smallest valid value of a numeric field (its `min` metadata); front ends read it from here."""
        return {f.name: f for f in fields(cls)}[name].metadata["min"]

    @classmethod
    def default(cls, name: str):
        return {f.name: f for f in fields(cls)}[name].default

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


def _checked_costs(costs, budget: int) -> tuple[float, ...]:
    try:
        values = tuple(float(c) for c in costs)
    except (TypeError, ValueError):
        raise ValueError(f"tree_costs must be a sequence of numbers, got {costs!r}") from None
    if len(values) != budget + 1:
        raise ValueError(f"tree_costs needs one cost per tree size 0..{budget} ({budget + 1}), got {len(values)}")
    if not all(math.isfinite(c) and c > 0 for c in values):
        raise ValueError(f"tree_costs must be finite numbers > 0, got {costs!r}")
    return values
