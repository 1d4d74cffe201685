"""The verify wing: each verification rule, written once, and the laws it must follow.

scored.py validates a round once (`ScoredRound`: tree, node logits,
temperature and the round's target flow); rules.py holds each rule as a
batched exit sampler over n draws (tev: one categorical over X; predraw,
residual, greedy follow, chain-only, rrs and block from ratio_tables.py's
acceptance tables of a sampled tree, computed only where a verdict reads
them, and the naive foil); registry.py holds each rule's entry (its
sampler and bonus, the tree traits it needs, its law, standing, trail and
names) and `pairing_problem`, the one decision of which rule runs on which
trees; bonus.py is the masked bonus draw every rule shares; verifiers.py
makes the decoding verifiers (n = 1); laws.py holds the exit and bonus law
of every rule and the one chi-square test of counts against a law, used by
the app and the tests; trail.py reads rrs's accept/reject trail and block's
coins off a verdict and the same tables; trace_checks.py checks a trace's
rounds against the rules that verified them.
"""
