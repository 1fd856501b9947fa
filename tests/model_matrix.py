"""The package's (family x options) matrix (`hf_graphtf.self_check.matrix`) on the tests' device and dtype.

The battery runs on the CPU in float64. ``HF_GRAPHTF_TEST_DEVICE=cuda`` runs the same tests on a GPU
(recipes/gpu/run_all.sh does, for the method re-computation and the generation tests), and
``HF_GRAPHTF_TEST_DTYPE=float32`` in float32, where `TOLERANCE` widens to what float32 can hold.
"""

from __future__ import annotations

import os

import torch

from hf_graphtf.self_check import matrix
from hf_graphtf.self_check.matrix import EOS, FAMILIES, OPTION_MATRIX, PAD, VOCAB, tiny_config
from hf_graphtf.self_check.tolerance import tolerance

DEVICE = os.environ.get("HF_GRAPHTF_TEST_DEVICE", "cpu")
DTYPE = getattr(torch, os.environ.get("HF_GRAPHTF_TEST_DTYPE", "float64"))
#: equality to a plain re-computation: to float64 rounding, or what float32 keeps of it
TOLERANCE = tolerance(DTYPE)


def tiny_model(family: str, options: dict | None = None, seed: int = 0, dtype=None, **overrides):
    """A tiny randomly initialised seq2seq model in eval mode on `DEVICE` (`DTYPE` unless asked otherwise)."""
    return matrix.tiny_model(family, options, seed, device=DEVICE, dtype=dtype or DTYPE, **overrides)


def source_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources of different lengths, the second right-padded."""
    return matrix.source_batch(DEVICE)


def target_batch() -> torch.Tensor:
    return matrix.target_batch(DEVICE)


__all__ = [
    "DEVICE", "DTYPE", "EOS", "FAMILIES", "OPTION_MATRIX", "PAD", "TOLERANCE", "VOCAB",
    "source_batch", "target_batch", "tiny_config", "tiny_model",
]  # fmt: skip
