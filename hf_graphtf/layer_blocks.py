"""Pieces shared by the linked and graph layers: the post-LN blocks, and whether probabilities are wanted.

The residual/LayerNorm and feed-forward blocks are the ones of Marian and BART layers (post-LN),
written once so the new layers compute them exactly like the vanilla ones.
"""

from __future__ import annotations

import torch
from torch import nn


def add_and_norm(layer: nn.Module, residual: torch.Tensor, update: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """``norm(residual + dropout(update))``: the post-LN residual block of Marian/BART layers."""
    update = nn.functional.dropout(update, p=layer.dropout, training=layer.training)
    return norm(residual + update)


def feed_forward(layer: nn.Module, hidden_states: torch.Tensor, *, clamp_fp16: bool) -> torch.Tensor:
    """The position-wise feed-forward block with its residual and final LayerNorm.

    `clamp_fp16` reproduces the encoder layers' guard against fp16 overflow.
    """
    residual = hidden_states
    hidden_states = layer.activation_fn(layer.fc1(hidden_states))
    hidden_states = nn.functional.dropout(hidden_states, p=layer.activation_dropout, training=layer.training)
    hidden_states = layer.fc2(hidden_states)
    hidden_states = add_and_norm(layer, residual, hidden_states, layer.final_layer_norm)
    if clamp_fp16 and hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
        clamp_value = torch.finfo(hidden_states.dtype).max - 1000
        hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
    return hidden_states


def attentions_requested(module: nn.Module, kwargs: dict) -> bool:
    """Whether this forward must produce attention probabilities for `output_attentions`.

    Asked for per call (``output_attentions=True``, which reaches the layers through ``**kwargs``) or for
    every call (``config.output_attentions = True``, which Transformers' output capturing reads from
    the config and does not pass down). A fused kernel that computes no probabilities must step aside
    in both cases, or the recorder finds nothing and the layer is missing from ``attentions``.
    """
    if "output_attentions" in kwargs and kwargs["output_attentions"] is not None:
        return bool(kwargs["output_attentions"])
    return bool(getattr(getattr(module, "config", None), "output_attentions", False))
