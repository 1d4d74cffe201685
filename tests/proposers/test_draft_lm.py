"""The draft LM proposer: frontier forwards vs separate runs, a cache that follows the commits, T = 0 identity
with the target's own greedy `generate`, the T = 1 joint law, and refusals. Its sampled trees: each node's
recorded q is the draft's own row given that node's path, and rrs on them follows the target's law over seeds
(Monte Carlo chi-square) while the foil at the same sample size does not."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import DynamicCache

from sampled_checks import FOIL_PVALUE, claimed_draws, seeds_follow_the_law
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import generate, rounds
from tevcore.engine.builders import chain
from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator, probs
from tevcore.engine.tree import DraftTree
from tevcore.proposers import resolve_proposer
from tevcore.proposers.draft_lm import DraftLMProposer, load_draft_lm
from tevcore.proposers.lookup import ContextLookupProposer, lookup_continuation
from tevcore.target.loading import load_target
from tevcore.target.session import TargetSession
from tevcore.verify.laws import chi_square, chi_square_pvalue

SHARPEN = 20.0  # random tiny heads give near-uniform rows; scaled up, a few tokens carry most of the mass
PROMPT = [1, 40, 71, 90, 33, 5, 101, 64, 12, 77, 50]


def _sharpen(model: torch.nn.Module, factor: float, noise: float = 0.0, seed: int = 0) -> None:
    """Scale the output head (and add seeded noise): peaked rows, and a draft that half agrees with its target."""
    weight = model.get_output_embeddings().weight
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        weight.mul_(factor).add_(noise * torch.randn(weight.shape, generator=generator))


@pytest.fixture(scope="module")
def models(tiny_model_folder, one_thread_module):
    """family -> (sharpened target, draft LM = its own folder with a noisy head, draft LM of another family)."""
    built = {}
    for family, other in (("qwen3", "llama"), ("llama", "qwen3")):
        folder = tiny_model_folder(family)
        target = load_target(str(folder), device="cpu")
        _sharpen(target.model, SHARPEN)
        near = load_draft_lm(str(folder), target, depth=4)
        _sharpen(near.model, SHARPEN, noise=0.2, seed=1)
        far = load_draft_lm(str(tiny_model_folder(other, seed=2)), target, depth=4)
        built[family] = target, near, far
    return built


def _path_tokens(tree, node: int) -> list[int]:
    tokens = []
    while node > 0:
        tokens.append(int(tree.tokens[node]))
        node = int(tree.parents[node])
    return tokens[::-1]


def test_frontier_forward_equals_separate_runs_of_each_path(models):
    target, proposer, _ = models["qwen3"]
    session = TargetSession(target)
    session.prefill(PROMPT, reserve=32)
    proposer.grow(session, parse_builder("chain"), 4)  # leave the draft cache longer than the context: the sync must crop it
    session.score_tree(DraftTree.root_only(session.root_token))
    session.commit([0], 9)  # a new root: the committed context moves on
    with sdpa_kernel(SDPBackend.MATH):
        grown = proposer.grow(session, parse_builder("best_first"), 12, keep_rows=True)
        tree = grown.tree
        per_depth = torch.bincount(tree.depths[list(grown.rows)])
        assert tree.size == 12 and tree.max_depth >= 3 and int(per_depth[1:].max()) >= 2  # a frontier of several
        worst = 0.0
        for node, row in grown.rows.items():
            ids = torch.tensor([session.committed + _path_tokens(tree, node)])
            with torch.inference_mode():
                alone = torch.log_softmax(proposer.model(input_ids=ids).logits[0, -1].float(), -1)
            worst = max(worst, float((row - alone).abs().max()))
            for child in (i for i in range(1, tree.num_nodes) if int(tree.parents[i]) == node):
                assert abs(float(tree.draft_logp[child]) - float(alone[tree.tokens[child]])) < 1e-4
    print(f"frontier rows vs separate runs over {len(grown.rows)} expanded nodes: max abs diff {worst:.2e}")
    assert worst < 1e-4


def _fresh_cache(model, tokens: list[int]) -> DynamicCache:
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([tokens]), cache=cache, use_cache=True)
    return cache


@pytest.mark.parametrize("builder", ["chain", "best_first"])
def test_draft_cache_follows_the_committed_path(models, builder):
    target, proposer, _ = models["llama"]
    committed, accepted = list(PROMPT), []
    config = DecodeConfig(max_new_tokens=24, budget=6, builder=builder, stop_tokens=())
    for record in rounds(target, proposer, PROMPT, config):
        assert proposer.cached_tokens == committed  # synced at this round's start, its tree cropped away
        fresh = _fresh_cache(proposer.model, committed)
        for mine, theirs in zip(proposer.cache.layers, fresh.layers):
            assert torch.allclose(mine.keys, theirs.keys, atol=1e-5)
            assert torch.allclose(mine.values, theirs.values, atol=1e-5)
        committed += record.emitted_tokens
        accepted.append(len(record.path) - 1)
    assert max(accepted) >= 2, f"no round accepted two draft tokens ({accepted}): the commits were not exercised"


def _hf_greedy(target, prompt: list[int], max_new_tokens: int) -> list[int]:
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=max_new_tokens, pad_token_id=0)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_greedy_decoding_equals_the_targets_own_generate(models, family):
    target, near, far = models[family]
    prompts = [PROMPT, PROMPT[::-1], LOOKUP_PROMPT]  # the last one's end was seen before: the lookup has a chain
    assert lookup_continuation(LOOKUP_PROMPT, 1)
    references = [_hf_greedy(target, prompt, 20) for prompt in prompts]
    assert sum(map(len, references)) > 20  # not all stopped at once by EOS
    looked_up = ContextLookupProposer(near)
    cases = [(near, "best_first", "tev", 0), (near, "best_first", "tev", 1), (near, "chain", "tev", 0),
             (near, "chain", "tev", 1), (far, "best_first", "residual", 0), (near, "sampled:3,2,1", "rrs", 0),
             (far, "sampled-wor:2,2,1", "rrs", 1), (near, "sampled:1,1,1,1", "block", 1),
             (looked_up, "sampled:2,1,1", "rrs", 2), (looked_up, "best_first", "tev", 2),
             (near, "mixed:3,2,1", "rrs", 0), (far, "mixed-wor:2,2,1", "rrs", 1), (looked_up, "mixed:2,1,1", "rrs", 2)]
    for proposer, builder, verifier, index in cases:
        config = DecodeConfig(max_new_tokens=20, budget=8, builder=builder, verifier=verifier)
        tokens = generate(target, proposer, prompts[index], config).tokens
        assert tokens == references[index], (proposer.name, builder, verifier, index)


def _two_token_law(target, prompt: list[int], temperature: float) -> dict[tuple[int, int], float]:
    """Exact probabilities of every first-two-token string (one batched forward over all first tokens)."""
    vocab = target.vocab_size
    with torch.inference_mode():
        first = torch.log_softmax(target.model(input_ids=torch.tensor([prompt])).logits[0, -1].double()
                                  / temperature, -1)
        batch = torch.tensor([prompt + [t] for t in range(vocab)])
        second = torch.log_softmax(target.model(input_ids=batch).logits[:, -1].double() / temperature, -1)
    joint = (first[:, None] + second).exp()
    return {(a, b): float(joint[a, b]) for a in range(vocab) for b in range(vocab)}


@pytest.mark.parametrize("verifier,builder", [("tev", "best_first"), ("residual", "best_first"),
                                              ("rrs", "sampled:2,2")])
def test_joint_law_of_two_tokens_matches_the_target(models, verifier, builder):
    target, near, _ = models["qwen3"]
    proposer = DraftLMProposer(near.draft, target, depth=2)  # two tokens: deeper drafts would only cost time
    temperature, draws = 1.0, 160
    law = _two_token_law(target, PROMPT, temperature)
    counts = dict.fromkeys(law, 0)
    accepted = 0
    for seed in range(draws):
        config = DecodeConfig(max_new_tokens=2, temperature=temperature, budget=4, builder=builder,
                              verifier=verifier, seed=seed, stop_tokens=(), missing_k=0)
        result = generate(target, proposer, PROMPT, config)
        counts[tuple(result.tokens)] += 1
        accepted += len(result.rounds[0].path) > 1
    big = [c for c in law if law[c] * draws >= 5]
    observed = [counts[c] for c in big] + [draws - sum(counts[c] for c in big)]
    expected = [law[c] * draws for c in big] + [draws * (1 - sum(law[c] for c in big))]
    p_value = chisquare(observed, expected).pvalue
    print(f"{verifier} with a draft LM: 2-token law, {len(observed)} cells, {draws} draws, "
          f"{accepted} first rounds accepted a draft token, chi2 p = {p_value:.3f}")
    assert len(big) >= 5 and 0 < accepted < draws  # a peaked law, and drafts both taken and refused
    assert p_value > 1e-3


def _save_permuted_tokenizer(folder, source) -> None:
    """`source`'s tokenizer with the ids of 'a' and 'b' swapped."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    original = AutoTokenizer.from_pretrained(source)
    spec = json.loads(original.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
    swapped = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)), bos_token="<s>",
                                      eos_token="</s>", pad_token="<pad>")
    swapped.save_pretrained(folder)


def test_a_draft_lm_with_another_tokenizer_is_refused(models, tiny_model_folder):
    target = models["qwen3"][0]
    folder = tiny_model_folder("llama", seed=5)
    _save_permuted_tokenizer(folder, folder)
    with pytest.raises(ValueError) as err:
        resolve_proposer(f"model:{folder}", target)
    message = str(err.value)
    print(message)
    assert "does not share the target's tokenizer" in message
    assert "'a' is 98 in the draft's but 97" in message or "'b' is 97 in the draft's but 98" in message
    assert folder.name in message and target.name in message and "\n" not in message


def test_missing_folders_non_causal_lms_and_offline_hub_ids_are_refused(models, tmp_path, monkeypatch):
    from huggingface_hub import constants

    target = models["qwen3"][0]
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "config.json").write_text(json.dumps({"model_type": "vit"}))
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    cases = [(f"model:{tmp_path / 'nowhere'}", "folder not found"),
             (f"model:{tmp_path / 'encoder'}", "not a causal LM"), (f"model:{tmp_path / 'empty'}", "not a causal LM"),
             ("model:nobody/no-such-model", "offline"), ("model:", "needs a hub id or a model folder")]
    for spec, expected in cases:
        with pytest.raises(ValueError) as err:
            resolve_proposer(spec, target)
        assert expected in str(err.value) and "\n" not in str(err.value), (spec, str(err.value))


def test_the_cli_refuses_a_bad_draft_lm_in_one_line(tiny_model_folder, tmp_path, capsys):
    from tevcore.cli import main

    code = main(["round", "--prompt", "hi", "--no-chat", "--target", str(tiny_model_folder("qwen3")),
                 "--proposer", f"model:{tmp_path / 'nowhere'}", "--device", "cpu"])
    err = capsys.readouterr().err  # after the target's loading progress bar
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("error: draft LM folder not found")


def test_chain_rows_and_bad_depths_or_builders(models):
    target, proposer, _ = models["llama"]
    with pytest.raises(ValueError, match="depth must be >= 1"):
        DraftLMProposer(proposer.draft, target, depth=0)
    session = TargetSession(target)
    session.prefill(PROMPT)
    with pytest.raises(ValueError, match="needs 5 draft depths but the proposer gives 4"):
        proposer.grow(session, parse_builder("width:2,2,2,2,2"), 64)
    rows = proposer.propose(session)  # the greedy chain's rows, for callers that build from rows
    assert rows.shape == (proposer.depth, target.vocab_size)
    assert torch.allclose(rows.logsumexp(-1), torch.zeros(proposer.depth), atol=1e-5)
    from_rows = chain(session.root_token, rows)
    grown = proposer.grow(session, parse_builder("chain"), proposer.depth).tree
    assert torch.equal(from_rows.tokens, grown.tokens)
    assert torch.allclose(from_rows.draft_logp, grown.draft_logp, atol=1e-5)


# ---------------------------------------------------------------- sampled trees: the draft's own q on each path

def test_each_node_draws_from_the_drafts_own_row_given_its_path(models):
    target, proposer, _ = models["llama"]
    session = TargetSession(target)
    session.prefill(PROMPT, reserve=32)
    temperature, budget = 1.5, 12  # without replacement: distinct children even from the sharpened draft's rows
    tree = proposer.propose_tree(session, parse_builder("sampled-wor:3,2,2"), budget, temperature, make_generator(5))
    draws = tree.draws
    assert proposer.cached_tokens == session.committed  # the tree's cache entries are cropped away
    drew = [node for node in range(tree.num_nodes) if int(draws.row_of[node]) >= 0]
    at_depth = {d: [n for n in drew if int(tree.depths[n]) == d] for d in (0, 1, 2)}
    assert tree.size <= budget and len(at_depth[1]) >= 2 and at_depth[2], (tree.size, at_depth)
    worst = 0.0
    with sdpa_kernel(SDPBackend.MATH), torch.inference_mode():
        for node in drew:  # one forward of the context and the node's own path, nothing shared
            ids = torch.tensor([session.committed + _path_tokens(tree, node)])
            alone = probs(proposer.model(input_ids=ids).logits[0, -1].double(), temperature)
            worst = max(worst, float((draws.proposal(node) - alone).abs().max()))
    for parent, child, q in zip(draws.parents.tolist(), draws.children.tolist(), draws.q.tolist()):
        assert q == pytest.approx(float(draws.proposal(parent)[tree.tokens[child]]), abs=1e-12)
        assert float(tree.draft_logp[child]) == pytest.approx(float(np.log(q)), abs=1e-5)
    first, second = (draws.proposal(n) for n in at_depth[1][:2])
    apart = 0.5 * float((first - second).abs().sum())
    print(f"{len(drew)} nodes drew; recorded q vs the draft's own row on each path: max abs diff {worst:.2e}; "
          f"TV between two depth-1 nodes' rows {apart:.3f}")
    assert worst < 1e-5
    assert apart > 0.05  # the rows differ with the path: a shared per-depth row would give 0


def test_a_sampled_tree_stays_within_the_budget_and_refuses_a_deeper_shape(models):
    target, proposer, _ = models["qwen3"]
    session = TargetSession(target)
    session.prefill(PROMPT)
    for budget in (1, 3, 5):
        tree = proposer.propose_tree(session, parse_builder("sampled-wor:3,3,3"), budget, 1.0, make_generator(budget))
        assert tree.size == budget and int(tree.draws.children.numel()) == budget  # wor: every draw a new node
    with pytest.raises(ValueError, match="5 draw depths but the drafter only gives 4 depths"):
        proposer.propose_tree(session, parse_builder("sampled:1,1,1,1,1"), 8, 1.0, make_generator(0))


def test_a_mixed_tree_fixes_the_top_of_each_nodes_own_row(models):
    """mixed: each drawing node's first child is the top-1 of the draft's own row given that node's path (a fixed
    point-mass draw); its drawn siblings never repeat it."""
    target, proposer, _ = models["llama"]
    session = TargetSession(target)
    session.prefill(PROMPT, reserve=32)
    temperature = 1.5
    tree = proposer.propose_tree(session, parse_builder("mixed:3,2,2"), 12, temperature, make_generator(2))
    draws = tree.draws
    assert draws.mixed and tree.size <= 12 and proposer.cached_tokens == session.committed
    drew = [node for node in range(tree.num_nodes) if int(draws.row_of[node]) >= 0]
    assert len(drew) >= 3
    with sdpa_kernel(SDPBackend.MATH), torch.inference_mode():
        for node in drew:
            ids = torch.tensor([session.committed + _path_tokens(tree, node)])
            alone = probs(proposer.model(input_ids=ids).logits[0, -1].double(), temperature)
            children, _ = draws.at(node)
            assert float((draws.proposal(node) - alone).abs().max()) < 1e-5
            assert draws.fixed_at(node) == [True] + [False] * (len(children) - 1)
            assert int(tree.tokens[children[0]]) == int(draws.proposal(node).argmax())
            assert int(tree.tokens[children[0]]) not in tree.tokens[children[1:]].tolist()


LOOKUP_PROMPT = [1, 40, 71, 90, 33, 5, 40, 71]  # ends with (40, 71), seen before: the lookup chain is 90, 33, ...


def _mixed_row(model, context: list[int], path: list[int], chain: list[int], rate: float) -> torch.Tensor:
    """(V,) float64 probabilities: the draft's own row after context + path, with the lookup mixed in where the
    path follows the chain, as the lookup's docstring states it: (1 - b) q + b 1[c_d]."""
    with sdpa_kernel(SDPBackend.MATH), torch.inference_mode():
        q = torch.softmax(model(input_ids=torch.tensor([context + path])).logits[0, -1].double(), -1)
    if len(path) < len(chain) and path == chain[:len(path)]:
        q = (1 - rate) * q
        q[chain[len(path)]] += rate
    return q


def test_the_lookup_mixes_into_each_node_of_the_drafts_own_tree_only_along_its_chain(models):
    target, near, _ = models["llama"]
    lookup = ContextLookupProposer(near)
    session = TargetSession(target)
    session.prefill(LOOKUP_PROMPT, reserve=32)
    chain = lookup_continuation(session.committed, lookup.depth)
    assert chain[:2] == [90, 33]
    rate = lookup.hit_rates(session)[0]  # 0.5 at every depth before any evidence
    temperature = 1.0  # the chain's token then carries at least b = 0.5 of the root's row
    tree = lookup.propose_tree(session, parse_builder("sampled:3,2,2"), 14, temperature, make_generator(3))
    draws, seen = tree.draws, {"on": 0, "off": 0}
    for node in range(tree.num_nodes):
        if int(draws.row_of[node]) < 0:
            continue
        path = _path_tokens(tree, node)
        expected = probs(_mixed_row(near.model, session.committed, path, chain, rate).log(), temperature)
        assert float((draws.proposal(node) - expected).abs().max()) < 1e-5, (node, path)
        seen["on" if path == chain[:len(path)] else "off"] += 1
    assert seen["on"] >= 2 and seen["off"] >= 1, seen  # the root, a node on the chain below it, and others
    fixed = lookup.propose_tree(session, parse_builder("best_first"), 8, 1.0, make_generator(0))
    for node in range(1, fixed.num_nodes):  # each edge's log q: its parent's own row, mixed only on the chain
        path = _path_tokens(fixed, node)
        row = _mixed_row(near.model, session.committed, path[:-1], chain, rate)
        assert float(fixed.draft_logp[node]) == pytest.approx(float(row[path[-1]].log()), abs=1e-4), path
    assert [chain[0]] in [_path_tokens(fixed, n) for n in range(1, fixed.num_nodes)]
    assert near.cached_tokens == session.committed


class ClaimedDrawsDraftLM(DraftLMProposer):
    """The foil: the draft's fixed top-2-then-top-1 tree claiming its children were drawn from the draft's rows."""

    def propose_tree(self, session, builder, budget, temperature, generator, mix=None):
        grown = self.grow(session, parse_builder("width:2,1"), budget, keep_rows=True)
        return claimed_draws(grown.tree, lambda node: probs(grown.rows[node], temperature))


MC_SEEDS = 4
MC_STRINGS = 300


def _two_token_counts(target, proposer, builder: str, temperature: float, seed: int) -> np.ndarray:
    """Counts of the first two emitted tokens over MC_STRINGS decodes with rrs, each with its own round seeds."""
    vocab = target.vocab_size
    counts = np.zeros(vocab * vocab)
    for i in range(MC_STRINGS):
        config = DecodeConfig(max_new_tokens=2, temperature=temperature, budget=4, builder=builder, verifier="rrs",
                              seed=seed * MC_STRINGS + i, stop_tokens=(), missing_k=0, record="lean")
        first, second = generate(target, proposer, PROMPT, config).tokens
        counts[first * vocab + second] += 1
    return counts


def _two_token_cells(target, temperature: float) -> np.ndarray:
    law = _two_token_law(target, PROMPT, temperature)
    return np.array([law[(a, b)] for a in range(target.vocab_size) for b in range(target.vocab_size)])


@pytest.mark.slow
@pytest.mark.parametrize("builder,temperature", [("sampled:2,2", 1.0), ("sampled-wor:2,2", 0.7), ("mixed:3,2", 1.0)])
def test_rrs_on_the_drafts_sampled_trees_follows_the_target_over_seeds(models, builder, temperature):
    target, near, _ = models["qwen3"]
    proposer = DraftLMProposer(near.draft, target, depth=2)  # the second token is decided at depth 2 at most
    cells = _two_token_cells(target, temperature)
    pvalues = [chi_square_pvalue(*chi_square(_two_token_counts(target, proposer, builder, temperature, seed), cells))
               for seed in range(MC_SEEDS)]
    follows, ks = seeds_follow_the_law(pvalues)
    print(f"rrs on the draft LM's {builder} trees at T={temperature}: {MC_SEEDS} seeds x {MC_STRINGS} two-token "
          f"strings, p-values {np.round(pvalues, 3).tolist()}, KS p {ks:.3f}")
    assert follows


@pytest.mark.slow
def test_the_foil_is_caught_at_the_same_size(models):
    target, near, _ = models["qwen3"]
    foil = ClaimedDrawsDraftLM(near.draft, target, depth=2)
    cells = _two_token_cells(target, 1.0)
    pvalues = [chi_square_pvalue(*chi_square(_two_token_counts(target, foil, "sampled:2,1", 1.0, seed), cells))
               for seed in range(2)]
    print(f"rrs on the draft LM's fixed width:2,1 tree claiming draws: {MC_STRINGS} strings, p-values {pvalues}")
    assert max(pvalues) < FOIL_PVALUE


def test_bench_runs_transformers_assisted_generation_with_the_draft_as_a_peer(models):
    from tevcore.lab.bench import run_bench

    target, proposer, _ = models["llama"]
    assistant = proposer.hf_assistant
    ids = torch.tensor([PROMPT])
    with torch.inference_mode():  # transformers' assisted generation takes the same loaded draft model
        assisted = target.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                         pad_token_id=0, assistant_model=assistant.model,
                                         **assistant.generate_kwargs)[0, len(PROMPT):].tolist()
    assert assisted == _hf_greedy(target, PROMPT, 12)
    rows = run_bench(target, proposer, ["humaneval"], 1, 6, [0.0], [4], ["tev"])
    peer = [row for row in rows if row["method"] == assistant.method]
    assert len(peer) == 1 and peer[0]["tokens_per_s"] > 0, [row["method"] for row in rows]
