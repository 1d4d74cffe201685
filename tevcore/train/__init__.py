"""Training drafters: distillation data, the one training loop (plain distillation and ExitTrain), evaluation.

The loop (loop.py) trains every trainable drafter kind the proposer registry
lists, in one process or under torchrun; each kind's adapter lives with the
kind in `tevcore.proposers`. Command modules (wired into `python -m tevcore`):
data_cli (build-data), train_cli (train), eval_cli (eval-drafter); compare
runs the ExitTrain comparison.
"""
