"""oneDNN-packed linear layers for CPU decode-sized forwards.

On CPU, a plain `nn.Linear` over a few rows (a draft tree of 2-17 tokens)
takes a GEMM path that re-lays out the whole weight on every call: on a 2-core
AVX2 machine a 5-token forward of SmolLM2 cost ~2x a one-token forward. The
same weights packed once into oneDNN's blocked layout cut a small tree's forward
by ~30%. The packing is chosen for a batch of `PACKED_FOR_ROWS` rows: packed
for one row (oneDNN's hint), 2-17 rows took a slow kernel and a 2-token
forward cost 1.4x a one-token one; packed for 4, one row is no slower and
2 tokens cost ~1.1x. Packing changes no weights; results differ from
`nn.Linear` by float rounding only. On CPUs with native bfloat16 (AVX-512
BF16 or AMX) a bfloat16 model packs the same way: half the bytes per weight,
which is what a decode-sized forward waits on (`fast_cpu_dtype`).
"""

from __future__ import annotations

import torch

PACKED_FOR_ROWS = 4  # oneDNN picks its kernel for this batch size; draft trees are a few rows


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 matmuls natively on this CPU (AVX-512 BF16 or AMX)."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def fast_cpu_dtype() -> torch.dtype:
    """The dtype a small inference-only CPU model runs fastest in here: bfloat16 where native, else float32."""
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def can_pack(model: torch.nn.Module) -> bool:
    """Packing helps float32 (and natively supported bfloat16) models on a CPU with oneDNN, and only there."""
    parameter = next(model.parameters())
    packable = (torch.float32, torch.bfloat16) if cpu_has_native_bf16() else (torch.float32,)
    return (parameter.device.type == "cpu" and parameter.dtype in packable
            and torch.backends.mkldnn.is_available())


class PackedLinear(torch.nn.Module):
    """An inference-only `nn.Linear` whose weight is also held in oneDNN's packed layout.

    `weight` and `bias` stay the original parameters (tied embeddings and code
    that reads `.weight` keep working); off the CPU, and wherever a gradient is
    needed, it falls back to `F.linear`. A weight changed in place (a training
    step) is packed again before its next packed use, so the copy never goes stale.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.weight, self.bias = weight, bias
        self._pack()

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> PackedLinear:
        return cls(linear.weight, linear.bias)

    def _pack(self) -> None:
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), PACKED_FOR_ROWS)
        self._packed_version = self.weight._version

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on_cpu = x.device.type == "cpu" and self.weight.device.type == "cpu"
        if not on_cpu or x.dtype != self.weight.dtype or x.requires_grad:
            return torch.nn.functional.linear(x, self.weight, self.bias)
        if self.weight._version != self._packed_version:
            self._pack()
        bias = None if self.bias is None else self.bias.detach()
        return torch.ops.mkldnn._linear_pointwise(x, self._packed, bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed=oneDNN"


def pack_linears(model: torch.nn.Module) -> int:
    """Swap every `nn.Linear` of a frozen CPU model (see `can_pack`) for a `PackedLinear`; returns how many."""
    if not can_pack(model):
        return 0
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is torch.nn.Linear]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear.from_linear(child))
    return len(swaps)


def is_packed(model: torch.nn.Module) -> bool:
    """Whether `pack_linears` has packed this model (its forward costs differ)."""
    return any(isinstance(module, PackedLinear) for module in model.modules())
