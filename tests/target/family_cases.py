"""Shared pieces of the per-family target tests: devices, loading, an independent reference, proposers."""

from __future__ import annotations

import pytest
import torch

from tevcore.engine.builders import best_first
from tevcore.engine.tree import DraftTree
from tevcore.proposers.base import GreedyRolloutProposer, ProposerBase
from tevcore.target.loading import Target, load_target
from tevcore.target.packed_linear import pack_linears


def on_device(device: str, dtype: str):
    """A pytest param for (device, dtype); CUDA ones are marked `cuda` and skipped where there is no GPU."""
    marks = [] if device != "cuda" else [
        pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]
    return pytest.param((device, dtype), id=f"{device}-{dtype}", marks=marks)


def load_pair(folder, device: str, dtype: str) -> tuple[Target, torch.nn.Module]:
    """The folder as a tevcore target, and as transformers loads it by default (the independent reference)."""
    from transformers import AutoModelForCausalLM

    target = load_target(str(folder), device=device, dtype=dtype)
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=target.model.dtype).to(device).eval()
    return target, reference


def sharpen(target: Target, reference: torch.nn.Module, scale: float) -> None:
    """Scale both output heads alike: a low-entropy model, so a few draws test a 2-token law with power.

    A head tied to the input embeddings is untied first, so only the logits scale (a tied one would scale the
    inputs too, and a Gemma-style model then puts all its mass on repeating its last token).
    """
    with torch.no_grad():
        for model in (target.model, reference):
            head = model.get_output_embeddings()
            if head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr():
                untied = torch.nn.Linear(head.in_features, head.out_features, bias=False, device=head.weight.device,
                                         dtype=head.weight.dtype)
                untied.weight.copy_(head.weight)
                model.set_output_embeddings(untied)
                if model is target.model:
                    pack_linears(model)  # as load_target packs a CPU target
            model.get_output_embeddings().weight.mul_(scale)


def reference_last_logits(reference: torch.nn.Module, sequences: list[list[int]]) -> torch.Tensor:
    """Last-position logits of each sequence (equal lengths), recomputed from scratch, float32."""
    with torch.inference_mode():
        ids = torch.tensor(sequences, device=reference.device)
        return reference(input_ids=ids).logits[:, -1].float()


def random_tree(vocab: int, root: int, budget: int, seed: int) -> DraftTree:
    """A best-first tree over seeded peaked rows: depth >= 2 and branching."""
    generator = torch.Generator().manual_seed(seed)
    return best_first(root, torch.log_softmax(3 * torch.randn(4, vocab, generator=generator), -1), budget)


class NoisyRolloutProposer(GreedyRolloutProposer):
    """The greedy rollout's rows with, at a seeded third of the depths, a wrong token bumped to the top: rounds
    both accept (the target's token is still a branch of a best-first tree) and reject."""

    def __init__(self, depth: int = 3, seed: int = 0) -> None:
        super().__init__(depth)
        self.generator = torch.Generator().manual_seed(seed)

    def propose(self, session):
        rows = super().propose(session).clone()
        wrong = torch.rand(rows.shape[0], generator=self.generator) < 1 / 3
        tokens = torch.randint(0, rows.shape[1], (rows.shape[0],), generator=self.generator)
        rows[wrong.nonzero().flatten(), tokens[wrong]] += 6.0
        return torch.log_softmax(rows, -1)


class FixedRowsProposer(ProposerBase):
    """The same per-depth rows every round (no forwards): a cheap drafter for many sampled decodes."""

    hidden_layers = ()
    stand_in = True
    name = "fixed rows"

    def __init__(self, rows: torch.Tensor) -> None:
        self.rows, self.depth = rows, rows.shape[0]

    def propose(self, session) -> torch.Tensor:
        return self.rows.to(session.device)
