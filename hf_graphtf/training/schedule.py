"""The papers' learning-rate schedule, and why no scheduler is written here.

Both papers train with the schedule of "Attention Is All You Need" (eq. 3), the one fairseq calls
``inverse_sqrt``::

    lr(step) = factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)

Divided by its peak ``lr(warmup)``, this is ``step / warmup`` during warm-up and
``sqrt(warmup / step)`` after it: exactly Transformers' ``lr_scheduler_type="inverse_sqrt"`` with
``warmup_steps=warmup`` (its ``timescale`` defaults to the warm-up length). So the recipes use the
Transformers scheduler and set ``learning_rate`` to the peak value, computed below. The only
difference is where counting starts: Transformers evaluates the schedule at step 0 for the first
update (learning rate 0), one step behind the paper's 1-based count, as all its warm-up schedules do.
"""

from __future__ import annotations

import math


def noam_learning_rate(step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The learning rate of eq. 3 at 1-based ``step`` (0 at step 0)."""
    if step <= 0:
        return 0.0
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_peak_learning_rate(d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The peak of eq. 3, reached at the end of warm-up: the recipes' ``learning_rate``."""
    return factor / math.sqrt(d_model * warmup_steps)
