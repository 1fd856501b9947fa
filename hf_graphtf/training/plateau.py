"""When a run has reached its validation plateau: early stopping on the best-model metric, and optionally
on the validation loss too.

A run that stalls on BLEU early in training (greedy decoding still stuck in short or repeated output)
while its validation loss keeps falling is still learning, not on a plateau; with ``watch_loss`` a new
lowest validation loss resets the patience as a new best metric does. The rule lives in one place,
`PlateauRule`, which the callback applies evaluation by evaluation and a resumed run (or a report)
replays over a training log, so an interrupted run stops at the step an uninterrupted one would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
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


@dataclass(frozen=True)
class PlateauRule:
    """The early-stopping rule of one run: after ``patience`` evaluations without a new best metric (by
    more than ``threshold``, as Transformers' ``EarlyStoppingCallback`` counts) and, with ``watch_loss``,
    without a new lowest validation loss, the run is on its plateau."""

    patience: int
    #: the key an evaluation logs the best-model metric under (``eval_bleu``)
    metric_key: str = "eval_loss"
    threshold: float = 0.0
    greater_is_better: bool = True
    watch_loss: bool = False

    @classmethod
    def from_fields(cls, field: Callable[[str], Any]) -> PlateauRule | None:
        """The rule that training arguments or a recipe set (``field(name)``: a field's value or None);
        None without ``early_stopping_patience``. ``greater_is_better`` defaults as the Trainer's does."""
        patience = field("early_stopping_patience")
        if patience is None:
            return None
        name = field("metric_for_best_model") or "loss"
        key = name if name.startswith("eval_") else f"eval_{name}"
        greater_is_better = field("greater_is_better")
        return cls(
            patience=patience,
            metric_key=key,
            threshold=field("early_stopping_threshold") or 0.0,
            greater_is_better=not key.endswith("loss") if greater_is_better is None else greater_is_better,
            watch_loss=bool(field("early_stopping_watch_loss")),
        )

    @classmethod
    def from_args(cls, args: Any) -> PlateauRule | None:
        """The rule a run's training arguments set (None without ``early_stopping_patience``)."""
        return cls.from_fields(lambda name: getattr(args, name, None))

    def count(self, count: PatienceCount, metric: float, loss: float | None) -> PatienceCount:
        """The count after one more evaluation: a new best metric resets the patience; with
        ``watch_loss``, so does a new lowest validation loss."""
        if count.best_metric is None:
            better = True
        else:
            better = metric > count.best_metric if self.greater_is_better else metric < count.best_metric
        reset = count.best_metric is None or (better and abs(metric - count.best_metric) > self.threshold)
        lower_loss = loss is not None and (count.best_loss is None or loss < count.best_loss)
        if self.watch_loss and lower_loss:
            reset = True
        return PatienceCount(
            waited=0 if reset else count.waited + 1,
            best_metric=metric if better else count.best_metric,
            best_loss=loss if lower_loss else count.best_loss,
        )

    def counts(self, log_history: list[dict[str, Any]]) -> Iterator[tuple[int, PatienceCount]]:
        """The step and the count after each evaluation a training log holds, in step order."""
        count = PatienceCount()
        for step, entry in sorted((entry["step"], entry) for entry in log_history if self.metric_key in entry):
            count = self.count(count, entry[self.metric_key], entry.get("eval_loss"))
            yield step, count

    def replay(self, log_history: list[dict[str, Any]]) -> PatienceCount:
        """The count after every evaluation of a training log (a resumed run starts from it)."""
        count = PatienceCount()
        for _, count in self.counts(log_history):  # noqa: B007  (the last one is the answer)
            pass
        return count

    def stop_step(self, log_history: list[dict[str, Any]]) -> int | None:
        """The step of the evaluation at which the rule stops a run with this training log (None: it never
        does within the log): what a report checks a recorded stop against."""
        return next((step for step, count in self.counts(log_history) if count.waited >= self.patience), None)


class PlateauStopping(EarlyStoppingCallback):
    """Transformers' early stopping, counting as `PlateauRule` does: with ``watch_loss`` a new lowest
    validation loss also resets the patience. ``resume`` replays a checkpoint's log, since the Trainer
    does not restore a callback's count (a resumed run would otherwise wait a whole patience again)."""

    def __init__(self, rule: PlateauRule):
        super().__init__(rule.patience, rule.threshold)
        self.rule = rule
        self.count = PatienceCount()

    def resume(self, checkpoint: str | None) -> None:
        """Start from the count the checkpoint's training log replays to (none: from zero)."""
        self.count = PatienceCount() if checkpoint is None else self.rule.replay(log_history_in(checkpoint))
        self.early_stopping_patience_counter = self.count.waited

    def on_evaluate(self, args, state, control, metrics, **kwargs):
        metric = metrics.get(self.rule.metric_key)
        if metric is None:  # the parent warns and stops nothing
            return super().on_evaluate(args, state, control, metrics, **kwargs)
        self.count = self.rule.count(self.count, metric, metrics.get("eval_loss"))
        self.early_stopping_patience_counter = self.count.waited
        if self.count.waited >= self.early_stopping_patience:
            control.should_training_stop = True

    def state(self) -> dict:
        saved = super().state()
        saved["args"]["watch_loss"] = self.rule.watch_loss
        saved["attributes"]["best_eval_loss"] = self.count.best_loss
        return saved


def log_history_in(checkpoint: str) -> list[dict[str, Any]]:
    """The training log a checkpoint saved (evaluations included)."""
    with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
        return json.load(handle).get("log_history", [])
