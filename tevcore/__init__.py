"""tevcore: real tree-based speculative decoding, its target flow and the exit law."""

__version__ = "0.1.0"
