"""A tiny distillation set made by the tiny random target (teacher-forced and generated sequences)."""

from __future__ import annotations

import random

import pytest

from tevcore.train.data import DataConfig, Job, build_dataset

TINY_DATA = DataConfig(target="tiny", hidden_layers=(1, 2), context=4, top_k=8, max_new_tokens=12, gen_batch=3,
                       text_batch=3)


def tiny_plan(seed: int = 0) -> list[list[Job]]:
    rng = random.Random(seed)
    text = [Job("text", tuple(rng.randrange(3, 97) for _ in range(rng.randrange(20, 40))), rng.randrange(0, 8))
            for _ in range(6)]
    gen = [Job("gen", tuple(rng.randrange(3, 97) for _ in range(rng.randrange(5, 12))), 0, temperature=float(i % 2))
           for i in range(3)]
    gen = [Job("gen", j.ids, len(j.ids) - 1, j.temperature) for j in gen]
    return [text[:3], gen, text[3:]]


@pytest.fixture(scope="session")
def tiny_data(tiny_target, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-data")
    build_dataset(tiny_target, TINY_DATA, folder, plan=tiny_plan())
    return folder


@pytest.fixture(scope="session")
def tiny_data_setup():
    """(config, plan) of the tiny set, for tests that build their own copy."""
    return TINY_DATA, tiny_plan()
