"""Pieces shared by the linked and graph layers: the residual blocks, pre- or post-LN, and whether
probabilities are wanted.

One layer class serves both layer-norm positions, as in joeynmt: Marian and BART layers are post-LN
(``norm(x + dropout(f(x)))``), M2M100/NLLB layers pre-LN (``x + dropout(f(norm(x)))``). The position
comes from the config the layer is built with (`GraphOptionsMixin.layer_norm_position`), and the blocks
below compute each exactly like the vanilla layers of that family.
"""

from __future__ import annotations

import torch
from torch import nn


def normalizes_before(config) -> bool:
    """True for pre-LN families (M2M100/NLLB), False for post-LN ones (Marian, BART)."""
    return getattr(config, "layer_norm_position", "post") == "pre"


def sublayer_input(layer: nn.Module, hidden_states: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """What a sublayer (attention, feed-forward) reads: the LayerNorm of the input when pre-LN."""
    return norm(hidden_states) if layer.normalize_before else hidden_states


def add_and_norm(layer: nn.Module, residual: torch.Tensor, update: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """The residual block after a sublayer: ``norm(residual + dropout(update))`` post-LN, and
    ``residual + dropout(update)`` pre-LN (whose norm `sublayer_input` applied before the sublayer)."""
    update = nn.functional.dropout(update, p=layer.dropout, training=layer.training)
    if layer.normalize_before:
        return residual + update
    return norm(residual + update)


def feed_forward(layer: nn.Module, hidden_states: torch.Tensor, *, clamp_fp16: bool) -> torch.Tensor:
    """The position-wise feed-forward block with its residual and its LayerNorm (after it post-LN,
    before it pre-LN).

    `clamp_fp16` reproduces the encoder layers' guard against fp16 overflow: Marian and BART clamp when a
    value overflowed, M2M100 clamps every fp16 output.
    """
    residual = hidden_states
    hidden_states = sublayer_input(layer, hidden_states, layer.final_layer_norm)
    hidden_states = layer.activation_fn(layer.fc1(hidden_states))
    hidden_states = nn.functional.dropout(hidden_states, p=layer.activation_dropout, training=layer.training)
    hidden_states = layer.fc2(hidden_states)
    hidden_states = add_and_norm(layer, residual, hidden_states, layer.final_layer_norm)
    if clamp_fp16 and hidden_states.dtype == torch.float16:
        if layer.normalize_before or not torch.isfinite(hidden_states).all():
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
