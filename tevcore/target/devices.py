"""Which device and dtype a model runs on: `--device` and `--dtype`, checked before anything loads.

`auto` means CUDA when torch sees a GPU, else the CPU; bfloat16 on CUDA and
float32 on the CPU. A named dtype is tried once per device with a tiny
linear layer and softmax in that dtype: a CPU or GPU whose kernels cannot run
it raises there, and the user gets a one-line error instead of a traceback
from deep inside the first forward.
"""

from __future__ import annotations

from functools import lru_cache

import torch

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}
DTYPE_CHOICES = "auto, float32, bfloat16 or float16"


def pick_device(spec: str | torch.device | None = None) -> torch.device:
    """The device `spec` names ('auto'/None: CUDA when present, else CPU); a ValueError when it is unusable."""
    if isinstance(spec, torch.device):
        spec = str(spec)
    spec = (spec or "auto").strip().lower()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    kind, _, index = spec.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"unknown device {spec!r}: use {DEVICE_CHOICES}")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {spec}: no CUDA device is available to this torch "
                         f"({torch.__version__}); use --device cpu")
    if index and int(index) >= torch.cuda.device_count():
        raise ValueError(f"--device {spec}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return torch.device(spec)


def parse_dtype(spec: str | torch.dtype | None) -> torch.dtype | None:
    """A dtype name as a torch dtype; None for 'auto'/None; a ValueError for anything else."""
    if spec is None or isinstance(spec, torch.dtype):
        return spec
    name = spec.strip().lower()
    if name == "auto":
        return None
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {spec!r}: use {DTYPE_CHOICES}")
    return DTYPES[name]


def pick_dtype(device: torch.device, spec: str | torch.dtype | None = None) -> torch.dtype:
    """The dtype `spec` names ('auto'/None: bfloat16 on CUDA, float32 on CPU), refused where it cannot run."""
    device = torch.device(device)
    dtype = parse_dtype(spec)
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if not dtype_runs_on(device, dtype):
        name = str(dtype).removeprefix("torch.")
        where = "this CPU" if device.type == "cpu" else f"device {device}"
        raise ValueError(f"--dtype {name} cannot run on {where} (a tiny {name} matmul failed); use --dtype float32")
    return dtype


@lru_cache(maxsize=None)
def _runs(device: str, dtype: torch.dtype) -> bool:
    try:
        with torch.inference_mode():
            x = torch.randn(4, 16, device=device).to(dtype)
            layer = torch.nn.Linear(16, 8, device=device, dtype=dtype)
            y = torch.softmax(layer(x) @ x[:, :8].T, dim=-1)
            return bool(torch.isfinite(y.float()).all())
    except (RuntimeError, NotImplementedError, TypeError):
        return False


def dtype_runs_on(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a linear layer, a matmul and a softmax run in `dtype` on `device` (tried once, then cached)."""
    return _runs(str(torch.device(device)), dtype)
