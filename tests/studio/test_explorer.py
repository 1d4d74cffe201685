"""The explorer's service: a live generation checked against the caps before it waits, started and decoded round by
round in one queue turn, and a live round re-scored to the rows it was decoded with."""

from __future__ import annotations

import pytest

from tevcore.config import DecodeConfig
from tevcore.decoding.loop import rounds
from tevcore.proposers import GreedyRolloutProposer
from tevcore.room.limits import ROOM
from tevcore.room.queue import ComputeQueue
from tevcore.studio.explorer import LiveRequest, decode, rescore_round
from tevcore.studio.models import Models
from tevcore.studio.turns import Seat


def _seat(**kwargs) -> Seat:
    return Seat(ROOM, ComputeQueue(1), "me", **kwargs)


def _models(target, proposer=None) -> Models:
    def no_model(*args):
        raise AssertionError("no model may load here")

    return Models(target=(lambda spec: target) if target is not None else no_model,
                  drafter=(lambda spec, target_spec: (proposer, None)) if proposer is not None else no_model)


def test_a_rescored_round_reproduces_its_recorded_exit_mass(tiny_target):
    prompt = [5, 17, 42, 8]
    config = DecodeConfig(max_new_tokens=12, temperature=1.0, budget=6, seed=3, record="lean")
    records = list(rounds(tiny_target, GreedyRolloutProposer(depth=3), prompt, config))
    assert len(records) >= 3
    for index in (0, 2):
        logits, drift = rescore_round(_seat(), _models(tiny_target), "tiny", prompt, records, index)
        assert logits.shape == (records[index].tree.num_nodes, tiny_target.vocab_size)
        assert drift < 1e-5


def test_a_round_of_another_context_is_refused_before_it_waits(tiny_target):
    config = DecodeConfig(max_new_tokens=6, temperature=0.0, budget=4, record="lean")
    records = list(rounds(tiny_target, GreedyRolloutProposer(depth=2), [5, 17, 42], config))
    seat = _seat(on_wait=lambda place: pytest.fail("a refused request waited"))
    with pytest.raises(ValueError, match="cannot re-score"):
        rescore_round(seat, _models(None), "tiny", [5, 17], records, 0)
    with pytest.raises(ValueError, match="there is no round 5"):
        rescore_round(seat, _models(None), "tiny", [5, 17, 42], records, 5)


@pytest.mark.parametrize("change, refusal", [
    (dict(prompt="   "), "the prompt is empty"),
    (dict(target=""), "the target field is empty"),
    (dict(config=DecodeConfig(budget=ROOM.budget + 1)), f"tree budget {ROOM.budget + 1} is over"),
    (dict(config=DecodeConfig(max_new_tokens=ROOM.new_tokens + 1)), "max new tokens"),
])
def test_a_live_request_past_a_cap_or_empty_is_refused_in_one_line_before_any_model_or_wait(change, refusal):
    request = LiveRequest(**{**dict(target="default", prompt="hi", chat=False, drafter="rollout",
                                    config=DecodeConfig(budget=4, max_new_tokens=4)), **change})
    seat = _seat(on_wait=lambda place: pytest.fail("a refused request waited"))
    with pytest.raises(ValueError, match=refusal):
        decode(seat, _models(None), request, None, 1)


def test_a_generation_that_cannot_start_says_why_and_keeps_nothing():
    def missing(spec):
        raise FileNotFoundError(f"no model at {spec}")

    request = LiveRequest("runs/no-such-model", "hi", False, "rollout", DecodeConfig(budget=4, max_new_tokens=4))
    started = []
    found = decode(_seat(), Models(target=missing, drafter=missing), request, None, 1, on_start=started.append)
    assert found.failure == "Could not start (FileNotFoundError): no model at runs/no-such-model"
    assert found.started is None and not found.records and not started


def test_decode_starts_a_generation_steps_it_and_goes_on_to_its_end(default_target):
    config = DecodeConfig(max_new_tokens=6, temperature=1.0, budget=4, seed=1)
    request = LiveRequest("default", "Say hi.", True, "rollout", config)
    models = _models(default_target, GreedyRolloutProposer(depth=2))
    seen, starts = [], []
    first = decode(_seat(), models, request, None, 1, on_start=starts.append, on_round=seen.append)
    assert first.started is not None and starts == [first.started] and len(first.records) == 1
    assert not first.finished and first.failure is None
    assert first.started.meta["prompt"] == "Say hi." and first.started.meta["config"]["budget"] == 4
    rest = decode(_seat(), models, request, first.started, None, on_round=seen.append)
    assert rest.started is None and rest.finished and rest.failure is None
    assert seen == first.records + rest.records
    assert sum(len(r.emitted_tokens) for r in seen) <= 6 and [r.index for r in seen] == list(range(len(seen)))
