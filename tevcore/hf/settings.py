"""What `generate` prepared, read as tevcore's decoding settings, or refused in one line naming what cannot be honoured.

`generate` merges the caller's arguments into a `GenerationConfig` and builds
the logits processors and stopping criteria from it before it calls a
`custom_generate` callable. Tree decoding honours `max_new_tokens` /
`max_length`, `do_sample`, `temperature`, `top_k`, `top_p` and
`eos_token_id` (`pad_token_id` pads nothing in a batch of one). Its
verification is exact for the target law `generate` samples from only when
every processor is one of those warpers: anything else (a repetition
penalty, a minimum length, bad words, ...) changes the law with the path a
row is on, and is refused by its class name rather than silently dropped;
so are stopping criteria other than the length and EOS ones, beams, several
return sequences, per-token outputs and a batch of more than one sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


HONOURED_PROCESSORS = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper")
HONOURED_STOPS = ("MaxLengthCriteria", "EosTokenCriteria")
PER_TOKEN_OUTPUTS = ("output_scores", "output_logits", "output_attentions", "output_hidden_states")


@dataclass(frozen=True)
class SamplingSettings:
    """The decode `generate` asked for, in tevcore's terms."""

    max_new_tokens: int
    temperature: float  # 0 = greedy (do_sample=False)
    top_k: int | None
    top_p: float | None
    stop_tokens: tuple[int, ...]
    return_dict: bool


def refuse(what: str) -> ValueError:
    """The one-line error of a setting tree decoding cannot honour."""
    return ValueError(f"tevcore tree decoding cannot honour {what}")


def read_settings(input_ids: torch.Tensor, logits_processor, stopping_criteria, generation_config,
                  attention_mask: torch.Tensor | None = None, cache=None) -> SamplingSettings:
    """`generate`'s prepared state as a `SamplingSettings`, or a ValueError naming the first thing it cannot honour.

    `cache` is the one `generate` prepared or the caller passed: tree decoding prefills its own, so a cache that
    already holds a context (a continued generation) is refused rather than ignored."""
    for name, limit in (("num_beams", 1), ("num_return_sequences", 1)):
        value = getattr(generation_config, name, None)
        if value is not None and value > limit:
            raise refuse(f"{name}={value}: it decodes one sequence by tree speculation")
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise refuse(f"a batch of {input_ids.shape[0]} sequences: it decodes one sequence per call (call generate "
                     "once per prompt)")
    if input_ids.shape[1] == 0:
        raise refuse("a prompt given as inputs_embeds: give input_ids")
    if cache is not None and hasattr(cache, "get_seq_length") and cache.get_seq_length() > 0:
        raise refuse("a cache that already holds a context: tree decoding prefills the prompt itself")
    if attention_mask is not None and not bool(attention_mask.bool().all()):
        raise refuse("a padded attention_mask: give the prompt without padding")
    if generation_config.return_dict_in_generate:
        for name in PER_TOKEN_OUTPUTS:
            if getattr(generation_config, name, False):
                raise refuse(f"{name}=True: a tree round scores many positions at once, not one row per token")
    for processor in logits_processor or []:
        if type(processor).__name__ not in HONOURED_PROCESSORS:
            raise refuse(f"the logits processor {type(processor).__name__}: verification is exact only for the "
                         f"warpers {', '.join(HONOURED_PROCESSORS)}")
    for criterion in stopping_criteria or []:
        if type(criterion).__name__ not in HONOURED_STOPS:
            raise refuse(f"the stopping criterion {type(criterion).__name__}: it stops at max_new_tokens and "
                         "eos_token_id only")
    new_tokens = int(generation_config.max_length) - int(input_ids.shape[1])
    if new_tokens < 1:
        raise refuse(f"max_length={generation_config.max_length} with a {input_ids.shape[1]}-token prompt: no "
                     "room for a new token")
    sampling = bool(generation_config.do_sample)
    eos = getattr(generation_config, "_eos_token_tensor", None)
    stops = tuple(int(t) for t in eos.flatten().tolist()) if eos is not None else ()
    temperature = float(generation_config.temperature if generation_config.temperature is not None else 1.0)
    return SamplingSettings(max_new_tokens=new_tokens, temperature=temperature if sampling else 0.0,
                            top_k=generation_config.top_k if sampling else None,
                            top_p=generation_config.top_p if sampling else None, stop_tokens=stops,
                            return_dict=bool(generation_config.return_dict_in_generate))
