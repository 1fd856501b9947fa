"""The papers' learning-rate schedule (Transformers' own), and a cool-down to zero at the end of a budget.

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
from collections.abc import Callable

import torch


def noam_learning_rate(step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The learning rate of eq. 3 at 1-based ``step`` (0 at step 0)."""
    if step <= 0:
        return 0.0
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_peak_learning_rate(d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """The peak of eq. 3, reached at the end of warm-up: the recipes' ``learning_rate``."""
    return factor / math.sqrt(d_model * warmup_steps)


def with_cooldown(
    scheduler: torch.optim.lr_scheduler.LRScheduler, fraction: float, progress: Callable[[int], float]
) -> torch.optim.lr_scheduler.LambdaLR:
    """``scheduler`` whose learning rate falls linearly to zero over the last ``fraction`` of the budget.

    A run stopped by its budget otherwise ends wherever its schedule happens to be (inverse_sqrt at half
    its peak after four warm-ups), with the noise of a large step in its final weights; ending at zero
    (the "decay" of warmup-stable-decay schedules) helps a model that has nearly converged. It does
    not help one still learning fast: on the 13-14 minute main job it cost 2 BLEU
    (model_cards/quickstart/RUNS.md), which is why the quickstart leaves it off.
    ``progress(step)`` is the share of the budget spent at that step: steps over ``max_steps``, or
    minutes over ``max_train_minutes`` when the run has a time budget, whichever is further along; it
    must be the same number on every process. The schedule's own factor is kept and multiplied by
    ``min(1, (1 - progress) / fraction)``, so warm-up and decay shape are untouched until the cool-down.
    """
    if not isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
        raise ValueError(
            f"lr_cooldown_fraction needs a schedule given by a factor per step (LambdaLR); "
            f"lr_scheduler_type gave {type(scheduler).__name__}."
        )
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"lr_cooldown_fraction must lie in (0, 1); got {fraction}.")

    def cooled(factor: Callable[[int], float]) -> Callable[[int], float]:
        # a closure, not an object: LambdaLR saves the attributes of callable objects in its state dict
        def lr_lambda(step: int) -> float:
            return factor(step) * cooldown_factor(progress(step), fraction)

        return lr_lambda

    scheduler.lr_lambdas = [cooled(factor) for factor in scheduler.lr_lambdas]
    return scheduler


def cooldown_factor(progress: float, fraction: float) -> float:
    """1 until ``1 - fraction`` of the budget is spent, then falling linearly to 0 at the end of it."""
    return min(1.0, max(0.0, (1.0 - progress) / fraction))
