"""A wall-clock budget for training: stop cleanly after ``max_train_minutes``.

When the budget is spent the callback asks the Trainer for a last evaluation and checkpoint at that
step and stops; the recipe then reloads the best checkpoint (``load_best_model_at_end``) and scores
the test split as after any other run. The minutes are those of training (evaluations during
training included) summed over interrupted and resumed runs: the spent seconds are saved in every
checkpoint's ``trainer_state.json`` and read back on resume. With several processes all of them
stop at the same step, or the collective calls would hang: the spent seconds are the largest over the
processes, so every process sees the same number (which the learning-rate cool-down also reads).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from .checkpoints import callback_attributes


class TrainingTimeBudget(TrainerCallback, ExportableState):
    """Counts training time over every sitting of a run, and stops training once ``max_minutes`` of it
    have passed. With ``max_minutes=None`` it only counts (every run records its training minutes):
    then nothing about the run depends on the clock."""

    def __init__(self, max_minutes: float | None, trained_seconds: float = 0.0):
        if max_minutes is not None and not max_minutes > 0:
            raise ValueError(f"max_train_minutes must be a positive number of minutes; got {max_minutes!r}.")
        self.max_minutes = max_minutes
        self.trained_seconds = trained_seconds  # so far, over this run and the runs it resumes
        self.stopped_at_step: int | None = None
        self._started: float | None = None
        self._before_this_run = trained_seconds

    def on_train_begin(self, args, state, control, **kwargs):
        self._started = time.monotonic()

    @property
    def spent_fraction(self) -> float:
        """The share of the budget spent so far (the same on every process; 0 without a budget)."""
        return 0.0 if self.max_minutes is None else self.trained_seconds / (60 * self.max_minutes)

    def on_step_end(self, args, state, control, **kwargs):
        elapsed = self._before_this_run + time.monotonic() - self._started
        if self.max_minutes is None:  # counting only: no collective call, no effect on training
            self.trained_seconds = elapsed
            return control
        self.trained_seconds = _largest(elapsed)
        if self.trained_seconds >= 60 * self.max_minutes and not control.should_training_stop:
            self.stopped_at_step = state.global_step
            control.should_training_stop = True
            control.should_save = args.save_strategy != "no"
            control.should_evaluate = args.eval_strategy != "no"
        return control

    def state(self) -> dict:
        return {"args": {"max_minutes": self.max_minutes}, "attributes": {"trained_seconds": self.trained_seconds}}


def _largest(seconds: float) -> float:
    """The largest of ``seconds`` over all processes (``seconds`` itself without torch.distributed)."""
    if not (dist.is_available() and dist.is_initialized()):
        return seconds
    value = torch.tensor([seconds], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        value = value.cuda()
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def trained_seconds_in(checkpoint: str | None) -> float:
    """Training seconds a checkpoint records (0 for none, or one written without a budget)."""
    return float(callback_attributes(checkpoint, TrainingTimeBudget.__name__).get("trained_seconds", 0.0))


__all__ = ["TrainingTimeBudget", "trained_seconds_in"]
