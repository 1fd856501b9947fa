"""From a parallel corpus to a trained, evaluated, shareable model with `Seq2SeqTrainer`.

`run_translation` is the whole recipe: load the splits, get a tokenizer (trained on the training
split unless one is given), build the model from the options, tokenize, train with early stopping
on validation BLEU (resuming from the last checkpoint in ``output_dir`` when there is one), score
the test split against the raw references, and leave in ``output_dir`` everything a user needs:
weights, tokenizer, modeling code, ``results.json``, the test translations and a model card."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
from transformers import (
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    set_seed,
)
from transformers.utils import logging

from ..errors import UserError, report_user_error
from ..model_card import write_model_card
from .adapters import (
    add_lora,
    check_adapter_engine,
    is_adapter_model,
    load_adapter_checkpoint,
    merged_model,
    saved_lora_options,
)
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments, parse_recipe_args
from .budget import TrainingTimeBudget, trained_seconds_in
from .checkpoints import (
    checkpoint_step,
)
from .data import build_tokenizer, cut_lines, load_splits, overlap_lines, overlap_with_train, tokenize_splits
from .evaluation import evaluate_test_split
from .hub import card_model_id, create_hub_repo, upload_to_hub
from .language_codes import apply_language_codes
from .log_lines import announce
from .metrics import build_compute_metrics
from .models import build_model, freeze_unsaved_parameters
from .plateau import PlateauRule, PlateauStopping
from .records import format_summary, run_record, write_outputs
from .resume import (
    check_resume_options,
    earlier_train_record,
    find_resume_checkpoint,
    finished_model_dir,
    finished_training,
    keep_attention,
    stop_reason,
)
from .run_lock import hold_output_folder
from .trainer import TranslationTrainer, check_launch_engine, logger


def run_translation(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train, evaluate and save one translation model; returns what is written to results.json.

    ``push_to_hub`` uploads once at the end (after the card has the test scores), not at every save.
    The run holds its output folder throughout (`hold_output_folder`): a second run on it is refused.
    """
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError("nothing to do: set at least one of do_train, do_eval, do_predict.")
    with hold_output_folder(training_args.output_dir, main_process=training_args.process_index == 0):
        return _run_translation(model_args, data_args, training_args, callbacks)


def _run_translation(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    callbacks: Sequence[TrainerCallback],
) -> dict[str, Any]:
    logging.set_verbosity(training_args.get_process_log_level())
    datasets.utils.logging.set_verbosity(training_args.get_process_log_level())
    if training_args.disable_tqdm:  # (off a terminal by default): no progress bars in a log file
        datasets.disable_progress_bars()
        logging.disable_progress_bar()
    set_seed(training_args.seed)
    push_to_hub, training_args.push_to_hub = training_args.push_to_hub, False

    checkpoint = find_resume_checkpoint(training_args)
    finished = None
    if checkpoint is not None:
        check_resume_options(checkpoint, model_args)
        finished = finished_training(checkpoint, training_args)
        if finished is None:
            logger.warning(f"Resuming training from {checkpoint}.")
        else:
            # Training again would add a step (or none) and overwrite results.json with a train loss of 0.
            training_args.do_train = False
            logger.warning(
                f"Training in {training_args.output_dir} had already finished ({finished}): evaluating its "
                "model again. To train anew, pass --overwrite_output_dir true or choose another output_dir."
            )
    if training_args.do_train:  # a resumed run keeps the kernel it started with
        model_args.attn_implementation = keep_attention(
            training_args.output_dir, checkpoint, model_args, main_process=training_args.process_index == 0
        )
    announce(training_args, f"loading the corpus {data_args.corpus}")
    splits = load_splits(data_args, training_args)
    overlap = overlap_with_train(splits, data_args.src_lang)
    for line in overlap_lines(overlap, splits):
        announce(training_args, line)
    tokenizer = build_tokenizer(model_args, data_args, training_args, splits.get("train"), checkpoint)
    if finished is None:
        model = build_model(model_args, data_args, training_args, tokenizer)
        if model_args.lora_r:
            model = add_lora(model, model_args)
        frozen = freeze_unsaved_parameters(model)
        if frozen:
            announce(training_args, frozen)
    else:
        model = _finished_model(model_args, data_args, training_args, tokenizer, checkpoint)
    codes = apply_language_codes(tokenizer, model, data_args)  # before tokenizing: NLLB's codes mark each side
    if codes:
        announce(training_args, codes)
    announce(training_args, "tokenizing " + ", ".join(f"{len(split):,} {role}" for role, split in splits.items()))
    tokenized, cuts = tokenize_splits(splits, tokenizer, data_args, training_args)
    for line in cut_lines(cuts, data_args):
        announce(training_args, line)

    all_callbacks = list(callbacks)
    early_stopping = None
    rule = PlateauRule.from_args(training_args)
    if rule is not None:
        early_stopping = PlateauStopping(rule)
        early_stopping.resume(checkpoint)
        all_callbacks.append(early_stopping)
    # counts training minutes over every sitting; stops training only with max_train_minutes
    budget = TrainingTimeBudget(training_args.max_train_minutes, trained_seconds_in(checkpoint))
    trainer = TranslationTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized.get("train"),
        eval_dataset=tokenized.get("validation"),
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, pad_to_multiple_of=data_args.pad_to_multiple_of),
        compute_metrics=build_compute_metrics(tokenizer),
        callbacks=all_callbacks,
        time_budget=budget,
    )

    check_launch_engine(trainer)
    check_adapter_engine(trainer.model, trainer.accelerator.distributed_type.value)
    results = run_record(model, model_args, data_args, training_args)
    results["data"]["cut_to_max_length"] = cuts
    results["data"]["sources_also_in_train"] = overlap
    if finished is not None:
        results["train"] = earlier_train_record(training_args.output_dir, checkpoint)
    adapted = is_adapter_model(trainer.model)
    if training_args.do_train:
        train_output = trainer.train(resume_from_checkpoint=checkpoint)
        if is_adapter_model(trainer.model):  # evaluated and saved as it will be used: one model, adapter merged in
            trainer.model = trainer.model_wrapped = merged_model(trainer.model)
            results["model"]["parameters"] = trainer.model.num_parameters()  # without the adapter's own
        trainer.save_model()
        trainer.save_state()
        results["train"] = {
            **train_output.metrics,
            "global_step": trainer.state.global_step,
            "best_checkpoint": trainer.state.best_model_checkpoint,
            "resumed_from_checkpoint": checkpoint,
            "distributed_type": trainer.accelerator.distributed_type.value,
            "train_minutes": round(budget.trained_seconds / 60, 3),
            "stopped_by_time_budget": budget.stopped_at_step is not None,
            "stop_reason": stop_reason(trainer.state.global_step, training_args, early_stopping, budget),
            "best_step": None
            if trainer.state.best_model_checkpoint is None
            else checkpoint_step(trainer.state.best_model_checkpoint),
            "precision": training_args.precision,
            "attn_implementation": model_args.attn_implementation,
            "validation_bleu": [
                [entry["step"], entry["eval_bleu"]] for entry in trainer.state.log_history if "eval_bleu" in entry
            ],
        }
        if trainer.token_sampler is not None:
            results["train"]["batches_per_epoch"] = len(trainer.token_sampler.batches)
    if training_args.do_eval:
        results["eval"] = best_checkpoint_evaluation(trainer, adapted) or trainer.evaluate(metric_key_prefix="eval")
    hypotheses = None
    if training_args.do_predict:
        test_results, hypotheses = evaluate_test_split(trainer, splits["test"], tokenized["test"], tokenizer, data_args)
        results.update(test_results)

    if trainer.is_world_process_zero():
        repo_id = create_hub_repo(training_args) if push_to_hub else card_model_id(training_args)
        if push_to_hub:
            results["hub_repo_id"] = repo_id
        write_outputs(training_args.output_dir, results, hypotheses)
        write_model_card(training_args.output_dir, results, model_id=repo_id)
        if push_to_hub:
            upload_to_hub(training_args.output_dir, training_args, repo_id)
    return results


def _finished_model(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    tokenizer: PreTrainedTokenizerBase,
    checkpoint: str,
) -> PreTrainedModel:
    """The model a finished run left, to evaluate again: its final save, else its best (or last) checkpoint; a
    LoRA run's checkpoint holds the adapter only, which goes onto the recipe's model and is merged, as at the end
    of training."""
    folder = finished_model_dir(training_args.output_dir, checkpoint)
    if saved_lora_options(folder) is None:
        return AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation=model_args.attn_implementation)
    model = add_lora(build_model(model_args, data_args, training_args, tokenizer), model_args)
    load_adapter_checkpoint(model, folder)
    return merged_model(model)


def best_checkpoint_evaluation(trainer: TranslationTrainer, adapted: bool) -> dict[str, Any] | None:
    """The validation scores of the model training ended with, where the run has them already: with
    ``load_best_model_at_end`` that model is the best checkpoint's, whose evaluation (greedy decoding of the same
    validation sentences, in eval mode) is in the log at its step, so evaluating it again repeats that pass
    (about 13 s on the quickstart). None where it would not be the same model: no best checkpoint, or a LoRA
    run, whose adapter was merged in since (a rounding of its own)."""
    state = trainer.state
    if adapted or not trainer.args.load_best_model_at_end or state.best_model_checkpoint is None:
        return None
    best = checkpoint_step(state.best_model_checkpoint)
    logged = next((entry for entry in state.log_history if entry.get("step") == best and "eval_loss" in entry), None)
    if logged is None:
        return None
    return {key: value for key, value in logged.items() if key.startswith("eval_")} | {"epoch": logged.get("epoch")}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Parse ``[recipe.yaml] [--flag value ...]``, run the recipe and print the summary.

    A recipe that cannot be read or holds a bad value ends with one ``error:`` line (exit status 2),
    before any data work; the message names the field or the file and line. So does any `UserError`
    of the run itself (a missing or malformed corpus, a resume with other model options).
    """
    try:
        model_args, data_args, training_args = parse_recipe_args(argv)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(report_user_error(error)) from None
    try:
        results = run_translation(model_args, data_args, training_args)
    except UserError as error:  # the message names the file, line or field: no traceback
        raise SystemExit(report_user_error(error)) from None
    if training_args.process_index == 0:
        print(format_summary(results, training_args.output_dir), flush=True)
    return results
