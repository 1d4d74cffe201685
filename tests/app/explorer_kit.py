"""The explorer's session as the app tests put it in a page's session state (as if the explorer made it)."""

from __future__ import annotations

from dataclasses import replace

from streamlit.testing.v1 import AppTest

import explorer_sampled
import shared_ui
from explorer_state import LIVE, SESSION_KEY, ExplorerSession, ExplorerSettings
from tevcore.config import DEFAULT_BUDGET, SAMPLING_TEMPERATURE


def put_explorer(at: AppTest, **fields) -> ExplorerSession:
    """An explorer session with `fields` in `at`'s session state (what the explorer keeps under its one key)."""
    session = ExplorerSession(**fields)
    at.session_state[SESSION_KEY] = session
    return session


def explorer_of(at: AppTest) -> ExplorerSession:
    return at.session_state[SESSION_KEY]


def opening_settings(**changes) -> ExplorerSettings:
    """The settings the explorer's sidebar opens with (first prompt, first builder, its first verifier), changed."""
    family = next(iter(explorer_sampled.BUILDER_FAMILIES.values()))  # the families the sidebar offers, first
    builder = family.spec(family.example if family.counts is not None else "")
    settings = ExplorerSettings(target=shared_ui.target_spec(), prompt=next(iter(shared_ui.EXAMPLE_PROMPTS.values())),
                                chat=True, temperature=SAMPLING_TEMPERATURE, budget=DEFAULT_BUDGET, builder=builder,
                                verifier=explorer_sampled.verifier_options(builder)[0][0], seed=0, max_new_tokens=48,
                                proposer=shared_ui.default_proposer_spec(), trim="off")
    return replace(settings, **changes)


def live_explorer(at: AppTest, records, prompt_ids, target_spec: str = "default", **settings) -> ExplorerSession:
    """A live generation's session: its rounds, prompt tokens, target and the settings it was made with."""
    return put_explorer(at, records=records, done=True, source=LIVE, prompt_ids=list(prompt_ids),
                        target_spec=target_spec, started=1.0, settings=opening_settings(**settings))


def count_turns(monkeypatch) -> list[str]:
    """Every compute-queue turn a page takes from now on (the owner asking), in order."""
    from tevcore.room.queue import ComputeQueue

    turns: list[str] = []
    original = ComputeQueue.turn

    def counted(self, owner, *args, **kwargs):
        turns.append(owner)
        return original(self, owner, *args, **kwargs)

    monkeypatch.setattr(ComputeQueue, "turn", counted)
    return turns
