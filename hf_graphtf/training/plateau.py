"""When a run has reached its validation plateau: early stopping on the best-model metric, and optionally
on the validation loss too.

A run that stalls on BLEU early in training (greedy decoding still stuck in short or repeated output)
while its validation loss keeps falling is still learning, not on a plateau; with ``watch_loss`` a new
lowest validation loss resets the patience as a new best metric does. The rule lives in one function,
`count_patience`, which the callback applies evaluation by evaluation and a resumed run (or a report)
replays over a training log, so an interrupted run stops at the step an uninterrupted one would.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from transformers import EarlyStoppingCallback

from .checkpoints import TRAINER_STATE_FILE


@dataclass
class PatienceCount:
    """Where the early-stopping rule stands after some evaluations."""

    #: evaluations since the last that reset the patience
    waited: int = 0
    #: best best-model metric so far (what the Trainer calls ``best_metric``)
    best_metric: float | None = None
    #: lowest validation loss so far
    best_loss: float | None = None


def count_patience(
    count: PatienceCount,
    metric: float,
    loss: float | None,
    *,
    threshold: float = 0.0,
    greater_is_better: bool = True,
    watch_loss: bool = False,
) -> PatienceCount:
    """The count after one more evaluation. A new best metric (by more than ``threshold``, as
    Transformers' ``EarlyStoppingCallback`` counts) resets the patience; with ``watch_loss``, so does a
    new lowest validation loss."""
    if count.best_metric is None:
        better = True
    else:
        better = metric > count.best_metric if greater_is_better else metric < count.best_metric
    reset = count.best_metric is None or (better and abs(metric - count.best_metric) > threshold)
    lower_loss = loss is not None and (count.best_loss is None or loss < count.best_loss)
    if watch_loss and lower_loss:
        reset = True
    return PatienceCount(
        waited=0 if reset else count.waited + 1,
        best_metric=metric if better else count.best_metric,
        best_loss=loss if lower_loss else count.best_loss,
    )


def replay_patience(
    log_history: list[dict[str, Any]],
    metric_key: str,
    *,
    threshold: float = 0.0,
    greater_is_better: bool = True,
    watch_loss: bool = False,
) -> PatienceCount:
    """The count after every evaluation a training log holds (``metric_key`` as logged, e.g. ``eval_bleu``),
    in step order."""
    count = PatienceCount()
    evaluations = sorted((entry["step"], entry) for entry in log_history if metric_key in entry)
    for _, entry in evaluations:
        count = count_patience(
            count,
            entry[metric_key],
            entry.get("eval_loss"),
            threshold=threshold,
            greater_is_better=greater_is_better,
            watch_loss=watch_loss,
        )
    return count


def stop_step(
    log_history: list[dict[str, Any]],
    metric_key: str,
    patience: int,
    *,
    threshold: float = 0.0,
    greater_is_better: bool = True,
    watch_loss: bool = False,
) -> int | None:
    """The step of the evaluation at which the rule stops a run with this training log (None: it never
    does within the log): what a report checks a recorded stop against."""
    count = PatienceCount()
    for step, entry in sorted((entry["step"], entry) for entry in log_history if metric_key in entry):
        count = count_patience(
            count,
            entry[metric_key],
            entry.get("eval_loss"),
            threshold=threshold,
            greater_is_better=greater_is_better,
            watch_loss=watch_loss,
        )
        if count.waited >= patience:
            return step
    return None


def metric_key(metric_for_best_model: str | None) -> str:
    """The key an evaluation logs the best-model metric under (``bleu`` -> ``eval_bleu``)."""
    name = metric_for_best_model or "loss"
    return name if name.startswith("eval_") else f"eval_{name}"


class PlateauStopping(EarlyStoppingCallback):
    """Transformers' early stopping, counting as `count_patience` does: with ``watch_loss`` a new lowest
    validation loss also resets the patience. ``resume`` replays a checkpoint's log, since the Trainer
    does not restore a callback's count (a resumed run would otherwise wait a whole patience again)."""

    def __init__(self, early_stopping_patience: int, early_stopping_threshold: float = 0.0, watch_loss: bool = False):
        super().__init__(early_stopping_patience, early_stopping_threshold)
        self.watch_loss = watch_loss
        self.count = PatienceCount()

    def resume(self, checkpoint: str | None, args: Any) -> None:
        """Start from the count the checkpoint's training log replays to (none: from zero)."""
        self.count = PatienceCount()
        if checkpoint is not None:
            self.count = replay_patience(
                log_history_in(checkpoint),
                metric_key(args.metric_for_best_model),
                threshold=self.early_stopping_threshold or 0.0,
                greater_is_better=args.greater_is_better,
                watch_loss=self.watch_loss,
            )
        self.early_stopping_patience_counter = self.count.waited

    def on_evaluate(self, args, state, control, metrics, **kwargs):
        metric = metrics.get(metric_key(args.metric_for_best_model))
        if metric is None:  # the parent warns and stops nothing
            return super().on_evaluate(args, state, control, metrics, **kwargs)
        self.count = count_patience(
            self.count,
            metric,
            metrics.get("eval_loss"),
            threshold=self.early_stopping_threshold or 0.0,
            greater_is_better=args.greater_is_better,
            watch_loss=self.watch_loss,
        )
        self.early_stopping_patience_counter = self.count.waited
        if self.count.waited >= self.early_stopping_patience:
            control.should_training_stop = True

    def state(self) -> dict:
        saved = super().state()
        saved["args"]["watch_loss"] = self.watch_loss
        saved["attributes"]["best_eval_loss"] = self.count.best_loss
        return saved


def log_history_in(checkpoint: str) -> list[dict[str, Any]]:
    """The training log a checkpoint saved (evaluations included)."""
    with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
        return json.load(handle).get("log_history", [])
