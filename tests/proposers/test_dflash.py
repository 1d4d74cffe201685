"""Published-format DFlash drafters as proposers, on tiny targets of three families.

The reference forward below is written from the published description of the
network (not from transformers' class that tevcore loads the weights into),
and recomputes each block from the whole context, so agreement also proves
that the proposer's draft cache follows the session's commits.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn import functional as F

from dflash_checkpoints import HEAD_DIM, HEADS, KV_HEADS, dflash_config, dflash_weights, write_dflash
from tevcore.config import DecodeConfig
from tevcore.decoding.loop import generate
from tevcore.engine.tree import DraftTree
from tevcore.proposers import resolve_proposer
from tevcore.proposers.dflash import DFlashProposer
from tevcore.target.loading import load_target
from tevcore.target.session import TargetSession

FAMILIES = ("llama", "qwen3", "qwen2")
PROMPT = [1, 40, 41, 50, 60, 70, 41, 42, 43, 44, 45]


def _rms(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x, positions, theta):
    half = x.shape[-1] // 2
    freqs = positions[:, None].double() / theta ** (torch.arange(half).double() * 2 / x.shape[-1])
    cos, sin = torch.cat([freqs.cos()] * 2, -1).float(), torch.cat([freqs.sin()] * 2, -1).float()
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos[:, None] + rotated * sin[:, None]


def reference_visible(config: dict, layer: int, s: int, block: int) -> torch.Tensor:
    """(block, s + block) which keys each block query sees in `layer`, as the published reference defines it.

    Sliding layers are causal unless `is_causal` says otherwise, full ones are
    not; a sliding layer sees keys less than `sliding_window` positions away
    (when `use_sliding_window`, as Qwen3's config rules).
    """
    kind = config.get("layer_types", ["full_attention"] * config["num_hidden_layers"])[layer]
    causal = config.get("is_causal", kind == "sliding_attention")
    window = config.get("sliding_window") if kind == "sliding_attention" and config.get("use_sliding_window") else None
    q, k = torch.arange(s, s + block)[:, None], torch.arange(s + block)[None]
    visible = torch.ones(block, s + block, dtype=torch.bool)
    if causal:
        visible &= k <= q
    if window:
        visible &= (q - k).abs() < window
    return visible


def reference_rows(w: dict, config: dict, model, context_ids: list[int], anchor: int) -> torch.Tensor:
    """Per-depth draft logits (block_size - 1, V) of the block after `context_ids`, from scratch."""
    nested = config["dflash_config"]
    layer_ids, block = nested["target_layer_ids"], nested.get("block_size", config.get("block_size"))
    with torch.no_grad():
        states = model(torch.tensor([context_ids]), output_hidden_states=True).hidden_states
        features = torch.cat([states[i + 1][0] for i in layer_ids], -1)
        ctx = _rms(features @ w["fc.weight"].T, w["hidden_norm.weight"])
        embed = model.get_input_embeddings().weight
        x = embed[torch.tensor([anchor] + [nested["mask_token_id"]] * (block - 1))]
        s = len(context_ids)
        positions = torch.arange(s + block)
        theta = config["rope_theta"]
        for i in range(config["num_hidden_layers"]):
            p = f"layers.{i}."
            h = _rms(x, w[p + "input_layernorm.weight"])
            kv_in = torch.cat([ctx, h])
            q = _rms((h @ w[p + "self_attn.q_proj.weight"].T).view(block, HEADS, HEAD_DIM), w[p + "self_attn.q_norm.weight"])
            k = _rms((kv_in @ w[p + "self_attn.k_proj.weight"].T).view(s + block, KV_HEADS, HEAD_DIM),
                     w[p + "self_attn.k_norm.weight"])
            v = (kv_in @ w[p + "self_attn.v_proj.weight"].T).view(s + block, KV_HEADS, HEAD_DIM)
            q, k = _rope(q, positions[s:], theta), _rope(k, positions, theta)
            k, v = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
            scores = torch.einsum("qhd,khd->hqk", q, k) / HEAD_DIM ** 0.5
            attn = torch.softmax(scores.masked_fill(~reference_visible(config, i, s, block), float("-inf")), -1)
            out = torch.einsum("hqk,khd->qhd", attn, v).reshape(block, HEADS * HEAD_DIM)
            x = x + out @ w[p + "self_attn.o_proj.weight"].T
            h = _rms(x, w[p + "post_attention_layernorm.weight"])
            x = x + (F.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) \
                @ w[p + "mlp.down_proj.weight"].T
        return _rms(x, w["norm.weight"])[1:] @ model.get_output_embeddings().weight.T


@pytest.fixture(scope="module")
def targets(tiny_model_folder):
    """family -> (target folder, loaded target); qwen2's window lies past every test context."""
    out = {}
    for family in FAMILIES:
        folder = tiny_model_folder(family, **({"window": 256} if family == "qwen2" else {}))
        out[family] = (folder, load_target(str(folder), device="cpu", dtype="float32"))
    return out


def _drafter(tmp_path, name, seed=0, **kw):
    config = dflash_config(64, 128, 2, **kw)
    return write_dflash(tmp_path / name, config, seed=seed), config


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("nested_block", [True, False])
def test_rows_match_an_independent_forward_across_commits(targets, tmp_path, one_thread, family, nested_block):
    folder, config = _drafter(tmp_path, "d", seed=3, nested_block=nested_block, layer_ids=(0, 1))
    target = targets[family][1]
    proposer = resolve_proposer(f"dflash:{folder}", target)
    assert isinstance(proposer, DFlashProposer) and proposer.depth == 3
    weights = dflash_weights(config, seed=3)
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(PROMPT, reserve=32)
    for accept in (2, 0, 3, 1):  # commit paths of several lengths, as rounds would
        rows = proposer.propose(session)
        expected = torch.log_softmax(reference_rows(weights, config, target.model, session.committed[:-1],
                                                    session.root_token), -1)
        assert rows.shared.shape == (3, 128)
        assert torch.allclose(rows.shared, expected, atol=1e-5), float((rows.shared - expected).abs().max())
        chain = [session.root_token] + [int(t) for t in rows.shared.argmax(-1)[:accept]]
        tree = DraftTree(tokens=torch.tensor(chain), parents=torch.arange(-1, len(chain) - 1),
                         draft_logp=torch.zeros(len(chain)))
        logits = session.score_tree(tree).logits
        session.commit(list(range(len(chain))), int(logits[-1].argmax()))


LAYER_KINDS = {  # top-level config keys of causal and sliding-window drafters (block 4, contexts of 11+ tokens)
    "causal": {"is_causal": True},
    "sliding, causal by default": {"layer_types": ["sliding_attention", "full_attention"], "use_sliding_window": True,
                                   "sliding_window": 5},
    "sliding, bidirectional": {"layer_types": ["sliding_attention"] * 2, "use_sliding_window": True,
                               "sliding_window": 3, "is_causal": False},
}


@pytest.mark.parametrize("kind", sorted(LAYER_KINDS))
def test_causal_and_sliding_drafters_match_an_independent_forward(targets, tmp_path, one_thread, kind):
    folder, config = _drafter(tmp_path, "d", seed=4, **LAYER_KINDS[kind])
    target = targets["qwen3"][1]
    proposer = resolve_proposer(f"dflash:{folder}", target)
    assert proposer.hf_assistant is None  # transformers' chain decoding would run other masks
    weights = dflash_weights(config, seed=4)
    session = TargetSession(target, hidden_layers=proposer.hidden_layers)
    session.prefill(PROMPT, reserve=32)
    plain = dict(config, is_causal=False, use_sliding_window=False)
    for accept in (2, 0, 3):
        rows = proposer.propose(session)
        context = session.committed[:-1]
        expected = torch.log_softmax(reference_rows(weights, config, target.model, context, session.root_token), -1)
        assert torch.allclose(rows.shared, expected, atol=1e-5), float((rows.shared - expected).abs().max())
        unmasked = torch.log_softmax(reference_rows(weights, plain, target.model, context, session.root_token), -1)
        assert not torch.allclose(rows.shared, unmasked, atol=1e-3)  # the masks changed the rows
        chain = [session.root_token] + [int(t) for t in rows.shared.argmax(-1)[:accept]]
        tree = DraftTree(tokens=torch.tensor(chain), parents=torch.arange(-1, len(chain) - 1),
                         draft_logp=torch.zeros(len(chain)))
        session.commit(list(range(len(chain))), int(session.score_tree(tree).logits[-1].argmax()))


@pytest.mark.parametrize("kind", sorted(LAYER_KINDS))
def test_greedy_decoding_with_causal_and_sliding_drafters_equals_the_targets(targets, tmp_path, one_thread, kind):
    folder, _ = _drafter(tmp_path, "d", seed=1, block_size=5, **LAYER_KINDS[kind])
    target = targets["qwen3"][1]
    ours = generate(target, resolve_proposer(f"dflash:{folder}", target), PROMPT,
                    DecodeConfig(max_new_tokens=20, temperature=0.0, budget=10, stop_tokens=()))
    with torch.no_grad():
        hf = target.model.generate(torch.tensor([PROMPT]), max_new_tokens=20, do_sample=False,
                                   eos_token_id=None, pad_token_id=0)[0, len(PROMPT):].tolist()
    assert ours.tokens == hf


def test_a_new_session_restarts_the_draft_cache(targets, tmp_path, one_thread):
    folder, config = _drafter(tmp_path, "d")
    target = targets["qwen3"][1]
    proposer = resolve_proposer(str(folder), target)  # detected by its config, no prefix
    weights = dflash_weights(config)
    for prompt in (PROMPT, PROMPT[:6] + [99, 98]):
        session = TargetSession(target, hidden_layers=proposer.hidden_layers)
        session.prefill(prompt, reserve=8)
        expected = torch.log_softmax(reference_rows(weights, config, target.model, prompt[:-1], prompt[-1]), -1)
        assert torch.allclose(proposer.propose(session).shared, expected, atol=1e-5)


def test_sessions_sharing_one_proposer_from_threads_get_their_own_rows(targets, tmp_path, one_thread, monkeypatch):
    """App sessions share one loaded proposer: its one draft cache must never mix two sessions' contexts.

    Participants often run the same example prompt, so a second session finds
    the cache holding its own prefix and keeps it. The crop of each block is
    slowed, so that without the proposer's lock another session's forward
    reads the cache while the first block is still in it.
    """
    import threading
    import time

    from transformers import DynamicCache

    folder, config = _drafter(tmp_path, "d", seed=2)
    target = targets["qwen3"][1]
    proposer = resolve_proposer(f"dflash:{folder}", target)
    weights = dflash_weights(config, seed=2)
    crop = DynamicCache.crop

    def slow_crop(cache, length):
        time.sleep(0.05)
        return crop(cache, length)

    monkeypatch.setattr(DynamicCache, "crop", slow_crop)
    wrong: list[str] = []

    def decode(branch: int) -> None:
        session = TargetSession(target, hidden_layers=proposer.hidden_layers)
        session.prefill(PROMPT, reserve=16)
        for _ in range(3):
            rows = proposer.propose(session).shared
            expected = torch.log_softmax(reference_rows(weights, config, target.model, session.committed[:-1],
                                                        session.root_token), -1)
            if not torch.allclose(rows, expected, atol=1e-5):
                wrong.append(f"session {branch} at {len(session.committed)} tokens")
            tree = DraftTree(tokens=torch.tensor([session.root_token, 10 + branch]), parents=torch.tensor([-1, 0]),
                             draft_logp=torch.zeros(2))
            session.score_tree(tree)
            session.commit([0, 1], 20 + branch)

    threads = [threading.Thread(target=decode, args=(branch,)) for branch in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_equals_the_targets_generate(targets, tmp_path, one_thread, family):
    folder, _ = _drafter(tmp_path, "d", seed=1, block_size=5)
    target = targets[family][1]
    proposer = resolve_proposer(f"dflash:{folder}", target)
    config = DecodeConfig(max_new_tokens=24, temperature=0.0, budget=12, stop_tokens=())
    ours = generate(target, proposer, PROMPT, config)
    with torch.no_grad():
        hf = target.model.generate(torch.tensor([PROMPT]), max_new_tokens=24, do_sample=False,
                                   eos_token_id=None, pad_token_id=0)[0, len(PROMPT):].tolist()
    assert ours.tokens == hf
    assert any(r.emitted > 1 for r in ours.rounds)  # drafted tokens were accepted: the cache path ran
    with torch.no_grad():  # transformers' own DFlash chain decoding takes the same loaded drafter
        chain = target.model.generate(torch.tensor([PROMPT]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                                      pad_token_id=0, assistant_model=proposer.hf_assistant.model,
                                      **proposer.hf_assistant.generate_kwargs)[0, len(PROMPT):].tolist()
    assert chain == hf


BAD_CONFIGS = {
    "no target_layer_ids": (lambda c: c["dflash_config"].pop("target_layer_ids"), "target_layer_ids"),
    "no mask_token_id": (lambda c: c["dflash_config"].pop("mask_token_id"), "mask_token_id"),
    "layer beyond the target": (lambda c: c["dflash_config"].update(target_layer_ids=[0, 2]), "reads target layer 2"),
    "hidden size": (lambda c: c.update(hidden_size=32), "hidden size"),
    "vocabulary": (lambda c: c.update(vocab_size=200), "vocabulary of 200"),
    "DFlash2": (lambda c: c.update(architectures=["DFlash2DraftModel"]), "DFlash2"),
    "unknown layer kind": (lambda c: c.update(layer_types=["chunked_attention"] * 2), "'chunked_attention' is not"),
    "layer count": (lambda c: c.update(layer_types=["full_attention"] * 3), "layer_types"),
    "window": (lambda c: c.update(layer_types=["sliding_attention"] * 2, use_sliding_window=True, sliding_window=0),
               "sliding_window 0"),
    "is_causal": (lambda c: c.update(is_causal="yes"), "is_causal 'yes'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_configs_are_refused_naming_the_problem(targets, tmp_path, case):
    edit, message = BAD_CONFIGS[case]
    config = dflash_config(64, 128, 2)
    weights = dflash_weights(config)
    edit(config)
    folder = write_dflash(tmp_path / "bad", config, weights=weights)
    with pytest.raises(ValueError, match=message) as err:
        resolve_proposer(f"dflash:{folder}", targets["llama"][1])
    assert "\n" not in str(err.value)


def test_a_missing_folder_and_mismatched_weights_are_refused(targets, tmp_path):
    target = targets["llama"][1]
    with pytest.raises(ValueError, match="no such folder"):
        resolve_proposer(f"dflash:{tmp_path / 'nothing'}", target)
    config = dflash_config(64, 128, 2)
    weights = dflash_weights(config)
    weights.pop("hidden_norm.weight")
    folder = write_dflash(tmp_path / "partial", config, weights=weights)
    with pytest.raises(ValueError, match="hidden_norm.weight"):
        resolve_proposer(f"dflash:{folder}", target)
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["DFlashDraftModel"]


def test_round_and_generate_commands_take_a_dflash_drafter(targets, tmp_path, capsys, one_thread):
    from tevcore.cli import main
    from tevcore.engine.flow import target_flow
    from tevcore.engine.records import read_trace
    from tevcore.target.loading import encode_prompt

    folder, _ = _drafter(tmp_path, "d", seed=1, block_size=5)
    target_folder, target = targets["qwen3"]
    common = ["--target", str(target_folder), "--proposer", f"dflash:{folder}", "--prompt", "abcabcab", "--no-chat",
              "--device", "cpu"]
    out = tmp_path / "d.jsonl"
    assert main(["round", *common, "--temperature", "1", "--budget", "8", "--out", str(out)]) == 0
    record = read_trace(out).rounds[0]
    assert record.proposer.startswith("DFlash drafter") and record.tree.size == 8
    session = TargetSession(target)
    session.prefill(encode_prompt(target, "abcabcab", chat=False), reserve=8)
    flow = target_flow(record.tree, session.score_tree(record.tree).logits, 1.0)
    assert torch.allclose(flow.path_prob, record.flow.path_prob, atol=1e-6)
    assert torch.allclose(flow.exit_mass, record.flow.exit_mass, atol=1e-6)
    capsys.readouterr()
    assert main(["generate", *common, "--max-new-tokens", "16"]) == 0
    printed = capsys.readouterr().out.split("\n\n")[0]
    ids = encode_prompt(target, "abcabcab", chat=False)
    with torch.no_grad():
        greedy = target.model.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False,
                                       pad_token_id=0)[0, len(ids):].tolist()
    assert printed == target.tokenizer.decode(greedy)


def test_bench_runs_transformers_dflash_chain_as_a_peer(targets, tmp_path, one_thread):
    from tevcore.lab.bench import run_bench

    folder, _ = _drafter(tmp_path, "d", seed=1, block_size=5)
    target = targets["qwen3"][1]
    rows = run_bench(target, resolve_proposer(f"dflash:{folder}", target), ["humaneval"], 1, 6, [0.0], [4], ["tev"])
    peer = [row for row in rows if row["method"].startswith("HF DFlash chain")]
    assert len(peer) == 1 and peer[0]["tokens_per_s"] > 0


def _integer_weights(name):
    def edit(config, weights):
        weights[name] = weights[name].round().to(torch.int32)
    return edit


def _config_edit(**changes):
    def edit(config, weights):
        config.update(changes)
    return edit


FOLDER_FAULTS = {  # each refused in one line before anything is allocated for it
    "integer fc": (_integer_weights("fc.weight"), "fc.weight holds int32 values, not floating-point weights"),
    "integer layer norm": (_integer_weights("layers.1.input_layernorm.weight"), "holds int32 values"),
    "depth 10^9": (_config_edit(num_hidden_layers=10**9), "num_hidden_layers=1000000000, but the weights hold 2"),
    "depth 0": (_config_edit(num_hidden_layers=0), "num_hidden_layers 0 must be a positive integer"),
    "FFN 10^9": (_config_edit(intermediate_size=10**9), "weight shapes do not match"),
    "heads 10^9": (_config_edit(num_attention_heads=10**9), "weight shapes do not match"),
    "block 10^9": (lambda c, w: c["dflash_config"].update(block_size=10**9), "block_size 1000000000 exceeds"),
    "nested config": (None, "nests too deeply"),
}
NESTED = '{"architectures": ["DFlashDraftModel"], "dflash_config": ' + "[" * 100000 + "]" * 100000 + "}"


@pytest.mark.parametrize("case", sorted(FOLDER_FAULTS))
def test_integer_weights_absurd_sizes_and_deep_nesting_are_refused_in_one_line(targets, tmp_path, case):
    edit, message = FOLDER_FAULTS[case]
    config = dflash_config(64, 128, 2)
    weights = dflash_weights(config)
    if edit is not None:
        edit(config, weights)
    folder = write_dflash(tmp_path / "bad", config, weights=weights)
    if edit is None:
        (folder / "config.json").write_text(NESTED)
    with pytest.raises(ValueError, match=message) as err:
        resolve_proposer(f"dflash:{folder}", targets["llama"][1])
    assert "\n" not in str(err.value)
