"""The ExitTrain page's one state object: the New run form's values, the Compare tab's picks and settings, and the
comparisons it measured with the requests they were made with.

Streamlit forgets a widget's value when its page is left, and a reload starts a new session; the page therefore
opens every widget at this object's value and writes the widget's value back, and keeps it through
`room_ui.page_state(ExitTrainSession)` (`tevcore.studio.page_states`). The numbers open at the package's recipe
(`tevcore.train.recipes`, through `tevcore.studio.training`); a run from a trained drafter and a new one each keep
their own, as each opens at its own recipe.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tevcore.config import SAMPLING_TEMPERATURE
from tevcore.studio.drafter_compare import VARIANTS, DrafterEvaluation, PairedComparison
from tevcore.studio.training import recipe

SHORT = True  # the page's runs are short ones: minutes on a CPU


def kept_choice(options: list, kept: object) -> int:
    """The position a choice box opens at: the kept choice while it is still offered, else the first."""
    return options.index(kept) if kept in options else 0


@dataclass
class StartNumbers:
    """The numbers that depend on where a run starts: a fine-tune of a trained drafter or new random weights."""

    steps: int
    warmup: int
    lr: float
    dropout: float
    weight_decay: float
    min_lr_ratio: float

    @classmethod
    def of_recipe(cls, fine_tune: bool) -> StartNumbers:
        base = recipe(fine_tune=fine_tune, short=SHORT)
        return cls(base["steps"], base["warmup"], base["lr"], base["dropout"], base["weight_decay"],
                   base["min_lr_ratio"])


def _shared(name: str):
    """A number every kind of start opens at alike (the recipe's, size of a short run)."""
    return field(default_factory=lambda: recipe(fine_tune=True, short=SHORT)[name])


@dataclass
class TrainForm:
    """The New run tab's values. `run_name` None: a fresh name stamped when the form is first drawn; `data` and
    `start_from` None: the first offered."""

    runs_folder: str = "runs"
    run_name: str | None = None
    data: str | None = None
    start_from: str | None = None
    other_init: str = ""
    fine: StartNumbers = field(default_factory=lambda: StartNumbers.of_recipe(True))
    new: StartNumbers = field(default_factory=lambda: StartNumbers.of_recipe(False))
    tree_lambda: float = _shared("tree_lambda")
    tree_weight: str = _shared("tree_weight")
    tree_alpha: float = _shared("tree_alpha")
    tree_budget: int = _shared("tree_budget")
    tree_anchors: int = _shared("tree_anchors")
    batch_size: int = _shared("batch_size")
    max_shards: int = _shared("max_shards")
    checkpoint_every: int = _shared("checkpoint_every")
    threads: int = _shared("threads")
    data_set_name: str = "data-small"  # the Build form's
    data_shards: int = 2

    def numbers(self, fine_tune: bool) -> StartNumbers:
        """The numbers of this kind of start (each kept apart: switching the start back finds them again)."""
        return self.fine if fine_tune else self.new

    def name(self) -> str:
        if self.run_name is None:
            self.run_name = f"exittrain-{time.strftime('%m%d-%H%M')}"
        return self.run_name

    def values(self, data: str | None, init: str | None) -> dict[str, object]:
        """The TrainConfig fields this form asks for (`TrainRequest.from_form`), starting from `init` (None: new
        weights) on the distillation set `data`."""
        start = self.numbers(init is not None)
        return {"data": data, "steps": int(start.steps), "tree_lambda": float(self.tree_lambda),
                "tree_weight": self.tree_weight, "tree_alpha": float(self.tree_alpha),
                "tree_budget": int(self.tree_budget), "tree_anchors": int(self.tree_anchors),
                "batch_size": int(self.batch_size), "max_shards": int(self.max_shards) if self.max_shards else None,
                "checkpoint_every": int(self.checkpoint_every), "threads": int(self.threads),
                "warmup": int(start.warmup), "init": init, "lr": float(start.lr), "dropout": float(start.dropout),
                "weight_decay": float(start.weight_decay), "min_lr_ratio": float(start.min_lr_ratio)}


@dataclass
class CompareForm:
    """The Compare tab's E-per-budget picks and settings, and the last evaluation with its request. `root`: the
    runs folder the picks were made in (a new one starts from its newest pair)."""

    root: str | None = None
    picks: list[str] = field(default_factory=list)
    extra: str = ""
    budgets: str = "4,8,16"
    per_set: int = 1
    temperature: float = SAMPLING_TEMPERATURE
    max_new_tokens: int = 32
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    evaluation: DrafterEvaluation | None = None


@dataclass
class PairedForm:
    """The paired comparison's two drafters and settings (None: the page's default pair), and its last result.
    `resolution`: the smallest gain worth resolving, in % of E(A) (it shapes the table, not the measurement)."""

    baseline: str | None = None
    other: str | None = None
    budgets: str = "8,16"
    per_set: int = 2
    temperature: float = SAMPLING_TEMPERATURE
    max_new_tokens: int = 32
    resolution: float = 1.0
    lookup: bool = True
    result: PairedComparison | None = None


@dataclass
class AblationView:
    """The Ablation tab's result file (None: the committed one) and the slice of it drawn (None: the first)."""

    path: str | None = None
    against: str | None = None
    temperature: float | None = None
    budget: int | None = None


@dataclass
class ExitTrainSession:
    """Everything the ExitTrain page keeps for a participant across page switches and reloads: the New run form,
    the run and checkpoint the Runs tab shows, Compare's picks, settings and results, and the Ablation tab's view."""

    train: TrainForm = field(default_factory=TrainForm)
    run: str | None = None
    checkpoint: str | None = None
    compare: CompareForm = field(default_factory=CompareForm)
    paired: PairedForm = field(default_factory=PairedForm)
    ablation: AblationView = field(default_factory=AblationView)
