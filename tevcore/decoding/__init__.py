"""The decoding loop and its policies.

loop.py is the one speculative decoding loop: it yields a `RoundRecord` per
round, for streaming and batch use alike, and holds the autoregressive
baseline, which walks the one autoregressive walker (tevcore/target/walker.py).
It knows proposers only through the `Proposer` interface
(tevcore/proposer_protocol.py), never the drafters themselves. The policies
decide how big each round's tree is: trim.py (cut the tree to the prefix worth
its forward), autobudget.py (pick a budget from measured costs), skip_gate.py
(skip the drafter in rounds without cheap evidence while such rounds have
lately kept none of their trees) and oracle.py (the best tree the target
itself would have built, for reference).
"""
