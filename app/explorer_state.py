"""The explorer's state, typed, in one object (no streamlit here): its rounds and where they came from, the
settings they were made with, the view chosen on each round, the round on screen, the rows re-scored for a round,
and the settings widgets' values kept across pages.

The page gets it through `room_ui.page_state(ExplorerSession)`, which keeps it on the server for the participant:
the same object after a page switch and after a reload of the page (it lives in the session state under
`SESSION_KEY`, the page-state door's key, where the app tests put one too). Other pages (the verifier comparison,
ExitTrain's "make this the explorer's drafter") reach the explorer's rounds and its drafter through this object,
never through string keys of their own.

Streamlit forgets a widget's value when a page without that widget runs, so a
user who leaves the explorer and comes back would find budget, builder and
verifier back at their defaults while the old rounds stay on screen.
`ExplorerSession.keep` and `restore` carry the settings widgets' values over (the
round slider starts from `selected_round`); `settings_changes` says how shown
rounds' settings differ from the ones on screen.

A node id means something only inside its own round: node 30 of a 64-node
round does not exist in a 12-node one, and a widget whose labels depend on the
round reads an old label back as a plain string. So `RoundView` keeps the
chosen node per round as an int, and anything that is not a valid node of that
round falls back to the round's exit node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import MISSING, dataclass, field, fields

import torch

from tevcore.config import DecodeConfig
from tevcore.studio.explorer import LiveGeneration, LiveRequest, RoundRecord, round_context
from tevcore.studio.page_states import state_key
from tevcore.studio.rules import BuilderSpec

LIVE = "live"  # the source of rounds decoded in this session (a trace's is "trace <name>")
SETTING_KEYS = ("ex_set", "ex_chat", "ex_target", "ex_temp", "ex_budget", "ex_builder", "ex_widths", "ex_draws",
                "ex_verifier", "ex_trim", "ex_seed", "ex_max_new", "ex_proposer", "ex_open_folder",
                "ex_save_folder")  # the widget keys whose values are kept across pages
DRAFTER_KEY = "ex_proposer"  # the sidebar's drafter box
SETTING_PREFIXES = ("ex_item_", "ex_prompt_")  # one prompt pick and text per prompt source
SETTING_NAMES = {"target": "target", "prompt": "prompt", "chat": "chat template", "temperature": "temperature",
                 "budget": "budget", "builder": "builder", "verifier": "verifier", "seed": "seed",
                 "max_new_tokens": "max new tokens", "proposer": "drafter", "trim": "trim"}
_OUTLIVE_GENERATIONS = ("kept", "upload_id", "active_drafter", "lock")  # fields a new set of rounds leaves as they are
KEPT_ROWS = 8  # rounds whose re-scored rows (nodes x vocabulary floats each) are kept; the oldest go first


@dataclass(frozen=True)
class ExplorerSettings:
    """What the sidebar chose: a generation is made with one of these, and compared with the next."""

    target: str
    prompt: str
    chat: bool
    temperature: float
    budget: int
    builder: BuilderSpec | None  # None: the builder text was refused (`builder_problem` says why)
    verifier: str
    seed: int
    max_new_tokens: int
    proposer: str
    trim: str
    builder_problem: str | None = field(default=None, compare=False)

    @property
    def sampled_builder(self) -> str | None:
        """The builder's name when its trees are drawn from the drafter's q (others redraw trees with it), else
        None."""
        return self.builder.name if self.builder is not None and self.builder.sampled else None

    def config(self) -> DecodeConfig:
        """The settings as a decoding config; a refused builder (or the config's own checks) raise ValueError."""
        if self.builder is None:
            raise ValueError(self.builder_problem or "no valid builder chosen")
        return DecodeConfig(max_new_tokens=self.max_new_tokens, temperature=self.temperature, budget=self.budget,
                            builder=self.builder, verifier=self.verifier, seed=self.seed, chat=self.chat,
                            trim=self.trim)

    def request(self) -> LiveRequest:
        """The settings as the explorer service's request (a refused builder raises ValueError)."""
        return LiveRequest(target=self.target.strip(), prompt=self.prompt, chat=self.chat, drafter=self.proposer,
                           config=self.config())


def settings_changes(shown: ExplorerSettings | None, now: ExplorerSettings) -> list[str]:
    """How the settings the shown rounds were made with differ from those on screen ("budget 64 (now 16)")."""
    if shown is None:
        return []
    changes = []
    for name, label in SETTING_NAMES.items():
        old, new = getattr(shown, name), getattr(now, name)
        if old != new:
            changes.append("prompt (another text)" if name == "prompt" else f"{label} {old} (now {new})")
    return changes


def valid_node(value, num_nodes: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_nodes


def node_for_round(chosen: Mapping[int, int], round_index: int, num_nodes: int, default: int) -> int:
    """The node shown for a round: the one chosen there if it is a node of that round, else `default`."""
    value = chosen.get(round_index)
    return value if valid_node(value, num_nodes) else default


@dataclass
class RoundView:
    """The view of one set of rounds: what the user chose on each round (its node, the last chart click seen there,
    the fans opened there), the round on screen, the rounds it has followed and what the last Save said.

    A copy of the session that draws a run's own rounds (`explorer_run.run_or_step`) shares this object, so what
    is chosen on the copy stays chosen on the session while that generation is the session's; a new set of rounds
    gets a view of its own."""

    nodes: dict[int, int] = field(default_factory=dict)
    clicks: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    opened: dict[int, set[int]] = field(default_factory=dict)
    selected: int = 0  # the round on screen (the verifier comparison opens at it)
    seen: int = 0  # rounds the view has followed (a new round moves the shown one to it)
    saved: str | None = None  # what the last Save wrote (said once the page shows the rounds again)

    def take_click(self, index: int, click: tuple[int | None, int | None], num_nodes: int) -> None:
        """A chart's (node, fold) selection on round `index`: a new one chooses the node or opens the fan; the old
        selection seen again on a rerun changes nothing."""
        if click == self.clicks.get(index):
            return
        self.clicks[index] = click
        node, fold = click
        if valid_node(node, num_nodes):
            self.nodes[index] = node
        if valid_node(fold, num_nodes):
            self.fans(index).add(fold)

    def pick(self, index: int, value, num_nodes: int) -> None:
        """The node box of round `index` changed: kept only if it names a node of that round."""
        if valid_node(value, num_nodes):
            self.nodes[index] = value

    def node(self, index: int, num_nodes: int, default: int) -> int:
        return node_for_round(self.nodes, index, num_nodes, default)

    def fans(self, index: int) -> set[int]:
        """The parents whose folded fans are open on round `index` (the set itself: the page adds and clears)."""
        return self.opened.setdefault(index, set())


@dataclass
class ExplorerSession:
    """Everything the explorer keeps for one browser session; the pages lay it out."""

    records: list[RoundRecord] = field(default_factory=list)
    generation: LiveGeneration | None = None  # the live decode still giving rounds
    done: bool = False
    source: str | None = None  # LIVE, "trace <name>", or None before any rounds
    settings: ExplorerSettings | None = None  # those the live rounds were made with
    prompt_ids: list[int] | None = None  # a live generation's prompt tokens (a trace keeps none)
    target_spec: str | None = None  # the target a live generation ran on (re-scoring loads it again)
    meta: dict = field(default_factory=dict)  # a trace's meta block, or the live run's, as saved with the rounds
    proposer_note: str | None = None  # why another drafter stood in, if one did
    started: float | None = None  # when the live generation started: it names that generation for other pages
    upload_id: str | None = None  # the upload last opened (a rerun does not open it again)
    view: RoundView = field(default_factory=RoundView)
    rows: dict[int, tuple[torch.Tensor, float | None]] = field(default_factory=dict)  # round -> (logits, drift)
    row_errors: dict[int, str] = field(default_factory=dict)  # round -> why re-scoring failed (not tried again)
    kept: dict[str, object] = field(default_factory=dict)  # the settings widgets' last values
    active_drafter: str | None = None  # a checkpoint the ExitTrain page made the explorer's drafter (offered first)
    # a browser's tabs share this object: a run's end and another tab's new generation take it in turn
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def of(cls, state: MutableMapping) -> "ExplorerSession":
        """The explorer object in a session state (made on first use); a page gets it with
        `room_ui.page_state(ExplorerSession)`, which also finds the one the participant had before a reload."""
        found = state[SESSION_KEY] if SESSION_KEY in state else None
        if not isinstance(found, cls):
            found = state[SESSION_KEY] = cls()
        return found

    # ------------------------------------------------------------ the settings widgets across pages
    def restore(self, state: MutableMapping) -> None:
        """Before the widgets are drawn: every kept value streamlit has forgotten goes back."""
        for key, value in self.kept.items():
            if key not in state:
                state[key] = value

    def keep(self, state: Mapping) -> None:
        """After the widgets are drawn: remember their values."""
        self.kept.update({key: state[key] for key in list(state.keys()) if isinstance(key, str)
                          and (key in SETTING_KEYS or key.startswith(SETTING_PREFIXES))})

    def choose_drafter(self, spec: str, state: MutableMapping) -> None:
        """Make `spec` the explorer's drafter (the ExitTrain page's choice): offered first in the sidebar and
        selected there, over whatever drafter the sidebar last kept (the session owns the choice, so the next round
        runs what the ExitTrain page said)."""
        self.active_drafter = spec
        self.kept[DRAFTER_KEY] = spec
        if DRAFTER_KEY in state:  # a value streamlit still holds for the box would win over the kept one
            del state[DRAFTER_KEY]

    # ------------------------------------------------------------ where the rounds come from
    def _fresh(self, **values) -> None:
        """Every field back to its default, then `values`, in one step under the lock (the one way the rounds are
        replaced); the widget values, the upload last opened (an upload still in its box is not opened again) and
        the drafter ExitTrain chose stay."""
        with self.lock:
            for f in fields(self):
                if f.name not in _OUTLIVE_GENERATIONS:
                    setattr(self, f.name, f.default if f.default_factory is MISSING else f.default_factory())
            for name, value in values.items():
                setattr(self, name, value)

    def start_live(self, generation: LiveGeneration, settings: ExplorerSettings, started: float) -> None:
        """A new live generation replaces the rounds (and the view and rows of the old ones)."""
        self._fresh(generation=generation, source=LIVE, settings=settings, prompt_ids=list(generation.prompt_ids),
                    target_spec=settings.target.strip(), meta=generation.meta, proposer_note=generation.drafter_note,
                    started=started)

    def finish(self, generation: LiveGeneration, finished: bool) -> bool:
        """Mark `generation` finished (when `finished`) if it is still this session's; whether it was. Checked and
        set under the lock that a new generation takes, so a run's end never marks another tab's new one."""
        with self.lock:
            if self.generation is not generation:
                return False
            self.done = self.done or finished
            return True

    def replay(self, rounds: list[RoundRecord], meta: dict, name: str) -> None:
        """A trace's rounds replace the session's: finished, with nothing to re-score them from."""
        self._fresh(records=list(rounds), done=True, source=f"trace {name}", meta=dict(meta or {}))

    def takes_upload(self, file_id: str) -> bool:
        """Whether an upload in the box is new (then it is opened, once; a rerun sees the same file again)."""
        if file_id == self.upload_id:
            return False
        self.upload_id = file_id
        return True

    def forget(self) -> None:
        """New generation: no rounds, no view (the settings widgets keep their values)."""
        self._fresh()

    def add(self, record: RoundRecord, generation: LiveGeneration) -> bool:
        """Append a round of `generation` if that is still this session's generation; whether it was."""
        with self.lock:
            if self.generation is not generation:
                return False
            self.records.append(record)
            return True

    @property
    def made_tokens(self) -> int:
        return sum(len(record.emitted_tokens) for record in self.records)

    @property
    def is_live(self) -> bool:
        """Rounds decoded here, with the prompt to rebuild a round's context from (a trace has none)."""
        return self.source == LIVE and self.prompt_ids is not None

    @property
    def is_trace(self) -> bool:
        return str(self.source).startswith("trace")

    def needs_new_generation(self, settings: ExplorerSettings) -> bool:
        """Whether a Run or Step starts over: nothing running, it ended, or the settings changed since."""
        return self.generation is None or self.done or self.settings != settings

    def shown_changes(self, settings: ExplorerSettings) -> list[str]:
        """How the shown live rounds' settings differ from those on screen (a trace's rounds are not compared)."""
        return settings_changes(self.settings, settings) if self.records and self.source == LIVE else []

    def seed_used(self, settings: ExplorerSettings) -> int:
        """The seed the shown rounds were verified with (a trace's: those on screen)."""
        return (self.settings or settings).seed

    # ------------------------------------------------------------ which round is shown
    @property
    def selected_round(self) -> int:
        """The round on screen (the verifier comparison opens at it)."""
        return self.view.selected

    @selected_round.setter
    def selected_round(self, index: int) -> None:
        self.view.selected = index

    @property
    def saved(self) -> str | None:
        """What the last Save of these rounds wrote (said once, then set back to None)."""
        return self.view.saved

    @saved.setter
    def saved(self, said: str | None) -> None:
        self.view.saved = said

    def new_round_to_follow(self) -> int | None:
        """The latest round's index when rounds arrived since the view last looked (the view moves to it)."""
        if self.view.seen == len(self.records):
            return None
        self.view.seen = len(self.records)
        return len(self.records) - 1

    def select(self, requested) -> int:
        """The round shown for a requested index (the latest for anything that is not a round)."""
        last = len(self.records) - 1
        index = min(max(requested, 0), last) if isinstance(requested, int) else last
        self.selected_round = index
        return index

    def reset_view(self) -> None:
        """A view failed to draw: forget the choices made on it; the next run follows the latest round again."""
        self.view = RoundView(seen=-1)

    def round_key(self, index: int) -> tuple:
        """What round `index` is, stable across reruns (for another page's caches)."""
        return self.source, self.started, id(self.records), index

    def context(self, index: int) -> list[int]:
        """The tokens before live round `index`: the prompt and every earlier round's emitted block."""
        if self.prompt_ids is None:
            raise ValueError("these rounds keep no prompt (a trace): their contexts cannot be rebuilt")
        return round_context(self.prompt_ids, self.records, index)

    # ------------------------------------------------------------ a round's exact rows
    def has_rows(self, index: int) -> bool:
        return index in self.rows

    def keep_rows(self, index: int, logits: torch.Tensor, drift: float | None = None) -> None:
        """Keep round `index`'s node rows (at most KEPT_ROWS rounds' worth: each is nodes x vocabulary floats)."""
        self.rows.pop(index, None)
        self.rows[index] = (logits, drift)
        while len(self.rows) > KEPT_ROWS:
            self.rows.pop(next(iter(self.rows)))

    def rows_for(self, index: int, rescore: Callable[[], tuple[torch.Tensor, float]]) -> tuple[torch.Tensor,
                                                                                                 float | None]:
        """Round `index`'s node logits and their drift from the recorded X: kept ones, else `rescore()` once.

        A failed re-score is kept as its message and raised again as a ValueError (a rerun does not redo it).
        """
        if index in self.rows:
            return self.rows[index]
        if index in self.row_errors:
            raise ValueError(self.row_errors[index])
        try:
            logits, drift = rescore()
        except Exception as err:  # no model any more, a context that no longer fits: said, never a traceback
            self.row_errors[index] = f"{type(err).__name__}: {err}"
            raise ValueError(self.row_errors[index]) from err
        self.keep_rows(index, logits, drift)
        return logits, drift


SESSION_KEY = state_key(ExplorerSession)  # the one session-state entry of the explorer (`room_ui.page_state`'s)
