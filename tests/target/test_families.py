"""Every family's tree forward is the model's own forward: tiny random Llama, Qwen2, Qwen3, Gemma 2, Gemma 3,
Mistral and Phi-3 (window 8 where they slide) against transformers' default loading of the same folder.

Checks per family: tree forward vs a plain recompute of every node's path at contexts shorter and longer than
the window; commit then score vs a fresh recompute; T = 0 decoding identical to transformers' greedy
`generate` for every exact verifier; at T = 1 a chi-square test of the first two tokens' joint law for tev and
residual. The `cuda` params rerun them on a GPU (scripts/gpu_check.sh).

bfloat16 tolerance: bf16 keeps 8 significant bits, so one rounding moves a logit by up to 2^-8 of its size and
two forwards that sum in different orders (masked tree SDPA vs causal SDPA) differ by a few such steps (up to
~2.5 of them measured on this CPU); 2^-5 of the largest logit allows 8, while a masking or window error moves
logits by 10-160% of the largest one (0.05-0.8 on logits of ~0.5 in these models, see the control test).
"""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from family_cases import (FixedRowsProposer, NoisyRolloutProposer, load_pair, on_device, random_tree,
                          reference_last_logits, sharpen)
from tiny_models import FAMILIES, WINDOW
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import generate
from tevcore.engine.tree import DraftTree
from tevcore.target.session import TargetSession
from tevcore.verify.verifiers import EXACT_VERIFIERS

TOLERANCE = {"float32": lambda scale: 1e-4, "bfloat16": lambda scale: 2 ** -5 * scale}
SLIDING = ("qwen2", "gemma2", "gemma3", "mistral")
EOS = 2
_PAIRS: dict = {}
_LAW_CASES: dict = {}  # (family, where) -> (prompt, law) of its sharpened pair


@pytest.fixture
def pair(tiny_model_folder, one_thread):
    """(target, reference) of a family on a device, loaded once per (family, device, dtype, to be sharpened)."""
    def get(family: str, device: str, dtype: str, sharpened: bool = False):
        key = (family, device, dtype, sharpened)
        if key not in _PAIRS:
            _PAIRS[key] = load_pair(tiny_model_folder(family), device, dtype)
        return _PAIRS[key]
    return get


def _context(length: int, seed: int) -> list[int]:
    return torch.randint(3, 128, (length,), generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("where", [on_device("cpu", "float32"), on_device("cpu", "bfloat16"),
                                   on_device("cuda", "bfloat16")])
@pytest.mark.parametrize("context_length", [WINDOW - 4, 3 * WINDOW])
@pytest.mark.parametrize("family", FAMILIES)
def test_tree_forward_equals_recompute(family, context_length, where, pair):
    target, reference = pair(family, *where)
    context = _context(context_length, seed=context_length)
    session = TargetSession(target)
    session.prefill(context)
    tree = random_tree(target.vocab_size, context[-1], budget=16, seed=context_length)
    assert tree.max_depth >= 2 and max(len(kids) for kids in tree.children()) >= 2
    logits = session.score_tree(tree).logits
    paths = [context + tree.tokens[tree.path(node)[1:]].tolist() for node in range(tree.num_nodes)]
    worst = max(float((logits[node] - reference_last_logits(reference, [path])[0]).abs().max())
                for node, path in enumerate(paths))
    scale = float(logits.abs().max())
    print(f"{family} {where} context {context_length}: tree vs recompute max abs diff {worst:.3g} "
          f"(largest logit {scale:.3g})")
    assert worst < TOLERANCE[where[1]](scale)


@pytest.mark.parametrize("where", [on_device("cpu", "float32"), on_device("cuda", "float32")])
@pytest.mark.parametrize("family", FAMILIES)
def test_commit_then_score_equals_fresh_recompute(family, where, pair):
    target, reference = pair(family, *where)
    session = TargetSession(target)
    session.prefill(_context(WINDOW - 2, seed=7))
    worst = 0.0
    for round_index in range(3):  # the committed context passes the window in the first round
        tree = random_tree(target.vocab_size, session.root_token, budget=12, seed=20 + round_index)
        session.score_tree(tree)
        deepest = int(tree.depths.argmax())
        session.commit(tree.path(deepest), bonus_token=3 + 11 * round_index)
        root = session.score_tree(DraftTree.root_only(session.root_token)).logits[0]
        worst = max(worst, float((root - reference_last_logits(reference, [session.committed])[0]).abs().max()))
        session.rollback()
    print(f"{family}: commit then score vs recompute max abs diff {worst:.3g}")
    assert len(session.committed) > 2 * WINDOW and worst < 1e-4


@pytest.mark.parametrize("where", [on_device("cpu", "float32"), on_device("cuda", "float32")])
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_equals_transformers_generate(family, where, pair):
    target, reference = pair(family, *where)
    prompt, new_tokens = _context(WINDOW + 4, seed=3), 12
    with torch.inference_mode():
        ids = torch.tensor([prompt], device=reference.device)
        expected = reference.generate(ids, max_new_tokens=new_tokens, do_sample=False, eos_token_id=EOS,
                                      pad_token_id=0)[0, len(prompt):].tolist()
    lengths = {}
    for index, verifier in enumerate(EXACT_VERIFIERS):
        config = DecodeConfig(max_new_tokens=new_tokens, budget=8, verifier=verifier, seed=index, stop_tokens=(EOS,))
        decoded = generate(target, NoisyRolloutProposer(depth=3, seed=index), prompt, config)
        assert decoded.tokens == expected, verifier
        lengths[verifier] = round(sum(r.emitted for r in decoded.rounds) / len(decoded.rounds), 2)
    print(f"{family}: {len(expected)} tokens identical to HF greedy generate; mean block length {lengths}")
    assert max(lengths.values()) > 1.0  # drafts were accepted, not just bonus tokens


@pytest.mark.parametrize("family", FAMILIES)
def test_sampled_trees_at_zero_temperature_decode_greedy(family, pair):
    """A sampled or mixed tree verified by rrs (with and without replacement) or block emits HF's greedy output at
    T = 0."""
    target, reference = pair(family, "cpu", "float32")
    prompt, new_tokens = _context(WINDOW + 4, seed=5), 12
    with torch.inference_mode():
        expected = reference.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False,
                                      eos_token_id=EOS, pad_token_id=0)[0, len(prompt):].tolist()
    for index, (builder, verifier) in enumerate([("sampled:3,2,1", "rrs"), ("sampled-wor:2,2,2", "rrs"),
                                                 ("sampled:1,1,1", "block"), ("sampled:3,2,1", "tev"),
                                                 ("mixed:3,2,1", "rrs"), ("mixed-wor:2,2,2", "rrs"),
                                                 ("mixed:2,1,1", "residual")]):
        config = DecodeConfig(max_new_tokens=new_tokens, budget=8, builder=builder, verifier=verifier, seed=index,
                              stop_tokens=(EOS,))
        decoded = generate(target, NoisyRolloutProposer(depth=3, seed=index), prompt, config)
        assert decoded.tokens == expected, (builder, verifier)
        assert all(r.tree.sampled for r in decoded.rounds)


@pytest.mark.parametrize("family", SLIDING)
def test_control_a_mask_without_the_window_is_caught(family, pair):
    """The check above can fail: the same tree scored with the window left out of the masks is far off."""
    target, reference = pair(family, "cpu", "float32")
    context = _context(3 * WINDOW, seed=3 * WINDOW)
    session = TargetSession(target)
    session.prefill(context)
    session._windows = dict.fromkeys(session._windows)  # every layer masked as if it were full attention
    tree = random_tree(target.vocab_size, context[-1], budget=16, seed=3 * WINDOW)
    logits = session.score_tree(tree).logits
    worst = max(float((logits[node] - reference_last_logits(reference, [context + tree.tokens[tree.path(node)[1:]]
                                                                         .tolist()])[0]).abs().max())
                for node in range(tree.num_nodes))
    print(f"{family}: window left out, tree vs recompute max abs diff {worst:.3g}")
    assert worst > 100 * TOLERANCE["float32"](1.0)


def _two_token_law(reference: torch.nn.Module, prompt: list[int], draws: int) -> dict[tuple[int, ...], float]:
    """Exact P(first two tokens) at T = 1 for the strings likely enough to be counted, from the reference."""
    first = torch.log_softmax(reference_last_logits(reference, [prompt])[0].double(), -1)
    heads = [t for t in first.topk(12).indices.tolist() if first[t].exp() * draws >= 5]
    if not heads:
        return {}
    seconds = torch.log_softmax(reference_last_logits(reference, [prompt + [t] for t in heads]).double(), -1)
    law = {}
    for head, row in zip(heads, seconds):
        for tail in row.topk(12).indices.tolist():
            if float((first[head] + row[tail]).exp()) * draws >= 5:
                law[(head, tail)] = float((first[head] + row[tail]).exp())
    return law


def _sharpened_case(target, reference, draws: int) -> tuple[list[int], dict[tuple[int, ...], float]]:
    """Sharpen both heads to the scale (a power of 1.2) and pick the prompt (of two) whose 2-token law has the
    most countable cells while they hold >= 40% of it; return that prompt and law."""
    step, steps, scored = 1.2, 24, []
    for seed in (5, 6):
        prompt = _context(WINDOW + 3, seed=seed)
        for k in range(steps):
            law = _two_token_law(reference, prompt, draws)
            scored.append((len(law) if sum(law.values()) >= 0.4 else 0, seed, k))
            sharpen(target, reference, step)
        sharpen(target, reference, step ** -steps)
    cells, seed, k = max(scored)
    sharpen(target, reference, step ** k)
    prompt = _context(WINDOW + 3, seed=seed)
    law = _two_token_law(reference, prompt, draws)
    assert len(law) >= 2 and sum(law.values()) >= 0.4, f"no sharpening gives a testable 2-token law: {law}"
    return prompt, law


@pytest.mark.parametrize("where", [on_device("cpu", "float32"), on_device("cuda", "bfloat16")])
@pytest.mark.parametrize("verifier", ["tev", "residual"])
@pytest.mark.parametrize("family", FAMILIES)
def test_two_token_law_at_temperature_one(family, verifier, where, pair):
    target, reference = pair(family, *where, sharpened=True)
    draws = 70
    if (family, where) not in _LAW_CASES:
        _LAW_CASES[family, where] = _sharpened_case(target, reference, draws)
    prompt, law = _LAW_CASES[family, where]
    # rows near the target's own (so drafts get accepted), perturbed (so some are not)
    rows = torch.stack([torch.log_softmax(reference_last_logits(reference, [prompt])[0], -1),
                        torch.log_softmax(reference_last_logits(reference, [prompt + [max(law, key=law.get)[0]]])[0],
                                          -1)]).cpu()
    proposer = FixedRowsProposer(torch.log_softmax(rows + torch.randn(rows.shape, generator=torch.Generator()
                                                                     .manual_seed(1)), -1))
    counts = dict.fromkeys(law, 0)
    for seed in range(draws):
        config = DecodeConfig(max_new_tokens=2, temperature=1.0, budget=6, verifier=verifier, seed=seed,
                              stop_tokens=())
        string = tuple(generate(target, proposer, prompt, config).tokens)
        if string in counts:
            counts[string] += 1
    cells = list(law)
    observed = [counts[c] for c in cells] + [draws - sum(counts.values())]
    expected = [law[c] * draws for c in cells] + [draws * (1 - sum(law.values()))]
    p_value = chisquare(observed, expected).pvalue
    print(f"{family} {verifier} {where}: 2-token law, {len(cells)} cells + rest (mass "
          f"{1 - sum(law.values()):.3f}), {draws} draws, chi2 p = {p_value:.3f}")
    assert p_value > 1e-3


def test_soft_capped_layers_under_the_tree_sdpa_fall_back_to_eager(tiny_model_folder, one_thread):
    """Gemma 2 forced onto the tree SDPA (load_target picks eager for it): its soft-capped layers still run the
    family's eager attention, so the tree forward stays exact."""
    from tevcore.target.tree_attention import TREE_SDPA

    target, reference = load_pair(tiny_model_folder("gemma2"), "cpu", "float32")
    assert target.model.config._attn_implementation == "eager"
    target.model.config._attn_implementation = TREE_SDPA
    for model in (target.model, reference):  # random-init scores are ~1e-3: a cap that small bends them (a dropped
        # cap then moves logits by ~4e-3, 40x the tolerance; the real 50 would move them by ~1e-6)
        for module in model.modules():
            if getattr(module, "attn_logit_softcapping", None) is not None:
                module.attn_logit_softcapping = 1e-3
    context = _context(3 * WINDOW, seed=11)
    session = TargetSession(target)
    session.prefill(context)
    tree = random_tree(target.vocab_size, context[-1], budget=10, seed=11)
    logits = session.score_tree(tree).logits
    worst = max(float((logits[node] - reference_last_logits(reference, [context + tree.tokens[tree.path(node)[1:]]
                                                                         .tolist()])[0]).abs().max())
                for node in range(tree.num_nodes))
    assert worst < 1e-4
