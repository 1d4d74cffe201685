"""oneDNN-packed linear layers for CPU decode-sized forwards.

On CPU, a plain `nn.Linear` over a few rows (a draft tree of 2-17 tokens)
takes a GEMM path that re-lays out the whole weight on every call, so a small
tree's forward costs well over a one-token one. The same weights packed once
into oneDNN's blocked layout skip that. The packing is chosen for a batch of
`PACKED_FOR_ROWS` rows: packed for one row (oneDNN's hint), 2-17 rows take a
slow kernel; packed for a few rows, one row is no slower and a small tree
costs little more than one token (`bench --refresh-curve` measures the curve
on a machine). Packing changes no weights; results differ from
`nn.Linear` by float rounding only. On CPUs with native bfloat16 (AVX-512
BF16 or AMX) a bfloat16 model packs the same way: half the bytes per weight,
which is what a decode-sized forward waits on (`fast_cpu_dtype`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

PACKED_FOR_ROWS = 4  # oneDNN picks its kernel for this batch size; draft trees are a few rows
# oneDNN packs a half-precision weight only with one of these CPU flag sets (its own error message says so)
PACKING_FLAGS = {torch.bfloat16: (("avx_ne_convert",), ("avx512bw", "avx512vl", "avx512dq")),
                 torch.float16: (("avx_ne_convert",), ("avx512_fp16",))}


def cpu_flags() -> frozenset[str] | None:
    """The CPU feature flags the kernel reports in /proc/cpuinfo, or None where there is no such file."""
    return _read_cpu_flags()


@lru_cache(maxsize=1)
def _read_cpu_flags() -> frozenset[str] | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.partition(":")[2].split())
    return None


@lru_cache(maxsize=None)
def _packing_runs(dtype: torch.dtype) -> bool:
    """Whether oneDNN really packs and multiplies a tiny `dtype` weight here (it raises where it cannot)."""
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(torch.ones(4, 4, dtype=dtype), PACKED_FOR_ROWS)
        torch.ops.mkldnn._linear_pointwise(torch.ones(1, 4, dtype=dtype), packed, None, "none", [], "")
    except RuntimeError:
        return False
    return True


def cpu_can_pack(dtype: torch.dtype) -> bool:
    """Whether this CPU's oneDNN packs `dtype` linears: float32 always; half precision per `PACKING_FLAGS`.

    Checked once per dtype: the flags first (so a faked flag set can be tested),
    then a tiny packed product, since flags alone do not prove the kernel runs.
    """
    if not torch.backends.mkldnn.is_available():
        return False
    if dtype == torch.float32:
        return True
    needs = PACKING_FLAGS.get(dtype)
    flags = cpu_flags()
    if needs is None or (flags is not None and not any(flags.issuperset(group) for group in needs)):
        return False
    return _packing_runs(dtype)


def packing_requirement(dtype: torch.dtype) -> str:
    """The CPU flags oneDNN needs to pack `dtype`, in words."""
    groups = PACKING_FLAGS.get(dtype, ())
    return " or ".join("+".join(group) for group in groups) or "no CPU supports it"


def check_cpu_dtype(dtype: torch.dtype, what: str) -> None:
    """Refuse a CPU model part in a dtype this CPU cannot pack, before any weight is cast."""
    if cpu_can_pack(dtype):
        return
    seen = sorted(flag for flag in (cpu_flags() or ()) if flag.startswith(("avx", "amx")))
    raise ValueError(f"this CPU cannot run a {str(dtype).removeprefix('torch.')} {what}: oneDNN needs "
                     f"{packing_requirement(dtype)} (CPU flags: {' '.join(seen) or 'unknown'}); use float32")


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 matmuls natively on this CPU (AVX-512 BF16 or AMX)."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def fast_cpu_dtype() -> torch.dtype:
    """The dtype a small inference-only CPU model runs fastest in here: bfloat16 where native, else float32."""
    return torch.bfloat16 if cpu_has_native_bf16() and cpu_can_pack(torch.bfloat16) else torch.float32


def can_pack(model: torch.nn.Module) -> bool:
    """Packing helps CPU models whose every linear is in a dtype this CPU packs (`cpu_can_pack`), and only there."""
    parameter = next(model.parameters())
    packable = (torch.float32, torch.bfloat16) if cpu_has_native_bf16() else (torch.float32,)
    dtypes = {m.weight.dtype for m in model.modules() if isinstance(m, torch.nn.Linear)} or {parameter.dtype}
    return (parameter.device.type == "cpu" and all(d in packable and cpu_can_pack(d) for d in dtypes)
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
