"""tevcore: real tree-based speculative decoding, its target flow and the exit law.

The subpackages follow one round's data flow:
- engine: the draft tree, its builders, the target flow, sampling rules, round records
- verify: the exact verification rules (TEV, residual, predraw, greedy, chain) and the foil
- target: loading a target LM and the session that scores a tree in one forward
- proposers: the drafters and lookups that propose per-depth draft rows
- decoding: the one decoding loop and its policies (trim, budget, skip)
- lab: benchmarks, the verifier bench and the simulator over the shipped rules
- train: distillation data, plain distillation and ExitTrain
parsing.py, outputs.py, timing.py, config.py, flags.py, proposer_protocol.py and cli.py are the shared
plumbing. Imports point down these floors (tests/test_layers.py holds the floors and checks them).
"""

__version__ = "0.1.0"
