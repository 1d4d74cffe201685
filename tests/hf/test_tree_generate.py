"""Tree speculative decoding through the caller's own `model.generate(custom_generate=...)`.

1. Greedy: the output is token-for-token `model.generate`'s greedy output on every covered family (tiny random
   models loaded as a user loads them), with drafts accepted along the way, through the callable and the folder.
2. The streamer receives the same text as transformers' own greedy generate streams.
3. What cannot be honoured is refused in one line naming it; the return dict carries the rounds, E[L], 1 + C and
   the vLLM-named counts, consistent with the tokens.
4. T = 1, top-k 20, top-p 0.9: the first token's counts against the warped law transformers' own processors give
   (chi-square), and the same test catching a decode that ignores the warpers.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, TextStreamer
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

from tiny_models import FAMILIES, char_tokenizer
from tevcore.hf import CUSTOM_GENERATE_FOLDER
from tevcore.hf.tree_generate import TreeGenerateOutput, tree_generate
from tevcore.proposers.base import GreedyRolloutProposer
from tevcore.verify.laws import chi_square, chi_square_pvalue

EOS = 2
PROMPT = "the cat sat on the mat; the cat sat on the"  # repeats: the context lookup finds drafts
_MODELS: dict = {}


@pytest.fixture
def hf_model(tiny_model_folder, one_thread):
    """A family's tiny model as a user loads it (transformers' default attention), once per family."""
    def get(family: str):
        if family not in _MODELS:
            _MODELS[family] = AutoModelForCausalLM.from_pretrained(tiny_model_folder(family)).eval()
        return _MODELS[family]
    return get


def _prompt_ids() -> torch.Tensor:
    return torch.tensor([char_tokenizer()(PROMPT)["input_ids"]])


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_equals_model_generate_on_every_family(family, hf_model):
    model, ids = hf_model(family), _prompt_ids()
    expected = model.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=EOS, pad_token_id=0)
    out = model.generate(ids, max_new_tokens=24, do_sample=False, eos_token_id=EOS, pad_token_id=0,
                         custom_generate=tree_generate, return_dict_in_generate=True)
    assert isinstance(out, TreeGenerateOutput)
    assert out.sequences.tolist() == expected.tolist()
    print(f"{family} ({model.config._attn_implementation}): {expected.shape[1] - ids.shape[1]} tokens identical, "
          f"{out.spec_decode.num_accepted_tokens} draft tokens accepted in {len(out.rounds)} rounds")
    assert out.spec_decode.num_accepted_tokens > 0  # the tree did work: drafts were accepted, not only bonuses


@pytest.mark.parametrize("builder,verifier", [("best_first", "residual"), ("sampled:3,2,1", "rrs"),
                                              ("mixed-wor:2,2,2", "rrs"), ("sampled:1,1,1", "block")])
def test_greedy_through_the_folder_with_tevcore_options(builder, verifier, hf_model):
    model, ids = hf_model("qwen2"), _prompt_ids()
    expected = model.generate(ids, max_new_tokens=16, do_sample=False)
    out = model.generate(ids, max_new_tokens=16, do_sample=False, custom_generate=CUSTOM_GENERATE_FOLDER,
                         trust_remote_code=True, builder=builder, verifier=verifier, budget=6)
    assert out.tolist() == expected.tolist()


class _Collect(TextStreamer):
    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer, skip_prompt=True)
        self.pieces: list[str] = []

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        self.pieces.append(text)


def test_streamer_receives_the_same_text(hf_model):
    model, ids, tokenizer = hf_model("llama"), _prompt_ids(), char_tokenizer()
    theirs, through_folder, through_callable = _Collect(tokenizer), _Collect(tokenizer), _Collect(tokenizer)
    model.generate(ids, max_new_tokens=20, do_sample=False, streamer=theirs)
    model.generate(ids, max_new_tokens=20, do_sample=False, streamer=through_folder,
                   custom_generate=CUSTOM_GENERATE_FOLDER, trust_remote_code=True)
    model.generate(ids, max_new_tokens=20, do_sample=False, custom_generate=tree_generate,
                   tree_streamer=through_callable)
    text = "".join(theirs.pieces)
    assert len(text) == 20 and "".join(through_folder.pieces) == text == "".join(through_callable.pieces)


@pytest.mark.parametrize("arguments,named", [
    ({"repetition_penalty": 1.3}, "RepetitionPenaltyLogitsProcessor"),
    ({"min_new_tokens": 4, "eos_token_id": EOS}, "MinLengthLogitsProcessor"),
    ({"num_return_sequences": 2, "do_sample": True}, "num_return_sequences=2"),
    ({"return_dict_in_generate": True, "output_scores": True}, "output_scores=True"),
    ({"verifier": "naive_ratio"}, "NOT exact"),
    ({"verifier": "greedy", "do_sample": True, "temperature": 1.0}, "exact only for the T = 0 target"),
])
def test_what_cannot_be_honoured_is_refused_in_one_line(arguments, named, hf_model):
    model = hf_model("llama")
    with pytest.raises(ValueError) as caught:
        model.generate(_prompt_ids(), max_new_tokens=4, custom_generate=tree_generate, **arguments)
    assert named in str(caught.value) and "\n" not in str(caught.value)


def test_a_batch_is_refused_in_one_line(hf_model):
    ids = _prompt_ids()
    with pytest.raises(ValueError, match="^tevcore tree decoding cannot honour a batch of 2 sequences"):
        hf_model("llama").generate(torch.cat([ids, ids]), max_new_tokens=4, custom_generate=tree_generate)


def test_the_return_dict_carries_rounds_and_engine_counts(hf_model):
    model, ids = hf_model("phi3"), _prompt_ids()
    out = model.generate(ids, max_new_tokens=20, do_sample=False, custom_generate=tree_generate,
                         return_dict_in_generate=True, budget=6)
    new = out.sequences.shape[1] - ids.shape[1]
    counts = out.spec_decode
    assert sum(out.emitted) == new and len(out.expected_lengths) == len(out.rounds) == len(out.emitted)
    assert all(1.0 <= e <= 1 + r.tree.max_depth for e, r in zip(out.expected_lengths, out.rounds))
    assert counts.num_drafts == sum(r.tree.size > 0 for r in out.rounds)
    assert counts.num_draft_tokens == sum(r.tree.size for r in out.rounds)
    assert counts.num_accepted_tokens == sum(len(r.path) - 1 for r in out.rounds)
    assert counts.num_accepted_tokens_per_pos[0] == sum(len(r.path) > 1 for r in out.rounds)


# ---------------------------------------------------------------- T = 1 with top-k 20 and top-p 0.9

TOP_K, TOP_P = 20, 0.9


def _warped_first_token_law(model, ids: torch.Tensor) -> np.ndarray:
    """The law `generate` samples the first token from: transformers' own warpers on the model's last row."""
    with torch.inference_mode():
        row = model(input_ids=ids).logits[:, -1].float()
    warpers = LogitsProcessorList([TemperatureLogitsWarper(1.0), TopKLogitsWarper(TOP_K), TopPLogitsWarper(TOP_P)])
    return warpers(ids, row).softmax(-1)[0].double().numpy()


def _first_token_counts(model, ids: torch.Tensor, draws: int, **arguments) -> np.ndarray:
    counts = np.zeros(model.config.vocab_size)
    torch.manual_seed(0)  # the seeds the door draws come from torch's global generator, as generate's own do
    for _ in range(draws):
        out = model.generate(ids, max_new_tokens=1, custom_generate=tree_generate, do_sample=True, **arguments)
        counts[int(out[0, -1])] += 1
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("builder,verifier", [("best_first", "tev"), ("mixed:3,2", "rrs")])
def test_first_token_follows_the_warped_law(builder, verifier, hf_model):
    """A drafter that rolls the target out greedily (so trees are accepted), T = 1, top-k 20, top-p 0.9."""
    model, ids = hf_model("llama"), _prompt_ids()
    law = _warped_first_token_law(model, ids)
    counts = _first_token_counts(model, ids, 1500, temperature=1.0, top_k=TOP_K, top_p=TOP_P, builder=builder,
                                 verifier=verifier, budget=6, proposer=GreedyRolloutProposer(depth=3))
    pvalue = chi_square_pvalue(*chi_square(counts, law))
    print(f"{builder}/{verifier}: {int((law > 0).sum())} tokens kept by the warpers, p = {pvalue:.3f}")
    assert (law > 0).sum() >= 5 and pvalue > 1e-4


def test_the_warped_law_test_catches_unwarped_sampling(hf_model):
    """The same chi-square on a decode without the warpers (T = 1 only) fails: mass falls outside the kept set."""
    model, ids = hf_model("llama"), _prompt_ids()
    counts = _first_token_counts(model, ids, 200, temperature=1.0, budget=4)
    assert chi_square_pvalue(*chi_square(counts, _warped_first_token_law(model, ids))) < 1e-6


def test_a_filled_cache_is_refused_rather_than_ignored(hf_model):
    from transformers import DynamicCache

    model, ids = hf_model("llama"), _prompt_ids()
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=ids[:, :-1], cache=cache, use_cache=True)
    with pytest.raises(ValueError, match="a cache that already holds a context"):
        model.generate(ids, max_new_tokens=4, custom_generate=tree_generate, cache=cache)


def test_the_callers_model_is_left_as_it_was(hf_model):
    """The door wraps the caller's model as it is: no packed linears, no other attention, no new weights."""
    model = hf_model("mistral")
    before = (model.config._attn_implementation, model.training, {n: p.data_ptr() for n, p in model.named_parameters()},
              sorted({type(m).__name__ for m in model.modules()}))
    model.generate(_prompt_ids(), max_new_tokens=6, do_sample=True, top_k=20, custom_generate=tree_generate)
    after = (model.config._attn_implementation, model.training, {n: p.data_ptr() for n, p in model.named_parameters()},
             sorted({type(m).__name__ for m in model.modules()}))
    assert after == before
