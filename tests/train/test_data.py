"""Distillation shards: layout, teacher rows equal to the target's, resumable, deterministic; held-out split."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

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


# ---------------------------------------------------------------- damaged sets, stale temporaries, full disks

def _shards(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("shard_*.safetensors"))}


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # inside the tensor data: the header still reads, the size is unchanged
    path.write_bytes(bytes(data))


@pytest.fixture
def built(tiny_target, tiny_data_setup, tmp_path):
    """(folder, its shards' bytes, rebuild): a finished tiny set and the build command that resumes it."""
    config, plan = tiny_data_setup
    folder = tmp_path / "set"
    build_dataset(tiny_target, config, folder, plan=plan)
    return folder, _shards(folder), lambda: build_dataset(tiny_target, config, folder, plan=plan)


SPOILS = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-100]),
    "empty": lambda p: p.write_bytes(b""),
    "flipped-byte": _flip_a_byte,  # same size, other bytes: only the recorded checksum sees it
    "grown": lambda p: p.write_bytes(p.read_bytes() + b"\0" * 64),
}
DAMAGE = [(name, True) for name in SPOILS] + [(name, False) for name in SPOILS if name != "flipped-byte"]


@pytest.mark.parametrize("spoil, ledger", DAMAGE, ids=[f"{n}-{'recorded' if r else 'before-the-ledger'}" for n, r in DAMAGE])
def test_a_damaged_shard_is_named_and_built_again_not_counted_as_done(built, spoil, ledger, capsys):
    folder, shards, rebuild = built
    if not ledger:  # a set built before sizes and checksums were recorded: its header is checked
        (folder / "shards.jsonl").unlink()
    SPOILS[spoil](folder / "shard_00001.safetensors")
    capsys.readouterr()
    assert rebuild() == 3
    err = capsys.readouterr().err
    assert f"shard {folder / 'shard_00001.safetensors'} is damaged" in err and "building it again" in err
    assert _shards(folder) == shards  # the same bytes as the first build: seeded, and nothing else touched
    rebuild()
    assert "damaged" not in capsys.readouterr().err  # the rebuilt shard was recorded


def test_training_names_a_shard_whose_size_differs_from_the_recorded_one(built):
    folder, _, _ = built
    path = folder / "shard_00002.safetensors"
    path.write_bytes(path.read_bytes() + b"\0" * 8)  # still loads: only the ledger's size catches it
    with pytest.raises(ValueError, match=f"shard {path} is damaged .* where .* were written.*rerun build-data"):
        load_shards(folder)


def test_stale_temporary_shards_are_cleaned_and_a_live_writers_are_kept(built):
    import subprocess
    import sys

    folder, shards, rebuild = built
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = [folder / "shard_00001.tmp", folder / f".shard_00002.safetensors.{dead.pid}-0a1b2c3d.partial"]
        kept = folder / f".shard_00000.safetensors.{live.pid}-0a1b2c3d.partial"
        for path in [*stale, kept]:
            path.write_bytes(b"half a shard")
        rebuild()
        assert not any(p.exists() for p in stale) and kept.exists()
    finally:
        live.kill()
        live.wait()
    assert _shards(folder) == shards


MANIFESTS = [
    (b"", "is damaged: it is empty"),
    (b"  \n", "is damaged: it is empty"),
    (b'{"config": {', "is damaged: it is not valid JSON"),
    (b"\xff\xfe{}", "is damaged: it is not UTF-8 text"),
    (b"[1, 2]", "is not a distillation-set manifest"),
    (b'{"config": {}, "target_name": "x"}', "is not a distillation-set manifest"),
    (b'{"target_name": "x", "shards": "3"}', "is not a distillation-set manifest"),
    (b'{"config": [], "target_name": "x", "shards": 3}', "is not a distillation-set manifest"),
    (b"[" * 100000 + b"]" * 100000, "is damaged"),
]


@pytest.mark.parametrize("content, message", MANIFESTS, ids=[f"manifest-{i}" for i in range(len(MANIFESTS))])
def test_a_bad_manifest_is_one_line_naming_it(built, content, message, tiny_target, tiny_data_setup, capsys):
    from tevcore.cli import main
    from tevcore.train.data import read_manifests

    folder, shards, rebuild = built
    manifest = folder / "manifest.json"
    manifest.write_bytes(content)
    with pytest.raises(ValueError, match=f"^{manifest} {message}") as refused:
        read_manifests(str(folder))
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match=f"^{manifest} {message}.*restore it, or build into a new folder"):
        rebuild()  # shards beside it may come from other settings: refused, nothing rewritten
    assert manifest.read_bytes() == content and _shards(folder) == shards
    code = main(["train", str(folder / "run"), "--data", str(folder), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {manifest}") and err.count("\n") == 1


def test_a_damaged_manifest_beside_no_shards_is_written_again(tiny_target, tiny_data_setup, tmp_path):
    config, plan = tiny_data_setup
    (tmp_path / "manifest.json").write_text("")  # a build killed while writing it
    assert build_dataset(tiny_target, config, tmp_path, plan=plan) == 3
    from tevcore.train.data import read_manifest

    assert read_manifest(tmp_path)["shards"] == 3


@pytest.mark.parametrize("match, times", [("shard_00001", 1), ("shards.jsonl", 2), ("manifest.json", 1)])
def test_a_full_disk_while_building_is_one_line_leaves_no_temporary_and_the_same_command_finishes(
        built, match, times, tmp_path, tiny_target, tiny_data_setup, monkeypatch):
    from tevcore.outputs import WriteFailed
    from disk_faults import disk_full_on

    _, shards, _ = built
    config, plan = tiny_data_setup
    folder = tmp_path / "full"
    disk_full_on(monkeypatch, match, times)
    with pytest.raises(WriteFailed, match=f"^cannot write {folder}/.*{match}.*No space left on device"):
        build_dataset(tiny_target, config, folder, plan=plan)
    # a build that failed before writing anything takes back the folder it made
    assert not [p for p in (folder.iterdir() if folder.exists() else []) if p.name.endswith((".tmp", ".partial"))]
    monkeypatch.undo()
    assert build_dataset(tiny_target, config, folder, plan=plan) == 3
    assert _shards(folder) == shards


def test_feature_layers_default_to_a_spread_of_the_targets_own(tiny_target):
    from tevcore.train.data import DataConfig, for_target

    assert DataConfig().hidden_layers is None
    assert for_target(tiny_target, DataConfig()).hidden_layers == (1, 2)
    assert for_target(tiny_target, DataConfig(hidden_layers=(2,))).hidden_layers == (2,)
    with pytest.raises(ValueError, match="--hidden-layers 1,2"):
        for_target(tiny_target, DataConfig(hidden_layers=(1, 3)))


def test_the_greedy_set_holds_the_targets_own_t0_responses_to_training_prompts_only(tiny_model_folder, tmp_path):
    import argparse

    from tevcore.target.loading import encode_prompt, load_target
    from tevcore.train import data_cli
    from tevcore.train.data import plan_jobs

    target = load_target(str(tiny_model_folder("llama")), device="cpu")
    parser = argparse.ArgumentParser()
    data_cli.add_arguments(parser)
    args = parser.parse_args(["out", "--greedy", "--sets", "mt-bench", "--hidden-layers", "1,2", "--context", "4",
                              "--top-k", "8", "--max-new-tokens", "10", "--gen-batch", "3", "--max-prompt-tokens", "90"])
    config = data_cli.config_from_args(args)
    plan = plan_jobs(target, config)
    trainable = {tuple(encode_prompt(target, p.text)) for p in all_training_prompts(["mt-bench"])}
    held = {tuple(encode_prompt(target, p.text)) for p in heldout_prompts("mt-bench")}
    jobs = [job for shard in plan for job in shard]
    assert jobs and all(j.kind == "gen" and j.temperature == 0.0 for j in jobs)
    assert {j.ids for j in jobs} <= trainable and not {j.ids for j in jobs} & held
    assert len(jobs) == len({j.ids for j in jobs})  # one response per prompt
    build_dataset(target, config, tmp_path, max_shards=2)
    anchors = AnchorSet(tmp_path, context=4, depth=3)
    checked = 0
    for s, shard in enumerate(anchors.shards):
        for q in range(len(shard["starts"])):
            ids = anchors.sequence(s, q)
            prompt = next(j.ids for j in plan[s] if list(j.ids) == ids[:len(j.ids)])
            with torch.inference_mode():
                greedy = target.model(torch.tensor([ids])).logits[0].argmax(-1)
            assert len(ids) > len(prompt)
            assert ids[len(prompt):] == greedy[len(prompt) - 1:-1].tolist()  # every new token is the argmax
            checked += 1
    assert checked == sum(len(shard) for shard in plan[:2])
    with pytest.raises(ValueError, match="--greedy sets --temperatures"):
        data_cli.config_from_args(parser.parse_args(["out", "--greedy", "--temperatures", "1"]))


def test_a_second_build_into_a_folder_being_built_is_refused_before_any_work(tiny_target, tiny_data_setup, tmp_path):
    """Issue 51: two builds into one folder both built every shard (and each swept the other's temporaries)."""
    config, plan = tiny_data_setup
    folder = tmp_path / "set"
    folder.mkdir()
    hold = "import sys, time; from tevcore.train.rundir import RunLock; RunLock(sys.argv[1], 'data build').acquire(); " \
           "print('held', flush=True); time.sleep(60)"
    owner = subprocess.Popen([sys.executable, "-c", hold, str(folder)], stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        assert owner.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=f"{folder} is in use by data build process {owner.pid}; wait for it"):
            build_dataset(tiny_target, config, folder, plan=plan)
        assert [p.name for p in folder.iterdir()] == [".lock"]  # no manifest, no shard: nothing was built
    finally:
        owner.kill()
        owner.wait()
    assert build_dataset(tiny_target, config, folder, plan=plan) == len(plan)  # the owner gone, the build runs
    assert not (folder / ".lock").exists()


def test_a_build_that_fails_before_writing_leaves_no_folder_it_made(tiny_target, tiny_data_setup, tmp_path):
    config, plan = tiny_data_setup
    with pytest.raises(ValueError):
        build_dataset(tiny_target, dataclasses.replace(config, hidden_layers=(1, 99)), tmp_path / "new", plan=plan)
    assert not (tmp_path / "new").exists()
