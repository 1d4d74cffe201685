"""The round's math and its records.

A round is plain data flowing one way: a `DraftTree` (tree.py) grown by a
builder (builders.py; sampled.py draws the children from the rows, or fixes
each node's top-1 child and draws its siblings for a mixed tree, and keeps the
draws in draws.py's `DrawRecord`; builder_specs.py names the families and parses
a builder name once into a `BuilderSpec`) from per-depth draft rows (draft_rows.py), the target's
flow through it (flow.py: edge probability a, path probability P, child
mass m (the share of p(.|v) that v's children hold), exit mass
X = P (1 - m), coverage), and the `RoundRecord` that keeps it
(records.py). Every temperature and sampling rule lives in sampling.py.
"""
