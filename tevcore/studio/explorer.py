"""The tree explorer's heavy work: a live generation started and its rounds decoded, and a live round re-scored for
its exact node rows.

A page asks with a `LiveRequest` (the target, the prompt, the drafter and the decoding config), checked once
against the server's caps before any wait (`check_live`); the model loads, the prompt's tokens, the trim's cost
curve and every round are computed inside the participant's compute-queue turn, and between rounds the page that
asked is checked to be still there (`Seat.still_here`), so a closed tab stops the decode and frees its slot.

Replay, download and saving of traces are `tevcore.studio.traces`; a sampled round's trail and the sibling
diagnostics `tevcore.studio.trails`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import torch

from tevcore.config import DecodeConfig
from tevcore.engine.flow import target_flow
from tevcore.engine.records import STAGES, RoundRecord, round_context
from tevcore.room import guarded
from tevcore.room.limits import Limits
from tevcore.studio.models import Models
from tevcore.studio.turns import Seat, queue_turn

__all__ = ["STAGES", "RoundRecord", "round_context", "LiveRequest", "LiveGeneration", "Decoded", "check_live",
           "live_meta", "decode", "rescore_round"]


@dataclass(frozen=True)
class LiveRequest:
    """A live generation as the page asks for it: which target, which prompt (and whether the chat template wraps
    it), which drafter, and the decoding config (its budget and its tokens capped by the room)."""

    target: str
    prompt: str
    chat: bool
    drafter: str
    config: DecodeConfig


@dataclass
class LiveGeneration:
    """A started generation: its rounds still to come (pulled by `decode`), the prompt's tokens (a round's context
    is rebuilt from them), the meta block a saved trace carries, and why a stand-in drafts, if one does."""

    rounds: Iterator[RoundRecord]
    prompt_ids: list[int]
    meta: dict
    drafter_note: str | None = None


@dataclass
class Decoded:
    """What one `decode` call did: the generation it started (None: it went on with the one given, or could not
    start), the rounds it pulled, whether the generation ended, and why it failed (one line), if it did."""

    started: LiveGeneration | None = None
    records: list[RoundRecord] = field(default_factory=list)
    finished: bool = False
    failure: str | None = None


def check_live(limits: Limits, request: LiveRequest) -> DecodeConfig:
    """The request's config if the server's caps allow it; a one-line ValueError (an empty prompt or target, a
    budget or a token count past its cap) before any model loads."""
    if not request.prompt.strip():
        raise ValueError("the prompt is empty: pick an item or type a prompt")
    if not request.target.strip():
        raise ValueError("the target field is empty: type 'default', a hub id, a model folder or a .gguf path")
    return guarded.check_decode(limits, request.config)


def live_meta(target_name: str, prompt: str, proposer_name: str | None, config: DecodeConfig) -> dict:
    """A live generation's meta block, as a saved trace carries it (the stop tokens are the model's own)."""
    return {"target": target_name, "prompt": prompt, "proposer": proposer_name,
            "config": {k: v for k, v in config.to_dict().items() if k != "stop_tokens"}}


def _start(models: Models, request: LiveRequest, config: DecodeConfig) -> LiveGeneration:
    from tevcore.decoding.autobudget import trim_costs
    from tevcore.decoding.loop import prompt_ids, rounds  # loads transformers: only when a generation starts

    target = models.target(request.target)
    proposer, note = models.drafter(request.drafter, request.target) if config.budget > 0 else (None, None)
    ids = prompt_ids(target, request.prompt, chat=request.chat)
    config = replace(config, tree_costs=trim_costs(target, [config.budget], config.trim)[config.budget])
    meta = live_meta(target.name, request.prompt, getattr(proposer, "name", None), config)
    return LiveGeneration(rounds(target, proposer, ids, config), ids, meta, note)


def decode(seat: Seat, models: Models, request: LiveRequest, running: LiveGeneration | None, limit: int | None,
           on_start: Callable[[LiveGeneration], None] | None = None,
           on_round: Callable[[RoundRecord], None] | None = None) -> Decoded:
    """Up to `limit` rounds (None: to the end) of `running`, or of a generation started for `request` when
    `running` is None, in one queue turn.

    `on_start` sees a new generation before its first round and `on_round` each round as it arrives (the page
    keeps and draws them: a decode stopped by a closed tab keeps what it made). A start that fails (a missing
    model, a prompt too long) or a round that fails ends the call with `failure`; a request past the caps is a
    ValueError before the wait.
    """
    config = check_live(seat.limits, request)
    found = Decoded()
    with queue_turn(seat):
        if running is None:
            try:
                running = found.started = _start(models, request, config)
            except Exception as err:  # a missing model file, a bad drafter folder, a prompt too long ...
                found.failure = f"Could not start ({type(err).__name__}): {err}"
                return found
            if on_start is not None:
                on_start(running)
        while limit is None or len(found.records) < limit:
            seat.still_here()
            try:
                record = next(running.rounds)
            except StopIteration:
                found.finished = True
                break
            except Exception as err:  # said in one line: the generation ends here
                found.failure, found.finished = f"The round failed ({type(err).__name__}): {err}", True
                break
            found.records.append(record)
            if on_round is not None:
                on_round(record)
    return found


def rescore_round(seat: Seat, models: Models, target_spec: str, prompt_ids: list[int], records: list[RoundRecord],
                  index: int) -> tuple[torch.Tensor, float]:
    """Node logits of live round `index`, re-scored by the target after the same committed context (one tree
    forward, in a queue turn), and the largest gap between the exit mass X they give and the recorded one (a check
    that they are its rows). Records keep no node logits (they would cost V floats per node).
    """
    if not 0 <= index < len(records):
        raise ValueError(f"there is no round {index} (the generation has {len(records)})")
    record = records[index]
    context = round_context(prompt_ids, records, index)
    if len(context) != record.context_length:
        raise ValueError(f"the rebuilt context has {len(context)} tokens, the round recorded "
                         f"{record.context_length}: cannot re-score it")
    from tevcore.target.session import TargetSession  # the model code: only when a round is re-scored

    with queue_turn(seat):
        session = TargetSession(models.target(target_spec))
        session.prefill(context, reserve=record.tree.max_depth + 1)
        logits = session.score_tree(record.tree).logits.cpu()
    check = target_flow(record.tree, logits, record.temperature)
    return logits, float((check.exit_mass - record.flow.exit_mass).abs().max())
