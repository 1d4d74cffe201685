"""The folder form of tevcore's door: `model.generate(..., custom_generate=tevcore.hf.CUSTOM_GENERATE_FOLDER,
trust_remote_code=True)` runs this file's `generate` in place of transformers' own.

transformers passes it every argument `generate` got. It goes back into
transformers' `generate` with the tree-decoding callable, so the preparation
(the merged generation config, processors, stopping criteria) is
transformers' own, and hands the callable the `streamer`, which transformers
gives a custom callable no way to receive.
"""

from functools import partial

from transformers import GenerationMixin

from tevcore.hf.tree_generate import tree_generate


def generate(model, *args, streamer=None, **kwargs):
    """transformers' `generate` with `custom_generate=tree_generate` and the streamer bound to it."""
    kwargs.pop("custom_generate", None)
    return GenerationMixin.generate(model, *args, custom_generate=partial(tree_generate, tree_streamer=streamer),
                                    **kwargs)
