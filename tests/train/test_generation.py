"""Training data's self-generated sequences walk the one walker, a batch at a time."""

from __future__ import annotations

from tevcore.target.walker import walk
from tevcore.engine.sampling import make_generator
from tevcore.target.session import TargetSession
from tevcore.train.generation import generate_sequences

PROMPTS = [tuple(range(5, 5 + k)) for k in (6, 9, 12)]


def _alone(target, prompt, stops, max_new_tokens):
    session = TargetSession(target)
    session.prefill(list(prompt), reserve=max_new_tokens + 1)
    return walk(session, max_new_tokens, 0.0, make_generator(0), stops)


def test_a_left_padded_batch_draws_what_each_prompt_draws_alone_and_keeps_its_stop_token(tiny_target, monkeypatch):
    probe = _alone(tiny_target, PROMPTS[1], set(), 10)
    stop = probe[3]  # a token the second prompt reaches greedily: it must end there, the others may run on
    monkeypatch.setattr(tiny_target, "stop_token_ids", lambda: {stop})
    context = 4
    sequences = generate_sequences(tiny_target, PROMPTS, [0.0] * 3, 10, (1, 2), context, 8, make_generator(0))
    for prompt, sequence in zip(PROMPTS, sequences):
        alone = _alone(tiny_target, prompt, {stop}, 10)
        assert sequence["tokens"][:context + 1].tolist() == list(prompt[-context - 1:])
        assert sequence["tokens"][context + 1:].tolist() == alone  # a stop token is kept as the last position
        n = len(sequence["tokens"])
        assert sequence["hidden"].shape[0] == sequence["top_ids"].shape[0] == n and int(sequence["start"]) == context
    assert sequences[1]["tokens"][-1] == stop and len(sequences[1]["tokens"]) == context + 1 + 4
