"""`tree_generate`: the `custom_generate` callable that runs tevcore's decoding loop on the caller's own model.

    out = model.generate(input_ids, custom_generate=tree_generate, max_new_tokens=64)

transformers calls it after its own preparation with the prompt, the logits
processors, the stopping criteria and the merged `GenerationConfig`
(settings.py reads them, or refuses what it cannot honour); keyword
arguments the callable names (proposer, builder, budget, verifier, trim,
seed) come through from the `generate` call. The caller's model is wrapped
as it is (`loaded_target`) and decoded by the one loop
(`tevcore.decoding.loop.rounds`), so the output is the loop's: at
do_sample=False the target's greedy string, at T > 0 a sample of the
target law after the same warpers `generate` applies. It returns what
`generate` returns: the sequences, or with `return_dict_in_generate` a
`TreeGenerateOutput` that adds each round's record (its tree and target flow),
E[L] and 1 + C, and the counts serving engines report.

transformers 5.x gives a callable no `streamer` (it keeps only the keyword
arguments the callable declares beyond its own `_sample`'s); pass it as
`tree_streamer=`, or use the folder form (`tevcore.hf.CUSTOM_GENERATE_FOLDER`),
which accepts `streamer=` as `generate` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.generation.utils import GenerateDecoderOnlyOutput

from tevcore.config import DecodeConfig
from tevcore.decoding.autobudget import trim_costs
from tevcore.decoding.loop import rounds
from tevcore.engine.records import RoundRecord
from tevcore.engine.sampling import seed_from_global_rng
from tevcore.engine.spec_counts import SpecDecodeCounts, spec_decode_counts
from tevcore.hf.settings import read_settings
from tevcore.proposer_protocol import Proposer
from tevcore.proposers.registry import resolve_proposer
from tevcore.target.caller_model import loaded_target
from tevcore.target.loading import Target
from tevcore.verify.laws import FOIL, T0_ONLY
from tevcore.verify.registry import standing, standing_text

DEFAULT_PROPOSER = "lookup"  # the context lookup: needs no drafter, so it fits any causal LM


@dataclass
class TreeGenerateOutput(GenerateDecoderOnlyOutput):
    """`generate`'s decoder-only output plus what tree decoding measured, round by round.

    `rounds`: each round's `RoundRecord` (tree, target flow, verdict);
    `expected_lengths`: each round's 1 + C (the E[L] of the optimal exact rules, which reach it);
    `emitted`: the tokens each round emitted (L, the realised block length);
    `spec_decode`: vLLM-named counts (`SpecDecodeCounts`).
    """

    rounds: list[RoundRecord] | None = None
    expected_lengths: list[float] | None = None
    emitted: list[int] | None = None
    spec_decode: SpecDecodeCounts | None = None


def _proposer(spec: str | Proposer | None, target: Target) -> Proposer:
    if spec is None or isinstance(spec, str):
        return resolve_proposer(spec or DEFAULT_PROPOSER, target)
    return spec


def tree_generate(model, input_ids: torch.Tensor, logits_processor=None, stopping_criteria=None,
                  generation_config=None, synced_gpus: bool = False, streamer=None, *,
                  proposer: str | Proposer | None = None, builder: str | None = None, budget: int | None = None,
                  verifier: str | None = None, trim: str | float = "off", seed: int | None = None,
                  tree_streamer=None, **model_kwargs) -> torch.Tensor | TreeGenerateOutput:
    """Decode the prompt by tree speculation on `model` itself; see the module docstring for what it reads.

    `proposer`: a proposer spec (`tev generate --proposer`) or a `Proposer`
    (default: the context lookup); `builder`, `budget`, `verifier`, `trim`:
    as `DecodeConfig` takes them; `seed`: the verifier's draws (default: one
    drawn from torch's global generator). Anything it cannot honour is a
    one-line ValueError before any forward.
    """
    streamer = tree_streamer if tree_streamer is not None else streamer
    settings = read_settings(input_ids, logits_processor, stopping_criteria, generation_config,
                             model_kwargs.get("attention_mask"), model_kwargs.get("cache"))
    target = loaded_target(model, name=getattr(model, "name_or_path", None) or None)
    drafter = _proposer(proposer, target)
    options = {name: value for name, value in (("builder", builder), ("budget", budget), ("verifier", verifier))
               if value is not None}
    chosen_budget = options.get("budget", DecodeConfig.default("budget"))
    costs = trim_costs(target, [chosen_budget], trim)[chosen_budget] if chosen_budget > 0 else None
    config = DecodeConfig(max_new_tokens=settings.max_new_tokens, temperature=settings.temperature,
                          top_k=settings.top_k, top_p=settings.top_p,
                          seed=seed if seed is not None else (seed_from_global_rng() if settings.temperature else 0),
                          stop_tokens=settings.stop_tokens, chat=False, record="lean", trim=trim if costs is not None else "off",
                          tree_costs=costs, **options)
    if standing(config.verifier, config.temperature) in (FOIL, T0_ONLY):
        raise ValueError(f"verifier {config.verifier} would not decode this target through generate: "
                         f"{standing_text(config.verifier, config.temperature)}")
    prompt = input_ids[0].tolist()
    if streamer is not None:
        streamer.put(input_ids.cpu())
    records, new_tokens = [], []
    for record in rounds(target, drafter, prompt, config):
        records.append(record)
        new_tokens += record.emitted_tokens
        if streamer is not None and record.emitted_tokens:
            streamer.put(torch.tensor(record.emitted_tokens))
    if streamer is not None:
        streamer.end()
    sequences = torch.cat([input_ids, torch.tensor([new_tokens], dtype=input_ids.dtype, device=input_ids.device)], 1)
    if not settings.return_dict:
        return sequences
    return TreeGenerateOutput(sequences=sequences, rounds=records,
                              expected_lengths=[r.expected_length for r in records],
                              emitted=[len(r.emitted_tokens) for r in records],
                              spec_decode=spec_decode_counts(records))
