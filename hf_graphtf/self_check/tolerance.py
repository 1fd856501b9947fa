"""How close a model must come to the plain re-computation, per dtype."""

from __future__ import annotations

import torch

#: equality to float64 rounding; what float32 keeps of it; what bfloat16's 8 mantissa bits keep of the tiny
#: models' logits (about 3 in size): 0.14 at most over the matrix on an AVX-512 CPU and 0.16 on an H200
#: (`hf-graphtf check --dtype bfloat16`), while a dropped link moves them by 0.28 (Marian, decoder link) to
#: 3.6. bfloat16 is a coarse check of the fused kernels; float32 is the sharp one (4e-6 on the H200).
_TOLERANCES = {
    torch.float64: {"rtol": 1e-10, "atol": 1e-10},
    torch.float32: {"rtol": 2e-4, "atol": 2e-5},
    torch.bfloat16: {"rtol": 0.0, "atol": 0.2},
}


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """`torch.testing.assert_close` tolerances for outputs computed in ``dtype``."""
    if dtype not in _TOLERANCES:
        raise ValueError(f"no tolerance for {dtype}; use one of {sorted(str(d) for d in _TOLERANCES)}")
    return dict(_TOLERANCES[dtype])
