"""oneDNN-packed linear layers for CPU decode-sized forwards.

On CPU, a plain `nn.Linear` over a few rows (a draft tree of 2-17 tokens)
takes a GEMM path that re-lays out the whole weight on every call: on a 2-core
AVX2 machine a 5-token forward of SmolLM2 cost ~2x a one-token forward. The
same weights packed once into oneDNN's blocked layout cut a small tree's forward
by ~30% (a tree still costs ~1.6-1.9x one token there: one row takes a cheaper
GEMV path). Packing changes no weights; results differ from `nn.Linear` by
float rounding only.
"""

from __future__ import annotations

import torch


def can_pack(model: torch.nn.Module) -> bool:
    """Packing helps float32 models on a CPU with oneDNN, and only there."""
    parameter = next(model.parameters())
    return (parameter.device.type == "cpu" and parameter.dtype == torch.float32
            and torch.backends.mkldnn.is_available())


class PackedLinear(torch.nn.Module):
    """An inference-only `nn.Linear` whose weight is also held in oneDNN's packed layout.

    `weight` and `bias` stay the original parameters (tied embeddings and code
    that reads `.weight` keep working); off the CPU it falls back to `F.linear`.
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.dtype != torch.float32 or self.weight.device.type != "cpu" or x.requires_grad:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x, self._packed, bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed=oneDNN"


def pack_linears(model: torch.nn.Module) -> int:
    """Swap every `nn.Linear` of a frozen float32 CPU model for a `PackedLinear`; returns how many."""
    if not can_pack(model):
        return 0
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is torch.nn.Linear]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear(child))
    return len(swaps)


def is_packed(model: torch.nn.Module) -> bool:
    """Whether `pack_linears` has packed this model (its forward costs differ)."""
    return any(isinstance(module, PackedLinear) for module in model.modules())
