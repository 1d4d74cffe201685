"""Training block drafters: distillation data, plain distillation and ExitTrain, evaluation.

Command modules (wired into `python -m tevcore`): data_cli (build-data), train_cli (train),
eval_cli (eval-drafter); compare runs the ExitTrain comparison.
"""
