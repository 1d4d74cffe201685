"""Two gloo processes (DDP) end with the weights of one process trained on the same global batches, and log the
gradient probe of the global batch."""

from __future__ import annotations

import json
import os
import socket
import sys
import types

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file
from transformers import LlamaForCausalLM

from tevcore.target.loading import Target
from tevcore.train.config import TrainConfig
from tevcore.train.loop import train
from tevcore.target.tree_attention import TREE_SDPA

pytestmark = [pytest.mark.ddp, pytest.mark.slow]

CONFIG = dict(target="tiny", depth=3, context=4, layers=1, heads=4, ffn=64, draft_vocab=40, steps=4,
              batch_size=8, warmup=1, lr=3e-3, tree_lambda=0.1, tree_anchors=2, tree_pool=3, checkpoint_every=2,
              known_prob=0.5, probe_every=2)


def _worker(rank: int, world: int, port: int, model_dir: str, data: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=TREE_SDPA).eval()  # as tiny_target
    try:
        train(TrainConfig(data=data, **CONFIG), out, Target(model=model, tokenizer=None, name="tiny"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_ddp_equals_single_process(tiny_target, tiny_data, tmp_path, monkeypatch):
    # spawned ranks re-run the parent's __main__; after AppTest ran a page script that would be the page
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    model_dir = tmp_path / "tiny-model"
    tiny_target.model.save_pretrained(model_dir)
    single = train(TrainConfig(data=str(tiny_data), **CONFIG), tmp_path / "single", tiny_target)
    mp.spawn(_worker, args=(2, _free_port(), str(model_dir), str(tiny_data), str(tmp_path / "ddp")), nprocs=2)
    a = load_file(str(single / "model.safetensors"))
    b = load_file(str(tmp_path / "ddp" / "drafter" / "model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5, rtol=0), (key, float((a[key] - b[key]).abs().max()))
    probes = [[{k: v for k, v in json.loads(line).items() if k.startswith("probe_")}
               for line in (run / "metrics.jsonl").read_text().splitlines()] for run in (single.parent, tmp_path / "ddp")]
    assert [sorted(p) for p in probes[0]] == [sorted(p) for p in probes[1]] and probes[0][1]
    for one, two in zip(*probes):
        assert all(abs(one[k] - two[k]) <= 1e-4 * max(1.0, abs(one[k])) for k in one), (one, two)
