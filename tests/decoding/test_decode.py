"""End-to-end decoding: errors before work, AR identity at T = 0, the joint law at T > 0."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from tevcore.config import DecodeConfig
from tevcore.decoding.loop import generate, generate_ar, rounds
from tevcore.engine.draft_rows import DraftRows
from tevcore.proposers.base import ProposerBase
from tevcore.verify.laws import chi_square, chi_square_pvalue
from tevcore.decoding.trim import flat_costs

EXACT = ("tev", "predraw", "residual", "greedy", "chain")


class FixedRowsProposer(ProposerBase):
    """Test double: the same seeded rows every round (a deterministic drafter), with rows of their own
    below the two likeliest depth-1 tokens, as a drafter's conditioned second pass gives."""

    hidden_layers = ()

    def __init__(self, vocab: int, depth: int = 3, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        shared = torch.log_softmax(2 * torch.randn(depth, vocab, generator=generator), -1)
        below = {int(t): torch.log_softmax(2 * torch.randn(depth - 1, vocab, generator=generator), -1)
                 for t in shared[0].topk(2).indices}
        self.rows = DraftRows(shared, below)
        self.depth = depth
        self.name = "fixed random rows (test double)"

    def propose(self, session) -> DraftRows:
        return self.rows


@pytest.fixture(scope="module")
def small_vocab_target():
    """A random 1-layer Llama over 5 tokens, peaked enough that drafts are often accepted."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tevcore.target.loading import Target

    torch.manual_seed(4)
    config = LlamaConfig(vocab_size=5, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         eos_token_id=None, bos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.requires_grad_(False)
    return Target(model=model, tokenizer=None, name="tiny-5-token-llama")


@pytest.mark.parametrize("bad", [
    dict(budget=-1), dict(temperature=-0.5), dict(temperature=math.nan), dict(builder="bushy"),
    dict(verifier="magic"), dict(max_new_tokens=0), dict(builder="width:4,4", budget=8),
    dict(budget=2, tree_costs=(1.0, 1.5)), dict(budget=1, tree_costs=(1.0, math.nan)),
    dict(budget=1, tree_costs=(0.0, 1.5)), dict(budget=1, tree_costs="fast"),
    dict(budget=1, tree_costs=(1.0, 1.5)), dict(trim="sometimes"), dict(trim=-2.0),
    dict(builder="sampled:2,1", trim="auto"), dict(builder="sampled:1,1", trim=1.5),
])
def test_bad_config_is_refused_before_any_work(bad):
    with pytest.raises(ValueError):
        DecodeConfig(**bad)


def test_bad_prompts_are_refused(tiny_target):
    proposer = FixedRowsProposer(tiny_target.vocab_size)
    with pytest.raises(ValueError, match="empty"):
        next(rounds(tiny_target, proposer, [], DecodeConfig()))
    with pytest.raises(ValueError, match="context"):
        next(rounds(tiny_target, proposer, [1] * 250, DecodeConfig(max_new_tokens=16)))


def test_trimming_swaps_unpromising_trees_for_plain_steps(tiny_target, one_thread):
    from tevcore.proposers import GreedyRolloutProposer

    proposer, prompt = GreedyRolloutProposer(depth=3), [5, 6, 7, 8, 9]
    reference = generate_ar(tiny_target, prompt, DecodeConfig(max_new_tokens=12, stop_tokens=())).tokens
    never = generate(tiny_target, proposer, prompt, DecodeConfig(max_new_tokens=12, budget=4, stop_tokens=()))
    always = generate(tiny_target, proposer, prompt,
                      DecodeConfig(max_new_tokens=12, budget=4, stop_tokens=(), trim=10.0,
                                   tree_costs=flat_costs(10.0, 4)))
    assert never.tokens == always.tokens == reference
    assert all(r.tree.size == 4 for r in never.rounds)
    assert all(r.tree.size == 0 and r.emitted == 1 for r in always.rounds)  # a 4-node tree forecasts < 5


def test_trimming_keeps_the_prefix_that_pays_and_stays_exact(tiny_target, one_thread):
    from tevcore.proposers import GreedyRolloutProposer

    prompt = [5, 6, 7, 8, 9]
    reference = generate_ar(tiny_target, prompt, DecodeConfig(max_new_tokens=12, stop_tokens=())).tokens
    costs = (1.0, 1.0, 1.0, 9.0, 9.0)  # two nodes are free, more cost nine plain steps
    trimmed = generate(tiny_target, GreedyRolloutProposer(depth=3), prompt,
                       DecodeConfig(max_new_tokens=12, budget=4, stop_tokens=(), trim="auto", tree_costs=costs))
    assert trimmed.tokens == reference
    assert all(r.tree.size == 2 and r.tree.budget == 4 for r in trimmed.rounds)


def test_skip_gate_stops_drafting_rounds_that_keep_failing_and_rechecks(tiny_target, one_thread):
    from tevcore.proposers import GreedyRolloutProposer

    class Counting(GreedyRolloutProposer):
        calls = 0

        def propose(self, session):
            Counting.calls += 1
            return super().propose(session)

    prompt = [5, 6, 7, 8, 9]
    reference = generate_ar(tiny_target, prompt, DecodeConfig(max_new_tokens=24, stop_tokens=())).tokens
    gated = generate(tiny_target, Counting(depth=3), prompt,
                     DecodeConfig(max_new_tokens=24, budget=4, stop_tokens=(), trim=10.0,
                                  tree_costs=flat_costs(10.0, 4)))
    assert gated.tokens == reference and len(gated.rounds) == 24
    # 4 rounds to learn that no tree passes, then one look every 8th round: rounds 12 and 20
    assert Counting.calls == 6


@pytest.mark.parametrize("verifier", EXACT)
@pytest.mark.parametrize("builder", ["best_first", "chain", "width:2,2,1"])
def test_greedy_speculative_equals_autoregressive_tiny(tiny_target, verifier, builder, one_thread):
    proposer = FixedRowsProposer(tiny_target.vocab_size)
    for seed in range(3):
        prompt = torch.randint(0, tiny_target.vocab_size, (9,), generator=torch.Generator().manual_seed(seed)).tolist()
        config = DecodeConfig(max_new_tokens=20, budget=10, builder=builder, verifier=verifier, seed=seed,
                              stop_tokens=())
        assert generate(tiny_target, proposer, prompt, config).tokens == generate_ar(tiny_target, prompt, config).tokens


def _exact_first_tokens_law(target, prompt: list[int], temperature: float, horizon: int) -> dict[tuple, float]:
    """Product of target conditionals over every string of `horizon` tokens (full enumeration)."""
    vocab = target.vocab_size
    law = {}
    with torch.inference_mode():
        for string in itertools.product(range(vocab), repeat=horizon):
            ids = torch.tensor([prompt + list(string)])
            logp = torch.log_softmax(target.model(input_ids=ids).logits[0].double() / temperature, -1)
            base = len(prompt) - 1
            law[string] = math.exp(sum(float(logp[base + i, tok]) for i, tok in enumerate(string)))
    return law


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["tev", "residual", "predraw", "chain"])
def test_joint_law_of_three_tokens_matches_target_tiny(small_vocab_target, verifier, one_thread):
    target = small_vocab_target
    prompt, temperature, horizon, draws = [1, 3, 0, 2], 1.0, 3, 2000
    law = _exact_first_tokens_law(target, prompt, temperature, horizon)
    assert abs(sum(law.values()) - 1) < 1e-9
    proposer = FixedRowsProposer(target.vocab_size, depth=3, seed=1)
    counts = dict.fromkeys(law, 0)
    for seed in range(draws):
        config = DecodeConfig(max_new_tokens=horizon, temperature=temperature, budget=6, verifier=verifier,
                              seed=seed, stop_tokens=())
        counts[tuple(generate(target, proposer, prompt, config).tokens)] += 1
    cells = list(law)
    statistic, dof = chi_square(np.array([counts[c] for c in cells]), np.array([law[c] for c in cells]))
    p_value = chi_square_pvalue(statistic, dof)
    print(f"{verifier}: joint law of 3 tokens, {dof + 1} pooled cells, {draws} draws, chi2 p = {p_value:.3f}")
    assert p_value > 1e-3


def _mixed_heldout_prompts(n_per_set: int) -> list[str]:
    from tevcore.lab.datasets import DATASETS, load_prompts

    return [p.text for name in DATASETS for p in load_prompts(name, "heldout", n_per_set)]


def test_greedy_speculative_equals_autoregressive_default_model(default_target, default_proposer):
    """20 held-out prompts: every exact verifier (best-first) and every builder (tev) vs AR greedy."""
    prompts = _mixed_heldout_prompts(5)
    assert len(prompts) == 20
    combos = [(v, "best_first") for v in EXACT] + [("tev", "chain"), ("tev", "width:3,2,1")]
    mismatches = []
    for index, prompt in enumerate(prompts):
        reference = generate_ar(default_target, prompt, DecodeConfig(max_new_tokens=16)).tokens
        for verifier, builder in combos:
            config = DecodeConfig(max_new_tokens=16, budget=16, verifier=verifier, builder=builder, seed=index)
            if generate(default_target, default_proposer, prompt, config).tokens != reference:
                mismatches.append((index, verifier, builder))
    assert not mismatches, f"speculative output differs from AR greedy for {mismatches}"


def _pooled_three_token_law(target, prompt: list[int], temperature: float) -> dict:
    """Exact probabilities of a-priori cells (top-4 x top-3 x top-2 strings), the rest pooled."""
    def rows(prefixes):
        with torch.inference_mode():
            out = target.model(input_ids=torch.tensor([prompt + list(p) for p in prefixes])).logits[:, -1]
        return torch.log_softmax(out.double() / temperature, -1)

    law = {}
    first = rows([()])[0]
    for t1 in first.topk(4).indices.tolist():
        second = rows([(t1,)])[0]
        seconds = second.topk(3).indices.tolist()
        thirds = rows([(t1, t2) for t2 in seconds])
        for t2, third in zip(seconds, thirds):
            for t3 in third.topk(2).indices.tolist():
                law[(t1, t2, t3)] = math.exp(float(first[t1] + second[t2] + third[t3]))
    return law


def test_joint_law_of_three_tokens_default_model(default_target, default_proposer):
    prompt = default_target.tokenizer("The capital of France is")["input_ids"]
    temperature, draws = 1.0, 500
    law = _pooled_three_token_law(default_target, prompt, temperature)
    counts = dict.fromkeys(law, 0)
    other = 0
    for seed in range(draws):
        config = DecodeConfig(max_new_tokens=3, temperature=temperature, budget=8, seed=seed, stop_tokens=(),
                              chat=False)
        string = tuple(generate(default_target, default_proposer, prompt, config).tokens)
        if string in counts:
            counts[string] += 1
        else:
            other += 1
    cells = list(law)
    observed = np.array([counts[c] for c in cells] + [other])
    probs = np.array([law[c] for c in cells] + [max(0.0, 1.0 - sum(law.values()))])
    p_value = chi_square_pvalue(*chi_square(observed, probs))
    print(f"default model: 3-token law, {len(cells) + 1} cells before pooling, {draws} draws, chi2 p = {p_value:.3f}")
    assert p_value > 1e-3


def test_lean_records_decode_the_same_and_carry_what_the_loop_needs(small_vocab_target):
    target, prompt = small_vocab_target, [1, 3, 0, 2]

    class Observed(FixedRowsProposer):
        seen: list[int] = []

        def observe_round(self, session, record) -> None:
            self.seen.append(record.index)

    settings = dict(max_new_tokens=8, temperature=1.0, budget=6, seed=3, stop_tokens=())
    full = generate(target, FixedRowsProposer(target.vocab_size), prompt, DecodeConfig(**settings))
    proposer = Observed(target.vocab_size)
    lean = generate(target, proposer, prompt, DecodeConfig(**settings, record="lean"))
    assert lean.tokens == full.tokens and len(lean.rounds) == len(full.rounds)
    assert proposer.seen == list(range(len(lean.rounds)))  # the feedback call: once per round, after commit
    for f, l in zip(full.rounds, lean.rounds):
        assert torch.equal(f.flow.exit_mass, l.flow.exit_mass)
        assert len(f.token_texts) == f.tree.num_nodes and f.flow.missing_tokens.shape[1] > 0 and f.bonus_text
        assert l.token_texts == [] and l.missing_texts == [] and l.flow.missing_tokens.shape[1] == 0
        assert l.timings.record > 0 and f.timings.record > 0
    with pytest.raises(ValueError, match="record must be one of full, lean"):
        DecodeConfig(record="medium")
