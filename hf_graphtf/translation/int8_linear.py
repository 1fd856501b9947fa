"""int8 linear layers whose activations are quantized a row at a time, as CTranslate2 quantizes them.

torch's ``quantize_dynamic`` takes one activation scale for a layer's whole input: every sentence of the batch
and its padding. A sentence's translation then depends on the sentences batched with it. Here each row (one
token of one sentence) gets its own scale from its own largest magnitude. The int8 product is exact in int32,
so a row's output is a function of that row alone, whatever else is in the batch. Weights are quantized
once, symmetrically, with a scale per output feature. The product is ``torch._int_mm``, an aten operator:
this path needs neither torch's quantized tensor types, which torch 2.13 marks for removal, nor torchao.
docs/internals.md, "int8 with a scale per row", says why; the results page has what it costs.
"""

from __future__ import annotations

import torch
from torch import nn

#: the largest int8 magnitude used: symmetric, so that -x quantizes to -q
INT8_LIMIT = 127
#: a scale's floor, so that an all-zero row quantizes to zeros rather than dividing by zero
SMALLEST_SCALE = 1e-12


class RowScaledInt8Linear(nn.Module):
    """An ``nn.Linear`` for inference in int8: weights per output feature, activations per row.

    ``forward(x)`` computes ``x @ W.T + b`` as ``(q_x @ q_W.T) * s_x * s_W + b``, where ``q_x = round(x / s_x)``
    with ``s_x = max|x_row| / 127`` for each row, and ``q_W``, ``s_W`` likewise for each row of ``W``.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.ones(out_features))
        self.register_buffer("bias", torch.zeros(out_features) if bias else None)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> RowScaledInt8Linear:
        """The int8 layer of a float one (its weights are copied: a tied weight stays float where it is tied)."""
        quantized = cls(linear.in_features, linear.out_features, bias=linear.bias is not None)
        weight = linear.weight.detach().float()
        scale = weight.abs().amax(dim=1).clamp_min(SMALLEST_SCALE) / INT8_LIMIT
        quantized.weight_int8.copy_(torch.round(weight / scale[:, None]).to(torch.int8))
        quantized.weight_scale.copy_(scale)
        if linear.bias is not None:
            quantized.bias.copy_(linear.bias.detach().float())
        return quantized.to(linear.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x if x.dim() == 2 else x.reshape(-1, self.in_features)
        if rows.dtype != torch.float32:
            rows = rows.float()
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_min_(SMALLEST_SCALE).div_(INT8_LIMIT)
        quantized = rows.div(scale).round_().to(torch.int8)
        # the product scaled by the row's scale, then by each output feature's (no (rows, features) temporary)
        out = torch._int_mm(quantized, self.weight_int8.t()).to(torch.float32).mul_(scale)
        out = out.mul_(self.weight_scale) if self.bias is None else torch.addcmul(self.bias, out, self.weight_scale)
        return out if x.dim() == 2 else out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def quantize_linear_layers(model: nn.Module) -> nn.Module:
    """``model`` with every ``nn.Linear`` (that exact type) replaced in place by a `RowScaledInt8Linear`.

    Embeddings stay float: they are lookups, not products. A subclass of ``nn.Linear`` is left as it is, as
    torch's ``quantize_dynamic`` leaves it: it may compute something else."""
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, RowScaledInt8Linear.from_linear(child))
    return model


__all__ = ["INT8_LIMIT", "SMALLEST_SCALE", "RowScaledInt8Linear", "quantize_linear_layers"]
