"""What the scripts in ``recipes/`` read of training beyond its API: the experiment runner's plateau rule and
checkpoint lookups, the run record, the token batcher and the bf16 probe the benchmarks share, the
precision a run resolves to on this host (the runner's check), the learning-rate peak the recipe
generator writes, and the state before Marian's position tables were kept frozen (the experiment measuring it).

These follow the training code's internals, not a promise to users: `hf_graphtf.training` exports the
training API, and this one module is where the tooling reaches past it, so a change here is seen in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from .. import modeling_common
from ..machine import cpu_has_bf16
from . import recipe
from .batching import token_batches
from .checkpoints import checkpoint_step, newest_complete_checkpoint
from .plateau import PlateauRule
from .precision import resolve_precision
from .records import PREDICTIONS_FILE, software_record
from .schedule import noam_peak_learning_rate


@contextlib.contextmanager
def positions_left_trainable() -> Iterator[None]:
    """Marian's computed position tables trainable after loading, as Transformers hands them back, and the
    recipe's freeze of unsaved parameters off: the package before it kept them frozen, which
    `recipes/experiments/frozen_positions.py` compares with the package now."""
    with (
        mock.patch.object(modeling_common, "keep_computed_positions_frozen", lambda module: None),
        mock.patch.object(recipe, "freeze_unsaved_parameters", lambda model: None),
    ):
        yield


__all__ = [
    "PREDICTIONS_FILE",
    "PlateauRule",
    "checkpoint_step",
    "cpu_has_bf16",
    "newest_complete_checkpoint",
    "noam_peak_learning_rate",
    "positions_left_trainable",
    "resolve_precision",
    "software_record",
    "token_batches",
]
