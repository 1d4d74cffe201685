"""The verify wing: each exact verification rule, written once.

A rule takes a scored tree (its target flow) and decides an exit node, the
accepted path to it and the bonus token drawn at the exit. TEV draws the exit
straight from the exit law X; predraw-and-follow, the sequential residual,
greedy follow and chain-only reach the same law by other routes, and the naive
foil shows what an inexact rule looks like.
"""
