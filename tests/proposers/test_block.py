"""Block drafter: proposer contract, save/load round trip, clear errors for wrong targets and bad files."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from tevcore.engine.builder_specs import parse_builder
from tevcore.engine.sampling import make_generator
from tevcore.proposers import GreedyRolloutProposer, load_default_proposer
from tevcore.proposers.block import (
    BlockDrafter,
    BlockDrafterConfig,
    BlockProposer,
    context_window,
    load_drafter,
    save_drafter,
)
from tevcore.proposers.lookup import ContextLookupProposer
from tevcore.target.loading import Target
from tevcore.target.packed_linear import cpu_can_pack, packing_requirement
from tevcore.target.session import TargetSession


def tiny_drafter(target, seed: int = 0, known_slots: int = 0) -> BlockDrafter:
    config = BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=40,
                                hidden_layers=(1, 2), context=4, depth=3, layers=1, heads=4, ffn=64,
                                known_slots=known_slots)
    torch.manual_seed(seed)
    drafter = BlockDrafter(config, torch.arange(3, 43)).attach(target)
    with torch.no_grad():
        drafter.bias.normal_()
        if known_slots:
            drafter.known_marker.normal_()
    return drafter


def _session(target, n: int = 10) -> TargetSession:
    session = TargetSession(target, hidden_layers=(1, 2))
    session.prefill(list(range(5, 5 + n)))
    return session


def test_proposal_is_depth_by_vocab_log_probs_with_minus_inf_outside_the_draft_vocab(tiny_target):
    proposer = BlockProposer(tiny_drafter(tiny_target))
    rows = proposer.propose(_session(tiny_target)).shared
    assert rows.shape == (3, 97) and proposer.branches == 0
    assert torch.isinf(rows[:, :3]).all() and torch.isinf(rows[:, 43:]).all()
    assert torch.allclose(torch.logsumexp(rows, -1), torch.zeros(3), atol=1e-5)


BF16_CPU = pytest.mark.skipif(not cpu_can_pack(torch.bfloat16),
                              reason=f"this CPU cannot pack bfloat16 (oneDNN needs {packing_requirement(torch.bfloat16)})")


@BF16_CPU
def test_a_bfloat16_proposer_drafts_nearly_the_float32_rows_and_says_so(tiny_target):
    session = _session(tiny_target)
    exact = BlockProposer(tiny_drafter(tiny_target), dtype=torch.float32)
    half = BlockProposer(tiny_drafter(tiny_target), dtype=torch.bfloat16)
    assert half.drafter.encoder.layers[0].linear1.weight.dtype == torch.bfloat16 and "bfloat16" in half.name
    assert half.drafter.head.dtype == half.drafter.bias.dtype == torch.float32 and "float" not in exact.name
    a, b = exact.propose(session).shared, half.propose(session).shared
    assert b.dtype == torch.float32 and torch.equal(torch.isinf(a), torch.isinf(b))
    total_variation = 0.5 * (a.exp() - b.exp()).abs().sum(-1)
    assert float(total_variation.max()) < 0.05 and not torch.equal(a, b)


def test_short_context_is_left_padded(tiny_target):
    rows = BlockProposer(tiny_drafter(tiny_target)).propose(_session(tiny_target, n=2)).shared
    assert torch.isfinite(rows[:, 3:43]).all()


def test_save_load_round_trip_keeps_outputs_and_stores_no_target_rows(tiny_target, tmp_path):
    drafter = tiny_drafter(tiny_target)
    save_drafter(drafter, tmp_path)
    loaded = load_drafter(tmp_path, tiny_target)
    session = _session(tiny_target)
    assert torch.equal(BlockProposer(drafter).propose(session).shared, BlockProposer(loaded).propose(session).shared)
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "model.safetensors"))
    assert "embed" not in stored and "head" not in stored and "draft_ids" in stored
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "tevcore-block-drafter"


def test_fp16_export_loads_close(tiny_target, tmp_path):
    drafter = tiny_drafter(tiny_target)
    save_drafter(drafter, tmp_path, dtype=torch.float16)
    session = _session(tiny_target)
    a = BlockProposer(drafter).propose(session).shared[:, 3:43]
    b = BlockProposer(load_drafter(tmp_path, tiny_target)).propose(session).shared[:, 3:43]
    assert torch.allclose(a, b, atol=2e-2)


def _other_target(vocab: int, hidden: int) -> Target:
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    return Target(model=LlamaForCausalLM(config).eval(), tokenizer=None, name="other")


@pytest.mark.parametrize("vocab, hidden, words", [(101, 64, "vocabulary"), (97, 32, "hidden size")])
def test_loading_against_another_target_shape_fails_clearly(tiny_target, tmp_path, vocab, hidden, words):
    save_drafter(tiny_drafter(tiny_target), tmp_path)
    with pytest.raises(ValueError, match=words):
        load_drafter(tmp_path, _other_target(vocab, hidden))


def test_corrupt_weights_give_a_clear_error(tiny_target, tmp_path):
    save_drafter(tiny_drafter(tiny_target), tmp_path)
    path = tmp_path / "model.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        load_drafter(tmp_path, tiny_target)


def test_corrupt_or_unknown_config_gives_a_clear_error(tiny_target, tmp_path):
    save_drafter(tiny_drafter(tiny_target), tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid block drafter config"):
        load_drafter(tmp_path, tiny_target)
    (tmp_path / "config.json").write_text(json.dumps({"target_vocab_size": 97, "surprise": 1}))
    with pytest.raises(ValueError, match="unknown block drafter config keys"):
        load_drafter(tmp_path, tiny_target)


def test_weights_that_do_not_match_the_config_fail_clearly(tiny_target, tmp_path):
    save_drafter(tiny_drafter(tiny_target), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "ffn": 32}))
    with pytest.raises(ValueError, match=r"linear1.weight has shape \[\d+, 64\], but .*config.json implies \[32, 64\]"):
        load_drafter(tmp_path, tiny_target)


def test_default_proposer_falls_back_to_the_stand_in_for_another_target(tiny_target):
    assert isinstance(load_default_proposer(tiny_target), GreedyRolloutProposer)


def test_config_validation():
    with pytest.raises(ValueError, match="heads"):
        BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=40, hidden_layers=(1, 2), heads=5,
                           ffn=64)
    with pytest.raises(ValueError, match="draft vocabulary"):
        BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=98, hidden_layers=(1, 2), heads=4,
                           ffn=64)


def test_a_known_slot_drafter_gives_rows_below_its_likeliest_depth1_tokens(tiny_target):
    drafter = tiny_drafter(tiny_target, known_slots=1)
    session = _session(tiny_target)
    rows = BlockProposer(drafter, branches=2, dtype=torch.float32).propose(session)
    plain = BlockProposer(drafter, branches=0, dtype=torch.float32).propose(session)
    assert torch.equal(rows.shared, plain.shared) and not plain.after_first
    assert set(rows.after_first) == set(rows.shared[0].topk(2).indices.tolist())
    features, mask = context_window(session, drafter.config)
    roots = torch.tensor([session.root_token])
    with torch.no_grad():
        for token, below in rows.after_first.items():
            given = drafter.full_vocab(drafter(features, mask, roots, known=torch.tensor([[token]]))[0, 1:])
            assert torch.allclose(below, given, atol=1e-5)
            assert not torch.allclose(below, rows.shared[1:], atol=1e-3)  # the known token changes the rows
        unknown = drafter.full_vocab(drafter(features, mask, roots, known=torch.tensor([[-1]]))[0])
    assert torch.allclose(unknown, rows.shared, atol=1e-5)  # -1 = not given: the plain pass


def test_a_near_certain_depth1_token_skips_the_second_pass(tiny_target):
    drafter = tiny_drafter(tiny_target, known_slots=1)
    with torch.no_grad():
        drafter.bias[7] = 50.0  # draft token 7 (target id 10) takes almost all of every row
    rows = BlockProposer(drafter, branches=2).propose(_session(tiny_target))
    assert int(rows.shared[0].argmax()) == 10 and not rows.after_first


def test_known_slots_round_trip_and_are_refused_where_untrained(tiny_target, tmp_path):
    drafter = tiny_drafter(tiny_target, known_slots=1)
    save_drafter(drafter, tmp_path)
    loaded = load_drafter(tmp_path, tiny_target)
    assert loaded.config.known_slots == 1 and torch.equal(loaded.known_marker, drafter.known_marker)
    assert BlockProposer(loaded).branches == 2
    with pytest.raises(ValueError, match="known slot"):
        BlockProposer(tiny_drafter(tiny_target), branches=2)
    with pytest.raises(ValueError, match="trained with 0"):
        tiny_drafter(tiny_target)(*context_window(_session(tiny_target), drafter.config),
                                  torch.tensor([5]), known=torch.tensor([[7]]))
    with pytest.raises(ValueError, match="known_slots"):
        BlockDrafterConfig(target_vocab_size=97, target_hidden_size=64, draft_vocab_size=40, hidden_layers=(1, 2),
                           heads=4, ffn=64, depth=3, known_slots=3)


def test_enabling_known_slots_keeps_the_plain_pass(tiny_target):
    drafter = tiny_drafter(tiny_target)
    session = _session(tiny_target)
    before = BlockProposer(drafter).propose(session).shared
    drafter.enable_known_slots(1)
    assert drafter.config.known_slots == 1 and torch.count_nonzero(drafter.known_marker) == 0
    assert torch.equal(BlockProposer(drafter, branches=0).propose(session).shared, before)


def test_a_grown_drafter_drafts_as_before_until_trained_and_round_trips(tiny_target, tmp_path):
    session = _session(tiny_target)
    before = BlockProposer(tiny_drafter(tiny_target), dtype=torch.float32).propose(session).shared
    grown = tiny_drafter(tiny_target).grow_encoder(3)
    assert grown.config.layers == len(grown.encoder.layers) == 3
    save_drafter(grown, tmp_path)
    loaded = load_drafter(tmp_path, tiny_target)
    assert loaded.config.layers == 3
    after = BlockProposer(loaded, dtype=torch.float32).propose(session).shared
    assert torch.allclose(after, before, atol=1e-5)
    with torch.no_grad():
        loaded.encoder.layers[2].linear2.bias.normal_()
    assert not torch.allclose(BlockProposer(loaded, dtype=torch.float32).propose(session).shared, before, atol=1e-3)
    with pytest.raises(ValueError, match="cannot shrink"):
        tiny_drafter(tiny_target).grow_encoder(0)


@pytest.mark.parametrize("name, dtype", [("float32", torch.float32),
                                         pytest.param("bfloat16", torch.bfloat16, marks=BF16_CPU)])
def test_the_drafter_dtype_is_chosen_by_name_and_a_bad_name_is_refused(tiny_target, tmp_path, name, dtype):
    from tevcore.proposers import parse_drafter_dtype, resolve_proposer

    save_drafter(tiny_drafter(tiny_target), tmp_path)
    assert parse_drafter_dtype("auto") is None
    proposer = resolve_proposer(str(tmp_path), tiny_target, parse_drafter_dtype(name))
    assert proposer.drafter.project.weight.dtype == dtype
    with pytest.raises(ValueError, match="unknown drafter dtype 'half'"):
        parse_drafter_dtype("half")


def test_a_cpu_without_bfloat16_packing_refuses_a_bfloat16_drafter_and_auto_takes_float32(tiny_target, monkeypatch):
    from tevcore.target import packed_linear

    monkeypatch.setattr(packed_linear, "cpu_flags", lambda: frozenset({"sse4_2", "avx", "avx2", "fma"}))
    with pytest.raises(ValueError, match=r"cannot run a bfloat16 block drafter: oneDNN needs avx_ne_convert or "
                                         r"avx512bw\+avx512vl\+avx512dq \(CPU flags: avx avx2\); use float32"):
        BlockProposer(tiny_drafter(tiny_target), dtype=torch.bfloat16)
    auto = BlockProposer(tiny_drafter(tiny_target))
    assert auto.drafter.project.weight.dtype == torch.float32 and "bfloat16" not in auto.name


@pytest.mark.parametrize("existing", [False, True], ids=["new-folder", "over-a-drafter"])
def test_a_full_disk_while_saving_a_drafter_leaves_no_partial_folder(tiny_target, tmp_path, monkeypatch, existing):
    from disk_faults import disk_full_on

    from tevcore.outputs import WriteFailed

    folder = tmp_path / "drafter"
    if existing:
        save_drafter(tiny_drafter(tiny_target), folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()} if existing else None
    disk_full_on(monkeypatch, "model.safetensors")
    with pytest.raises(WriteFailed, match=f"cannot write {folder / 'model.safetensors'}: No space left on device"):
        save_drafter(tiny_drafter(tiny_target), folder)
    if existing:
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # the saved drafter is untouched
    else:
        assert not folder.exists()


def test_a_new_drafter_takes_its_shape_from_the_target(tiny_target):
    """No model's shape is a generic default: feature layers, heads and MLP width come from the target."""
    from types import SimpleNamespace

    from transformers import LlamaConfig

    from tevcore.proposers.block_config import feature_layers_for, layer_shape_of

    assert feature_layers_for(tiny_target) == (1, 2)
    assert layer_shape_of(tiny_target) == (4, 128)
    smollm2 = SimpleNamespace(model=SimpleNamespace(config=LlamaConfig(
        hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536, num_hidden_layers=30)))
    assert feature_layers_for(smollm2) == (8, 16, 24, 30)  # what the committed drafter reads
    assert layer_shape_of(smollm2) == (9, 1536)
    qwen3_06b = SimpleNamespace(model=SimpleNamespace(config=LlamaConfig(num_hidden_layers=28)))
    assert feature_layers_for(qwen3_06b) == (7, 14, 21, 28)


def test_a_stored_config_must_name_its_target_dependent_shape():
    config = {"target_vocab_size": 97, "target_hidden_size": 64, "draft_vocab_size": 40, "hidden_layers": [1, 2],
              "heads": 4}
    with pytest.raises(ValueError, match="lacks ffn"):
        BlockDrafterConfig.from_dict(config)
    assert BlockDrafterConfig.from_dict({**config, "ffn": 64}).ffn == 64


def test_rows_below_any_path_come_from_a_pass_given_that_path_once_per_context(tiny_target):
    drafter = tiny_drafter(tiny_target, known_slots=2)
    session = _session(tiny_target)
    proposer = BlockProposer(drafter, branches=0, dtype=torch.float32)
    rows = proposer.propose(session)
    assert rows.known_depth == 2 and BlockProposer(tiny_drafter(tiny_target), dtype=torch.float32).propose(
        session).below_path is None
    features, mask = context_window(session, drafter.config)
    roots = torch.tensor([session.root_token])
    paths = [(10,), (11, 12), (10,)]
    found = rows.below_path(paths)
    with torch.no_grad():
        for path, below in zip(paths, found):
            given = drafter.full_vocab(drafter(features, mask, roots, known=torch.tensor([list(path)]))[0])
            assert below.shape[0] == 3 - len(path) and torch.allclose(below, given[len(path):], atol=1e-5)
    assert found[0] is found[2] and rows.below_path([(10,)])[0] is found[0]  # one pass per path and context
    tree = parse_builder("mixed@sib1:3,2,1")(session.root_token, rows, None, 1.0, make_generator(0))
    assert tree.size > 3


def test_the_lookup_mixes_rows_below_a_path_that_follows_its_chain(tiny_target):
    drafter = tiny_drafter(tiny_target, known_slots=2)
    session = TargetSession(tiny_target, hidden_layers=(1, 2))
    session.prefill([5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6])  # the lookup's chain goes on 7, 8, 9, ...
    lookup = ContextLookupProposer(BlockProposer(drafter, branches=0, dtype=torch.float32))
    rows = lookup.propose(session)
    assert rows.known_depth == 2 and rows.shared.shape[0] == lookup.depth
    on_chain, off_chain = rows.below_path([(7,), (8,)])
    plain_on, plain_off = BlockProposer(drafter, branches=0, dtype=torch.float32).propose(session).below_path(
        [(7,), (8,)])
    assert on_chain.shape[0] == off_chain.shape[0] == lookup.depth - 1  # padded to the lookup's depth
    assert torch.allclose(off_chain[:2], plain_off)
    assert float(on_chain[0, 8]) > float(plain_on[0, 8]) + 0.1  # the chain's next token gains mass
