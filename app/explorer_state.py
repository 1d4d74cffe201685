"""The explorer's session state, typed (no streamlit here): its settings kept across pages, and its view keyed by
round.

Streamlit forgets a widget's value when a page without that widget runs, so a
user who leaves the explorer and comes back would find budget, builder and
verifier back at their defaults while the old rounds stay on screen.
`ExplorerSession` keeps the settings widgets' values and puts them back before
the widgets are drawn; `settings_changes` says how shown rounds' settings
differ from the ones on screen.

A node id means something only inside its own round: node 30 of a 64-node
round does not exist in a 12-node one, and a widget whose labels depend on the
round reads an old label back as a plain string. So the chosen node is kept
per round as an int, and anything that is not a valid node of that round
falls back to the round's exit node.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

from figures.folding import FOLD_PREFIX

SETTING_KEYS = ("ex_set", "ex_chat", "ex_target", "ex_temp", "ex_budget", "ex_builder", "ex_widths", "ex_draws",
                "ex_verifier", "ex_trim", "ex_seed", "ex_max_new", "ex_proposer")
SETTING_PREFIXES = ("ex_item_", "ex_prompt_")  # one prompt pick and text per prompt source
SESSION_KEY = "ex_session"
SETTING_NAMES = {"target": "target", "prompt": "prompt", "chat": "chat template", "temperature": "temperature",
                 "budget": "budget", "builder": "builder", "verifier": "verifier", "seed": "seed",
                 "max_new_tokens": "max new tokens", "proposer": "drafter", "trim": "trim"}


@dataclass
class ExplorerSession:
    """The explorer's settings widgets' last values, kept in the session while other pages run."""

    kept: dict[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, state: MutableMapping) -> "ExplorerSession":
        """The session's explorer object (made on first use)."""
        found = state.get(SESSION_KEY)
        if not isinstance(found, cls):
            found = state[SESSION_KEY] = cls()
        return found

    @staticmethod
    def _is_setting(key: str) -> bool:
        return key in SETTING_KEYS or (key.startswith(SETTING_PREFIXES) and key != "ex_prompt_ids")

    def restore(self, state: MutableMapping) -> None:
        """Before the widgets are drawn: every kept value streamlit has forgotten goes back."""
        for key, value in self.kept.items():
            if key not in state:
                state[key] = value

    def keep(self, state: Mapping) -> None:
        """After the widgets are drawn: remember their values."""
        self.kept.update({key: state[key] for key in list(state.keys()) if isinstance(key, str)
                          and self._is_setting(key)})


def settings_changes(shown: Mapping | None, now: Mapping) -> list[str]:
    """How the settings the shown rounds were made with differ from those on screen ("budget 64 (now 16)")."""
    if not shown:
        return []
    changes = []
    for name, label in SETTING_NAMES.items():
        if name in shown and shown.get(name) != now.get(name):
            old, new = shown.get(name), now.get(name)
            if name == "prompt":
                changes.append("prompt (another text)")
            else:
                changes.append(f"{label} {old} (now {new})")
    return changes



def _clicked_data(chart_state) -> list:
    """The customdata of every point a click on the tree figure selected."""
    try:
        points = list(chart_state["selection"]["points"]) if chart_state else []
    except (KeyError, TypeError):
        return []
    out = []
    for point in points:
        data = point.get("customdata") if isinstance(point, Mapping) else None
        if isinstance(data, (list, tuple)):
            data = data[0] if data else None
        if data is not None and not isinstance(data, bool):
            out.append(data)
    return out


def clicked_node(chart_state) -> int | None:
    """The node id a click on the tree figure selected (its customdata), or None."""
    for data in _clicked_data(chart_state):
        try:
            return int(data)
        except (TypeError, ValueError):
            continue
    return None


def clicked_fold(chart_state) -> int | None:
    """The parent whose folded fan ("+N more") a click selected, or None."""
    for data in _clicked_data(chart_state):
        if isinstance(data, str) and data.startswith(FOLD_PREFIX):
            try:
                return int(data[len(FOLD_PREFIX):])
            except ValueError:
                continue
    return None


def valid_node(value, num_nodes: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < num_nodes


def node_for_round(chosen: Mapping[int, int], round_index: int, num_nodes: int, default: int) -> int:
    """The node shown for a round: the one chosen there if it is a node of that round, else `default`."""
    value = chosen.get(round_index)
    return value if valid_node(value, num_nodes) else default
