"""Distillation shards: layout, teacher rows equal to the target's, resumable, deterministic; held-out split."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tevcore.lab.datasets import DATASETS, load_prompts
from tevcore.train.anchors import AnchorSet
from tevcore.train.data import build_dataset, load_shards
from tevcore.train.prompts import all_training_prompts, heldout_prompts


def test_shards_hold_the_targets_top_k_rows(tiny_target, tiny_data):
    anchors = AnchorSet(tiny_data, context=4, depth=3)
    for shard, seq in [(0, 1), (1, 2)]:
        ids = anchors.sequence(shard, seq)
        with torch.inference_mode():
            out = tiny_target.model(torch.tensor([ids]), output_hidden_states=True)
        s = anchors.shards[shard]
        o0, o1 = int(s["offsets"][seq]), int(s["offsets"][seq + 1])
        first = len(ids) - (o1 - o0)
        logp = torch.log_softmax(out.logits[0, first:], -1)
        assert torch.equal(s["top_ids"][o0 + int(s["starts"][seq]):o1, 0].long(),
                           logp.argmax(-1)[int(s["starts"][seq]):])
        assert torch.allclose(s["hidden"][o0:o1, 1].float(), out.hidden_states[2][0, first:], atol=1e-2)


def test_generated_sequences_have_a_context_window_and_new_tokens(tiny_data):
    shard = load_shards(tiny_data)[1]
    assert int(shard["starts"].min()) >= 1 and len(shard["offsets"]) == 4
    lengths = shard["offsets"].diff()
    assert (lengths > shard["starts"] + 1).all()


def test_build_is_resumable_and_deterministic(tiny_target, tiny_data_setup, tmp_path):
    config, plan = tiny_data_setup
    build_dataset(tiny_target, config, tmp_path, plan=plan)
    first = [dict(s) for s in load_shards(tmp_path)]
    (tmp_path / "shard_00001.safetensors").unlink()
    mtime = (tmp_path / "shard_00000.safetensors").stat().st_mtime_ns
    assert build_dataset(tiny_target, config, tmp_path, plan=plan) == 3
    assert (tmp_path / "shard_00000.safetensors").stat().st_mtime_ns == mtime  # finished shards are skipped
    for a, b in zip(first, load_shards(tmp_path)):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_training_prompts_never_include_held_out_text():
    heldout = {p.text.strip() for name in DATASETS for p in heldout_prompts(name)}
    train = all_training_prompts()
    assert train and not heldout & {p.text.strip() for p in train}
    assert heldout_prompts("humaneval") == load_prompts("humaneval", "heldout")


def test_sets_join_with_commas_and_refuse_other_hidden_layers(tiny_target, tiny_data, tiny_data_setup, tmp_path):
    one = AnchorSet(tiny_data, context=4, depth=3)
    both = AnchorSet(f"{tiny_data},{tiny_data}", context=4, depth=3)
    assert len(both) == 2 * len(one) and len(both.shards) == 2 * len(one.shards)
    config, plan = tiny_data_setup
    other = tmp_path / "other-layers"
    build_dataset(tiny_target, dataclasses.replace(config, hidden_layers=(1,)), other, plan=plan[:1])
    with pytest.raises(ValueError, match="cannot be joined"):
        AnchorSet(f"{tiny_data},{other}", context=4, depth=3)


def test_generation_jobs_give_each_prompt_its_samples_and_cycle_temperatures():
    from tevcore.train.data import DataConfig, generation_jobs

    config = DataConfig(samples=3, temperatures=(0.0, 1.0), max_prompt_tokens=4)
    jobs = generation_jobs([[1, 2, 3], [4, 5, 6, 7, 8], [9, 10]], config)  # the middle prompt is too long
    assert [j.ids for j in jobs] == [(1, 2, 3)] * 3 + [(9, 10)] * 3
    assert [j.temperature for j in jobs] == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert all(j.start == len(j.ids) - 1 for j in jobs)
    plain = generation_jobs([[1, 2], [3, 4], [5, 6]], DataConfig())  # the default: one response, greedy then T = 1
    assert [j.temperature for j in plain] == [0.0, 1.0, 0.0]


def test_training_prompts_can_come_from_chosen_sets():
    chat = all_training_prompts(("mt-bench", "spec-bench"))
    assert chat and {p.dataset for p in chat} <= {"mt-bench", "spec-bench"}
    every = {p.text.strip() for p in all_training_prompts()}
    assert {p.text.strip() for p in chat} <= every


@pytest.mark.parametrize("bad, words", [
    ({"samples": 0}, "samples"), ({"temperatures": ()}, "temperatures"),
    ({"temperatures": (1.0, float("nan"))}, "temperatures"), ({"temperatures": (-0.5,)}, "temperatures"),
    ({"sets": ("mt-bench", "nope")}, "nope"),
])
def test_data_config_rejects_bad_values(bad, words):
    from tevcore.train.data import DataConfig

    with pytest.raises(ValueError, match=words):
        DataConfig(**bad)


def test_build_data_flags_parse_comma_lists_into_the_config():
    import argparse

    from tevcore.train import data_cli

    parser = argparse.ArgumentParser()
    data_cli.add_arguments(parser)
    args = parser.parse_args(["out", "--sets", "mt-bench,spec-bench", "--temperatures", "1", "--samples", "2",
                              "--hidden-layers", "8,16"])
    config = data_cli.config_from_args(args)
    assert config.sets == ("mt-bench", "spec-bench") and config.temperatures == (1.0,)
    assert config.samples == 2 and config.hidden_layers == (8, 16)
    with pytest.raises(ValueError, match="float"):
        data_cli.config_from_args(parser.parse_args(["out", "--temperatures", "hot"]))


def test_a_folder_built_before_a_config_field_existed_still_resumes(tiny_target, tiny_data_setup, tmp_path):
    import json

    config, plan = tiny_data_setup
    build_dataset(tiny_target, config, tmp_path, plan=plan[:1])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    del manifest["config"]["samples"]  # as written before `samples` was a field
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert build_dataset(tiny_target, config, tmp_path, plan=plan[:2]) == 2
    with pytest.raises(ValueError, match="another config"):
        build_dataset(tiny_target, dataclasses.replace(config, samples=2), tmp_path, plan=plan[:2])


def test_feature_layers_default_to_a_spread_of_the_targets_own(tiny_target):
    from tevcore.train.data import DataConfig, for_target

    assert DataConfig().hidden_layers is None
    assert for_target(tiny_target, DataConfig()).hidden_layers == (1, 2)
    assert for_target(tiny_target, DataConfig(hidden_layers=(2,))).hidden_layers == (2,)
    with pytest.raises(ValueError, match="--hidden-layers 1,2"):
        for_target(tiny_target, DataConfig(hidden_layers=(1, 3)))
