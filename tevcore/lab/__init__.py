"""Lab tools: measuring the engine rather than running it.

bench.py times speculative decoding against autoregressive decoding on
benchmark prompt sets (datasets.py) and prints its table (bench_table.py, laid out by
results.format_table); bench_verifiers.py times each verifier's
decision on real trees; siblings.py counts which (depth, sibling rank) nodes
get accepted and what follows a non-top-1 pick; simulate.py drives the shipped verify rules over many
draws on one tree to compare their exit and bonus laws, and over many rounds of fresh (sampled) trees, one
verdict each, to compare E[L] with E[1 + C] and test the first emitted token; context_rounds.py draws those
rounds at one real context with a real drafter and target; gpu_proof/ is the GPU proof that
scripts/gpu_check.sh runs (rehearsed on CPU with --rehearse).
"""
