"""Training logs a person reads in a log file: one plain line per log event, numbers as numbers; and
one line for each slow step before training starts.

On a terminal the Trainer's progress bars are the right display. Off a terminal (a log file, CI, a
pipe), progress bars become walls of carriage returns, and the Trainer's fallback prints each log as
a Python dict with every number turned into a quoted string. This callback replaces that fallback.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers import TrainerCallback, TrainingArguments


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_log_line(logs: dict[str, Any], step: int, max_steps: int, epoch: float | None) -> str:
    """``step 200/900 (epoch 0.63) eval: bleu 5.31  chrf 25.2  ...`` or ``... train: loss 5.2  ...``."""
    logs = {key: value for key, value in logs.items() if key not in ("total_flos", "epoch")}
    evaluation = any(key.startswith("eval_") for key in logs)
    kind = "eval" if evaluation else "train"
    fields = "  ".join(f"{key.removeprefix('eval_')} {_number(value)}" for key, value in logs.items())
    where = f"step {step}/{max_steps}" + (f" (epoch {epoch:.2f})" if epoch is not None else "")
    return f"{where} {kind}: {fields}"


class LogLines(TrainerCallback):
    """Prints one line per Trainer log event on the main process."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero:
            print(format_log_line(logs, state.global_step, state.max_steps, state.epoch), flush=True)


def announce(training_args: TrainingArguments, message: str) -> None:
    """One line on the main process about a slow step before training starts (loading the corpus,
    training the tokenizer, tokenizing): off a terminal nothing else would show for a minute."""
    if training_args.process_index == 0:
        print(f"[hf-graphtf] {message}", file=sys.stderr, flush=True)


__all__ = ["LogLines", "announce", "format_log_line"]
