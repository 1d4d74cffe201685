"""The door from transformers: tree speculative decoding inside the caller's own `model.generate`.

transformers (5.x) hands `generate` over to `custom_generate=`: a callable
after its own preparation (the merged `GenerationConfig`, its logits
processors and stopping criteria), or a folder whose
`custom_generate/generate.py` it loads and runs in place of `generate`.
tree_generate.py is the callable: it reads what `generate` prepared
(settings.py turns that into a `DecodeConfig`, or refuses in one line what
it cannot honour), wraps the caller's loaded model as a target and runs the
one decoding loop. custom_generate/generate.py is the folder form
(`CUSTOM_GENERATE_FOLDER`), which re-enters `generate` with the callable and
hands it the streamer transformers does not pass a callable.
"""

from pathlib import Path

CUSTOM_GENERATE_FOLDER = str(Path(__file__).resolve().parent)  # `custom_generate=` this, with trust_remote_code=True
