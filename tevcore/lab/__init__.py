"""Lab tools: measuring the engine rather than running it.

bench.py times speculative decoding against autoregressive decoding on
benchmark prompt sets (datasets.py); bench_verifiers.py times each verifier's
decision on real trees; simulate.py drives the shipped verify rules over many
draws on one tree to compare their exit and bonus laws.
"""
