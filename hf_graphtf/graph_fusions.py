"""How a graph layer fuses its subgraph groups: one registered `Fusion` per ``graph_fusion`` value.

A fusion takes the layer's group outputs (high ``a_h``, middle ``a_m1``, ``a_m2``, low ``a_l``) and
returns the fused vector ``g`` with what it reports as the layer's gate. Everything else reads this
registry: the config's allowed values, the graph layer (the modules a fusion adds, under their
checkpoint names, and which fused path it can take), the gate analysis (what the gate holds), the
benchmarks' FLOP counts and the report's rows. A new fusion is a function (or module) and one
`register_fusion` call here.

This module travels with saved checkpoints (``trust_remote_code``): it imports only torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

#: the four subgraph groups, in the order a self-gate (and the gate analysis) lists them
GROUPS = ("high", "middle_inc", "middle_prev", "low")


@dataclass(frozen=True)
class Fusion:
    """One way of fusing the groups.

    ``fuse(layer, high, middle_inc, middle_prev, low)`` returns ``(g, gate)``. A fusion that needs only
    ``a_h + a_m`` and ``a_l`` also gives ``fuse_attended(layer, attended, low)``, which lets the fused
    shared-qkv path project the summed head outputs once. ``modules(d_model)`` builds the parameters it
    adds, keyed by their names in the layer (part of the checkpoint format). ``gate_groups`` names what
    each gate row holds (one value per group, or ``("w",)`` for a per-feature gate the analysis
    averages; empty: no gate), and ``flops(positions, d_model)`` counts its own matrix products. Named
    functions, not lambdas, so that everything stays picklable.
    """

    name: str
    description: str
    fuse: Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
    fuse_attended: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] | None = None
    modules: Callable[[int], dict[str, nn.Module]] | None = None
    gate_groups: tuple[str, ...] = ()
    gate_per_feature: bool = False
    flops: Callable[[int, int], int] | None = None

    def build_modules(self, d_model: int) -> dict[str, nn.Module]:
        return {} if self.modules is None else self.modules(d_model)

    def matmul_flops(self, positions: int, d_model: int) -> int:
        return 0 if self.flops is None else self.flops(positions, d_model)


FUSIONS: dict[str, Fusion] = {}


def register_fusion(fusion: Fusion) -> Fusion:
    """Add a fusion to the registry (its name becomes an allowed ``graph_fusion`` value)."""
    if fusion.name in FUSIONS:
        raise ValueError(f"a graph fusion named {fusion.name!r} is already registered")
    FUSIONS[fusion.name] = fusion
    return fusion


# --------------------------------------------------------------------------- gate


def _gate_attended(layer: nn.Module, attended: torch.Tensor, low: torch.Tensor):
    """``w a + (1 - w) l`` as one lerp from ``l`` towards ``a`` (one kernel instead of four)."""
    gate = torch.sigmoid(attended + low)
    return torch.lerp(low, attended, gate), gate


def _gate(layer: nn.Module, high, middle_inc, middle_prev, low):
    return _gate_attended(layer, high + middle_inc + middle_prev, low)


register_fusion(
    Fusion(
        name="gate",
        description="w = sigmoid(a_h + a_m + a_l); g = w (a_h + a_m) + (1 - w) a_l",
        fuse=_gate,
        fuse_attended=_gate_attended,
        gate_groups=("w",),
        gate_per_feature=True,
    )
)


# --------------------------------------------------------------------------- sum


def _sum_attended(layer: nn.Module, attended: torch.Tensor, low: torch.Tensor):
    return attended + low, None


def _sum(layer: nn.Module, high, middle_inc, middle_prev, low):
    return _sum_attended(layer, high + middle_inc + middle_prev, low)


register_fusion(
    Fusion(
        name="sum",
        description="g = a_h + a_m + a_l",
        fuse=_sum,
        fuse_attended=_sum_attended,
    )
)


# --------------------------------------------------------------------------- self_gate


class SelfGate(nn.Module):
    """One-head self-attention over the four group vectors ``[a_h, a_m1, a_m2, a_l]`` of a position.

    Returns the mean of the four attended rows and, for analysis, the weight each group receives in
    that mean (the column means of the 4x4 attention matrix; they sum to 1 per position).
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.scaling = 1.0 / math.sqrt(d_model)

    def forward(self, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = torch.matmul(self.q_proj(groups), self.k_proj(groups).transpose(-1, -2)) * self.scaling
        group_weights = nn.functional.softmax(scores, dim=-1).mean(dim=-2)  # (..., 4)
        fused = torch.matmul(group_weights.unsqueeze(-2), self.v_proj(groups)).squeeze(-2)
        return fused, group_weights


def _self_gate(layer: nn.Module, high, middle_inc, middle_prev, low):
    return layer.self_gate(torch.stack([high, middle_inc, middle_prev, low], dim=-2))


def _self_gate_modules(d_model: int) -> dict[str, nn.Module]:
    return {"self_gate": SelfGate(d_model)}


def _self_gate_flops(positions: int, d_model: int) -> int:
    """q, k, v of the four group vectors, the 4x4 scores and the weighted sum."""
    return 3 * 2 * 4 * positions * d_model * d_model + 2 * positions * 20 * d_model


register_fusion(
    Fusion(
        name="self_gate",
        description="one-head attention over the 4 group vectors of a position; g = mean of the 4 attended rows",
        fuse=_self_gate,
        modules=_self_gate_modules,
        gate_groups=GROUPS,
        flops=_self_gate_flops,
    )
)


def get_fusion(name: str) -> Fusion:
    """The registered fusion ``name``, or a `ValueError` listing those there are."""
    if name not in FUSIONS:
        raise ValueError(f"graph_fusion must be one of {', '.join(map(repr, FUSIONS))}; got {name!r}.")
    return FUSIONS[name]


__all__ = ["FUSIONS", "GROUPS", "Fusion", "SelfGate", "get_fusion", "register_fusion"]
