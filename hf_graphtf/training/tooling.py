"""What the scripts in ``recipes/`` read of training beyond its API: the experiment runner's plateau rule and
checkpoint lookups, the run record, the token batcher and the bf16 probe the benchmarks share, the
precision a run resolves to on this host (the runner's check), and the learning-rate peak the recipe
generator writes.

These follow the training code's internals, not a promise to users: `hf_graphtf.training` exports the
training API, and this one module is where the tooling reaches past it, so a change here is seen in one place.
"""

from __future__ import annotations

from ..machine import cpu_has_bf16
from .batching import token_batches
from .checkpoints import checkpoint_step, newest_complete_checkpoint
from .plateau import PlateauRule
from .precision import resolve_precision
from .records import software_record
from .schedule import noam_peak_learning_rate

__all__ = [
    "PlateauRule",
    "checkpoint_step",
    "cpu_has_bf16",
    "newest_complete_checkpoint",
    "noam_peak_learning_rate",
    "resolve_precision",
    "software_record",
    "token_batches",
]
