"""Frozen, validated configuration of a decoding run."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .builders import get_builder
from .sampling import check_temperature

DEFAULT_BUDGET = 8


@dataclass(frozen=True)
class DecodeConfig:
    """How to decode: every field is checked on construction, before any model work."""

    max_new_tokens: int = field(default=128, metadata={"help": "tokens to generate at most"})
    temperature: float = field(default=0.0, metadata={"help": "0 = greedy; > 0 samples from p^(1/T)"})
    budget: int = field(default=DEFAULT_BUDGET, metadata={"help": "draft-tree node budget (0 = no draft)"})
    builder: str = field(default="best_first", metadata={"help": "best_first, chain or width:W1,W2,..."})
    verifier: str = field(default="tev", metadata={"help": "tev, residual, predraw, greedy, chain, naive_ratio"})
    seed: int = field(default=0, metadata={"help": "seed of the verifier's random draws"})
    stop_tokens: tuple[int, ...] | None = field(default=None, metadata={"help": "None = the model's EOS and chat end tokens"})
    chat: bool = field(default=True, metadata={"help": "wrap a text prompt in the model's chat template"})
    missing_k: int = field(default=5, metadata={"help": "top missing tokens recorded per node"})
    skip_below: float = field(default=0.0, metadata={
        "help": "score a plain root-only step instead of the tree when the draft's own forecast 1 + sum Q "
                "is below this (0 = never; the forward-cost ratio of the tree to one token is the break-even); "
                "rounds without cheap evidence also skip the drafter while such rounds keep failing"})

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 0:
            raise ValueError(f"budget must be a non-negative integer, got {self.budget!r}")
        get_builder(self.builder, self.budget if self.budget > 0 else None)
        from .verifiers import get_verifier  # late import: verifiers import sampling, not config

        get_verifier(self.verifier)
        if self.missing_k < 0:
            raise ValueError(f"missing_k must be >= 0, got {self.missing_k}")
        if not (isinstance(self.skip_below, (int, float)) and 0 <= self.skip_below < float("inf")):
            raise ValueError(f"skip_below must be a finite number >= 0, got {self.skip_below!r}")
        object.__setattr__(self, "skip_below", float(self.skip_below))
        if self.stop_tokens is not None:
            object.__setattr__(self, "stop_tokens", tuple(int(t) for t in self.stop_tokens))

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}
