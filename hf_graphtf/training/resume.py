"""Where a run stands: the checkpoint to resume from, whether its options still match, whether and why
it has finished."""

from __future__ import annotations

import json
import os
from typing import Any

from transformers.utils import logging

from ..errors import UserError
from ..families import FAMILY_OF_MODEL_TYPE
from ..model_files import weights_problem
from .adapters import saved_lora_options
from .arguments import ModelArguments, TranslationTrainingArguments
from .budget import TrainingTimeBudget, trained_seconds_in
from .checkpoints import (
    TRAINER_STATE_FILE,
    checkpoint_problem,
    newest_complete_checkpoint,
    remove_checkpoints,
    remove_staging,
)
from .plateau import PlateauRule, PlateauStopping
from .records import RESULTS_FILE

logger = logging.get_logger(__name__)


def find_resume_checkpoint(training_args: TranslationTrainingArguments) -> str | None:
    """The checkpoint to resume from: the one asked for, else the newest whole one in ``output_dir``.

    Checkpoints left half-written by an interrupted save are removed (staging area) or skipped and
    named (a ``checkpoint-N`` folder of an older version); ``overwrite_output_dir`` deletes them all
    and starts over.
    """
    output_dir = training_args.output_dir
    if training_args.resume_from_checkpoint:
        problem = checkpoint_problem(training_args.resume_from_checkpoint)
        if problem is not None:
            raise ValueError(f"cannot resume from {training_args.resume_from_checkpoint}: {problem}.")
        return training_args.resume_from_checkpoint
    if not training_args.do_train or not os.path.isdir(output_dir):
        return None
    if training_args.overwrite_output_dir:
        if training_args.process_index == 0:
            removed = remove_checkpoints(output_dir)
            if removed:
                logger.warning(f"Starting over (overwrite_output_dir): removed {', '.join(removed)}.")
        return None
    if training_args.process_index == 0:
        for path in remove_staging(output_dir):
            logger.warning(f"Removed {path}: a checkpoint whose saving was interrupted.")
    checkpoint, skipped = newest_complete_checkpoint(output_dir)
    for path, problem in skipped:
        logger.warning(f"Not resuming from {path}: {problem}.")
    return checkpoint


#: the attention kernel a run trains with, written when it starts, so that its later sittings keep it
RUN_ATTENTION_FILE = "run_attention.json"


def keep_attention(output_dir: str, checkpoint: str | None, model_args: ModelArguments, main_process: bool) -> str:
    """The attention kernel this sitting trains with, recorded in ``output_dir`` (`RUN_ATTENTION_FILE`).

    A run that starts records the kernel it resolved. A run that resumes keeps the recorded one when
    the recipe says ``auto``, though ``auto`` may resolve otherwise now (the measured table of
    `BF16_CPU_ATTENTION` changed between its sittings): one run, one kernel, as its results record. An
    explicit kernel in the recipe wins, with a warning that the run changes kernel at its checkpoint.
    """
    path = os.path.join(output_dir, RUN_ATTENTION_FILE)
    resolved = model_args.attn_implementation
    recorded = None
    if checkpoint is not None and os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            recorded = json.load(handle).get("attn_implementation")
    chosen = resolved
    if checkpoint is not None and recorded is None:
        logger.warning(
            f"{output_dir} does not record the attention kernel its run started with (no {RUN_ATTENTION_FILE}: "
            f"written by a version before it was recorded); going on from {checkpoint} with {resolved!r}."
        )
    elif recorded is not None and recorded != resolved:
        if model_args.attn_implementation_from_auto:
            chosen = recorded
            logger.warning(
                f"Resuming with the attention kernel this run started with, {recorded!r} ({path}); "
                f"attn_implementation 'auto' would now pick {resolved!r} here."
            )
        else:
            logger.warning(
                f"This run started with attention kernel {recorded!r} and goes on from {checkpoint} with "
                f"{resolved!r}, as the recipe sets: results.json records {resolved!r}."
            )
    if main_process and chosen != recorded:
        os.makedirs(output_dir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"attn_implementation": chosen}, handle)
    return chosen


class ResumeOptionsError(UserError, ValueError):
    """The output folder's checkpoints were trained with other model options than the recipe asks for."""


#: option fields that change nothing in the trained parameters' meaning (how the link is computed)
_RUNTIME_OPTIONS = ("attention_link_kernel",)


def check_resume_options(checkpoint: str, model_args: ModelArguments) -> None:
    """Refuse to resume a checkpoint whose model differs from the recipe's, naming the fields.

    Without this a recipe edited to ``attention_link: none`` would load the linked model's weights and
    train on as vanilla, without a word (the link has no parameters to miss).
    """
    with open(os.path.join(checkpoint, "config.json"), encoding="utf-8") as handle:
        saved = json.load(handle)
    wanted: dict[str, Any] = {
        name: value for name, value in model_args.graph_options().items() if name not in _RUNTIME_OPTIONS
    }
    if model_args.model_name_or_path is None:
        wanted.update(model_args.size_options())
    differing = [
        f"{name} (checkpoint {saved.get(name)!r}, recipe {value!r})"
        for name, value in wanted.items()
        if saved.get(name, value) != value
    ]
    saved_lora, wanted_lora = saved_lora_options(checkpoint), model_args.lora_options()
    if saved_lora != wanted_lora:
        differing.append(f"LoRA (checkpoint {_lora_text(saved_lora)}, recipe {_lora_text(wanted_lora)})")
    known = FAMILY_OF_MODEL_TYPE.get(saved.get("model_type"))
    family = None if known is None else known.name
    if model_args.model_name_or_path is None and family != model_args.model_family:
        differing.insert(0, f"model_family (checkpoint {family!r}, recipe {model_args.model_family!r})")
    if differing:
        raise ResumeOptionsError(
            f"{checkpoint} was trained with other model options than the recipe's: {'; '.join(differing)}. "
            "Resume with the checkpoint's options, or start over with --overwrite_output_dir true "
            "(deletes the checkpoints) or another output_dir."
        )


def _lora_text(options: dict[str, Any] | None) -> str:
    return "none: every weight trains" if options is None else ", ".join(f"{k} {v!r}" for k, v in options.items())


def finished_training(checkpoint: str, training_args: TranslationTrainingArguments) -> str | None:
    """Why the run that wrote ``checkpoint`` had already finished training (None if it had not):
    its step limit, its time budget or its early-stopping patience was used up."""
    with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
        state = json.load(handle)
    step = state.get("global_step", 0)
    if training_args.max_steps > 0 and step >= training_args.max_steps:
        return f"max_steps {training_args.max_steps} reached"
    epochs = training_args.num_train_epochs
    if training_args.max_steps <= 0 and state.get("epoch", 0.0) >= epochs - 1e-6:
        return f"all {epochs:g} epochs trained"
    budget = training_args.max_train_minutes
    if budget is not None and trained_seconds_in(checkpoint) >= 60 * budget:
        return f"the {budget:g}-minute training budget was spent"
    rule = PlateauRule.from_args(training_args)
    waited = None if rule is None else rule.replay(state.get("log_history", [])).waited
    if waited is not None and waited >= rule.patience:
        return f"early stopping ({waited} evaluations without improvement)"
    return None


#: why training ended, as results.json and the grid rows record it
STOP_REASONS = ("validation plateau", "time budget", "step cap", "epoch cap")


def stop_reason(
    global_step: int,
    training_args: TranslationTrainingArguments,
    early_stopping: PlateauStopping | None,
    budget: TrainingTimeBudget,
) -> str:
    """Which of `STOP_REASONS` ended training: early stopping's patience, the time budget, ``max_steps``,
    or the last epoch."""
    if early_stopping is not None and (
        early_stopping.early_stopping_patience_counter >= early_stopping.early_stopping_patience
    ):
        return STOP_REASONS[0]
    if budget.stopped_at_step is not None:
        return STOP_REASONS[1]
    if training_args.max_steps > 0 and global_step >= training_args.max_steps:
        return STOP_REASONS[2]
    return STOP_REASONS[3]


def finished_model_dir(output_dir: str, checkpoint: str) -> str:
    """The model a finished run left: the final save in ``output_dir`` (the best model when the run
    reloaded it), else the best checkpoint the Trainer recorded, else ``checkpoint``."""
    if os.path.isfile(os.path.join(output_dir, "config.json")) and weights_problem(output_dir) is None:
        return output_dir
    with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
        best = json.load(handle).get("best_model_checkpoint")
    return best if best and checkpoint_problem(best) is None else checkpoint


def earlier_train_record(output_dir: str, checkpoint: str) -> dict[str, Any]:
    """The ``train`` part of the finished run's results.json, or what its checkpoint records (a run stopped
    after its training finished and before results.json was written: no training time is known then)."""
    try:
        with open(os.path.join(output_dir, RESULTS_FILE), encoding="utf-8") as handle:
            return json.load(handle)["train"]
    except (OSError, ValueError, KeyError, TypeError):
        with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
            state = json.load(handle)
        return {
            "global_step": state.get("global_step"),
            "epoch": state.get("epoch"),
            "best_checkpoint": state.get("best_model_checkpoint"),
            "resumed_from_checkpoint": checkpoint,
        }
