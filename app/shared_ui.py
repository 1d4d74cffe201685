"""Streamlit plumbing shared by the pages: path setup, cached model loading, prompt sets.

Target and drafter load once per process (`st.cache_resource` around `tevcore.studio.models`, which does the
loading; `loaders()` hands the cached loaders to a studio service, which loads inside its queue turn). Environment:
TEV_APP_TARGET (default 'default'), TEV_APP_PROPOSER (default 'default'; any `--proposer` spec, listed
in tevcore.proposers.PROPOSER_SPECS), TEV_APP_DEVICE (default: the engine's choice), TEV_APP_THREADS (torch CPU
threads; default half the cores, at most 4: on a shared machine oversubscribed torch threads make a
round far slower than one thread).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_DIR = Path(__file__).resolve().parent
REPO_DIR = APP_DIR.parent
for _p in (str(APP_DIR), str(REPO_DIR)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import streamlit as st  # noqa: E402

from tevcore.parsing import env_whole  # noqa: E402
from tevcore.studio import models  # noqa: E402

EXAMPLE_PROMPTS = {
    "Explain speculative decoding": "Explain speculative decoding to a curious high-school student in three sentences.",
    "Haiku": "Write a haiku about autumn leaves falling on a quiet river.",
    "Python: fizzbuzz": "Write a Python function that prints FizzBuzz for the numbers 1 to 15.",
    "Arithmetic": "A shop sells pencils at 3 for $1. How much do 12 pencils cost? Answer with a short explanation.",
    "Capital cities": "List the capital cities of France, Germany, Italy and Spain.",
}
PROMPT_SETS = {"examples": None, "MT-Bench": "mt-bench", "HumanEval": "humaneval", "GSM8K": "gsm8k"}


def page_header(title: str, caption: str | None = None) -> None:
    st.set_page_config(page_title=f"TEV · {title}", layout="wide")
    st.title(title)
    if caption:
        st.caption(caption)


def target_spec() -> str:
    return os.environ.get("TEV_APP_TARGET", "default")


def default_proposer_spec() -> str:
    return os.environ.get("TEV_APP_PROPOSER", "default")


def cpu_threads() -> int:
    """TEV_APP_THREADS (checked by scripts/app.sh before the server starts), else half the cores, at most 4."""
    return env_whole(os.environ, "TEV_APP_THREADS", None) or max(1, min(4, (os.cpu_count() or 2) // 2))


MODELS_KEPT = 3  # loaded targets (and, apiece, drafters) a server keeps; the least recently used goes first
model_spec_key = models.model_spec_key


def get_target(spec: str):
    """The target a spec names, loaded once per process under its path-normalised key."""
    return _load_target(model_spec_key(spec))


@st.cache_resource(show_spinner="Loading the target model (once per process)…", max_entries=MODELS_KEPT)
def _load_target(spec: str):
    return models.load_target(spec, cpu_threads())


def get_proposer(spec: str, target_spec_name: str):
    """A proposer for a spec (see `tevcore.proposers.resolve_proposer`), loaded once per process."""
    return _load_proposer(model_spec_key(spec), model_spec_key(target_spec_name))


@st.cache_resource(show_spinner="Loading the drafter…", max_entries=2 * MODELS_KEPT)
def _load_proposer(spec: str, target_spec_name: str):
    return models.load_drafter(spec, get_target(target_spec_name))


def proposer_with_fallback(spec: str, target_spec_name: str):
    """(proposer, note): the requested drafter, or the stand-in with a note saying why."""
    return models.drafter_with_fallback(spec, lambda name: get_proposer(name, target_spec_name))


def loaders() -> models.Models:
    """The cached loaders, as the studio's services take them (the loading happens inside their queue turn)."""
    return models.Models(target=get_target, drafter=proposer_with_fallback)


@st.cache_data(show_spinner=False)
def prompt_items(set_name: str, n: int = 40) -> list[tuple[str, str]]:
    """(label, text) pairs of a benchmark prompt set (held-out split)."""
    return models.prompt_items(set_name, n)


decode_text = models.decode_text
