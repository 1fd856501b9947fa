"""From a parallel corpus to a trained, evaluated, shareable model with `Seq2SeqTrainer`.

`run_translation` is the whole recipe: load the splits, get a tokenizer (trained on the training
split unless one is given), build the model from the options, tokenize, train with early stopping
on validation BLEU (resuming from the last checkpoint in ``output_dir`` when there is one), score
the test split against the raw references, and leave in ``output_dir`` everything a user needs:
weights, tokenizer, modeling code, ``results.json``, the test translations and a model card.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import datasets
from datasets import Dataset
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    EarlyStoppingCallback,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Seq2SeqTrainer,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import rotate_checkpoints
from transformers.utils import logging

from ..configuration import GraphBartConfig, GraphMarianConfig
from ..data import HUB_CORPORA, load_parallel_corpus
from ..errors import UserError, report_user_error
from ..inference import reference_lists
from ..model_card import HUB_ID_PLACEHOLDER, write_model_card
from ..model_files import check_model_source, weights_problem
from ..tokenization import train_joint_tokenizer
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments, parse_recipe_args
from .batching import TokenBatchSampler
from .budget import TrainingTimeBudget, trained_seconds_in
from .checkpoints import (
    TRAINER_STATE_FILE,
    checkpoint_problem,
    checkpoint_step,
    newest_complete_checkpoint,
    publish_checkpoint,
    remove_checkpoints,
    remove_staging,
    staging_path,
)
from .log_lines import LogLines
from .metrics import build_compute_metrics, decode_token_ids, translation_report
from .pretrained import FAMILY_OF_MODEL_TYPE, load_pretrained_with_options
from .schedule import with_cooldown

logger = logging.get_logger(__name__)

CONFIG_CLASSES = {"marian": GraphMarianConfig, "bart": GraphBartConfig}
RESULTS_FILE = "results.json"
PREDICTIONS_FILE = "test_predictions.txt"
#: left out of the Hub upload: checkpoints, private files and the pickled training arguments
HUB_IGNORE_PATTERNS = ["_*", "checkpoint-*", ".checkpoint-staging/*", "runs/*", "training_args.bin"]
#: training hyperparameters recorded in results.json and shown in the model card
RECORDED_TRAINING_ARGS = (
    "learning_rate",
    "lr_scheduler_type",
    "lr_cooldown_fraction",
    "warmup_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "world_size",
    "label_smoothing_factor",
    "optim",
    "adam_beta1",
    "adam_beta2",
    "weight_decay",
    "max_grad_norm",
    "max_steps",
    "num_train_epochs",
    "eval_steps",
    "early_stopping_patience",
    "max_tokens_per_batch",
    "max_train_minutes",
    "precision",
    "generation_num_beams",
    "test_num_beams",
    "seed",
)


def load_splits(data_args: DataArguments, training_args: TranslationTrainingArguments) -> dict[str, Dataset]:
    """The raw splits the run needs, keyed ``train``, ``validation`` and ``test``.

    Each split is loaded on its own, so an evaluation-only run does not read the training data;
    a missing split or a malformed file raises the corpus loader's `ValueError`, naming the file.
    """
    wanted = {
        "train": (training_args.do_train, data_args.train_split, data_args.max_train_samples),
        "validation": (_evaluates(training_args), data_args.validation_split, data_args.max_eval_samples),
        "test": (training_args.do_predict, data_args.test_split, data_args.max_test_samples),
    }
    splits = {}
    for role, (needed, name, limit) in wanted.items():
        if not needed:
            continue
        split = load_parallel_corpus(
            data_args.corpus,
            src_lang=data_args.src_lang,
            tgt_lang=data_args.tgt_lang,
            split=name,
            config=data_args.corpus_config,
        )
        if limit is not None and limit < len(split):
            spread = role == "validation" and data_args.spread_eval_samples
            split = split.select([i * len(split) // limit for i in range(limit)] if spread else range(limit))
        splits[role] = split
    return splits


def _evaluates(training_args: TranslationTrainingArguments) -> bool:
    return training_args.do_eval or training_args.eval_strategy != "no"


#: environment flags `accelerate launch` sets for an engine config -> the distributed type it should give
_ENGINE_FLAGS = {"ACCELERATE_USE_FSDP": "FSDP", "ACCELERATE_USE_DEEPSPEED": "DEEPSPEED"}


class TranslationTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` whose training batches are token-based when ``max_tokens_per_batch`` is set."""

    token_sampler: TokenBatchSampler | None = None

    def __init__(self, *args, time_budget: TrainingTimeBudget | None = None, **kwargs):
        """``time_budget`` (``max_train_minutes``) stops training, and its spent share drives the
        learning-rate cool-down (``lr_cooldown_fraction``)."""
        super().__init__(*args, **kwargs)
        self.time_budget = time_budget
        if time_budget is not None:
            self.add_callback(time_budget)
        self.add_callback(_SamplerEpoch(self))
        if self.args.disable_tqdm:
            self.remove_callback(PrinterCallback)
            self.add_callback(LogLines)

    def _get_train_sampler(self, train_dataset: Dataset | None = None):
        if self.args.max_tokens_per_batch is None:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        world_size = max(1, self.args.world_size)
        self.token_sampler = TokenBatchSampler(
            [len(ids) for ids in dataset["input_ids"]],
            [len(ids) for ids in dataset["labels"]],
            self.args.max_tokens_per_batch,
            world_size=world_size,
            rank=self.args.process_index if world_size > 1 else 0,
            seed=self.args.data_seed if self.args.data_seed is not None else self.args.seed,
        )
        return self.token_sampler

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """The Trainer's schedule, cooled down to zero over the budget's last ``lr_cooldown_fraction``."""
        created = self.lr_scheduler is None
        scheduler = super().create_scheduler(num_training_steps, optimizer)
        if created and self.args.lr_cooldown_fraction > 0:
            budget = self.time_budget

            def progress(step: int) -> float:
                spent = step / num_training_steps if num_training_steps > 0 else 0.0
                return max(spent, budget.spent_fraction) if budget is not None else spent

            with_cooldown(scheduler, self.args.lr_cooldown_fraction, progress)
        return scheduler

    _staging_root: str | None = None

    def _get_output_dir(self, trial) -> str:
        # while a checkpoint is being saved, the Trainer's writes go to the staging area
        return self._staging_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        """The Trainer's checkpoint, written under ``.checkpoint-staging/`` and renamed into place once
        every process has written its part (see `training.checkpoints`), then the old ones rotated."""
        run_dir = self._get_output_dir(trial)
        staged, final = staging_path(run_dir, self.state.global_step)
        if self.args.should_save:
            shutil.rmtree(staged, ignore_errors=True)  # left by a save interrupted at this same step
        self.accelerator.wait_for_everyone()
        self._staging_root = os.path.dirname(staged)
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_root = None
        self.accelerator.wait_for_everyone()
        # every process, not only the saving one: each reloads the best checkpoint at the end of training,
        # and one still holding the staging path would keep its last weights and translate with those
        best_is_this_one = self.state.best_model_checkpoint == staged
        if best_is_this_one:
            self.state.best_model_checkpoint = final
        if self.args.should_save:
            if best_is_this_one:
                self.state.save_to_json(os.path.join(staged, TRAINER_STATE_FILE))
            publish_checkpoint(staged, final)
            rotate_checkpoints(
                output_dir=run_dir,
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=False,  # by step number: which checkpoints stay never depends on the clock
            )
        self.accelerator.wait_for_everyone()

    def _issue_warnings_after_load(self, load_result) -> None:
        """The Trainer's warning about keys missing from a loaded checkpoint, without the keys that
        `save_pretrained` leaves out on purpose (tied embeddings and LM head, Marian's sinusoidal
        positions): every resume and best-model reload otherwise warns that they are missing."""
        model = self.accelerator.unwrap_model(self.model)
        expected = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
        expected |= set(getattr(model, "all_tied_weights_keys", None) or {})
        missing = [key for key in load_result.missing_keys if key not in expected]
        if len(missing) < len(load_result.missing_keys):
            model.tie_weights()
        if missing:
            logger.warning(f"There were missing keys in the checkpoint model loaded: {missing}.")
        if load_result.unexpected_keys:
            logger.warning(f"There were unexpected keys in the checkpoint model loaded: {load_result.unexpected_keys}.")


class _SamplerEpoch(TrainerCallback):
    """Gives the token sampler its epoch at each epoch start, also where the Trainer's own ``set_epoch``
    does not reach it (a resumed run with several processes, where accelerate wraps it twice)."""

    def __init__(self, trainer: TranslationTrainer):
        self.trainer = trainer

    def on_epoch_begin(self, args, state, control, **kwargs):
        sampler = self.trainer.token_sampler
        if sampler is not None:
            accumulation = args.gradient_accumulation_steps
            steps_per_epoch = max(len(sampler) // accumulation + int(len(sampler) % accumulation > 0), 1)
            sampler.set_epoch(state.global_step // steps_per_epoch)


def check_launch_engine(trainer: Seq2SeqTrainer) -> None:
    """Refuse a launch whose FSDP/DeepSpeed config accelerate dropped, instead of training without it.

    accelerate 1.15 applies FSDP only to accelerator-backed runs; on CPU (or with ``use_cpu``) the
    run silently becomes plain data parallel, or one independent process per rank.
    """
    distributed_type = trainer.accelerator.distributed_type.value
    for flag, engine in _ENGINE_FLAGS.items():
        if os.environ.get(flag, "false").lower() == "true" and distributed_type != engine:
            raise RuntimeError(
                f"accelerate was launched with a {engine} config, but this run is {distributed_type}: "
                f"accelerate uses {engine} only on GPUs (or other accelerators), and not with use_cpu. "
                "Launch on GPUs, or use recipes/accelerate/ddp.yaml with `--use_cpu true` for CPU processes."
            )


#: what a tokenizer saved in output_dir was trained on, so that a rerun reuses it only for the same data
TOKENIZER_RECORD = "_tokenizer_training.json"


def build_tokenizer(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    train_split: Dataset | None,
    checkpoint: str | None,
) -> PreTrainedTokenizerBase:
    """The given tokenizer, the one saved with the checkpoint being resumed, or a joint one trained on
    the training split.

    A new tokenizer is trained once, by the main process, and saved in ``output_dir`` with a record of
    what it was trained on; a rerun into that folder before any checkpoint exists (a run stopped while
    loading or in its first steps) reuses it when the record matches, instead of training it again. The
    other processes of a distributed run wait and load that copy, so every process has the same
    vocabulary.
    """
    source = model_args.tokenizer_name_or_path or checkpoint or model_args.model_name_or_path
    if source is not None:
        check_model_source(source, weights=False)
        return AutoTokenizer.from_pretrained(source)
    if train_split is None:
        raise ValueError("no tokenizer to use: set tokenizer_name_or_path or model_name_or_path, or train (do_train).")
    record = {
        "corpus": data_args.corpus,
        "split": data_args.train_split,
        "pairs": len(train_split),
        "languages": [data_args.src_lang, data_args.tgt_lang],
        "vocab_size": data_args.vocab_size,
        "model": data_args.tokenizer_model,
    }
    record_path = os.path.join(training_args.output_dir, TOKENIZER_RECORD)
    with training_args.main_process_first(local=False, desc="training the tokenizer"):
        if training_args.process_index == 0:
            if not training_args.overwrite_output_dir and _saved_record(record_path) == record:
                announce(training_args, f"using the tokenizer saved in {training_args.output_dir} (same data)")
                tokenizer = AutoTokenizer.from_pretrained(training_args.output_dir)
            else:
                announce(
                    training_args,
                    f"training a {data_args.vocab_size}-piece {data_args.tokenizer_model} tokenizer on "
                    f"{len(train_split):,} {data_args.train_split} pairs",
                )
                tokenizer = train_joint_tokenizer(
                    train_split,
                    src_lang=data_args.src_lang,
                    tgt_lang=data_args.tgt_lang,
                    vocab_size=data_args.vocab_size,
                    model=data_args.tokenizer_model,
                    show_progress=not training_args.disable_tqdm,
                )
                tokenizer.save_pretrained(training_args.output_dir)
                with open(record_path, "w", encoding="utf-8") as handle:
                    json.dump(record, handle)
        else:
            tokenizer = AutoTokenizer.from_pretrained(training_args.output_dir)
    return tokenizer


def _saved_record(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def announce(training_args: TranslationTrainingArguments, message: str) -> None:
    """One line on the main process about a slow step before training starts (loading the corpus,
    training the tokenizer, tokenizing): off a terminal nothing else would show for a minute."""
    if training_args.process_index == 0:
        print(f"[hf-graphtf] {message}", file=sys.stderr, flush=True)


def build_model(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    tokenizer: PreTrainedTokenizerBase,
) -> PreTrainedModel:
    """A fresh model of the chosen family and options, or the saved one named by ``model_name_or_path``
    with the options switched on (see `load_pretrained_with_options`; its family is the checkpoint's).

    Special tokens of a fresh model come from the tokenizer; the decoder starts from the pad token, as
    in Marian. The generation settings used for evaluation are stored in the model's generation config,
    so the saved model translates the same way by default.
    """
    if model_args.model_name_or_path is not None:
        _, model = load_pretrained_with_options(
            model_args.model_name_or_path, model_args.graph_options(), model_args.attn_implementation
        )
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens but {model_args.model_name_or_path} has "
                f"{model.config.vocab_size} embeddings: use the checkpoint's own tokenizer."
            )
    else:
        config = CONFIG_CLASSES[model_args.model_family](
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            decoder_start_token_id=tokenizer.pad_token_id,
            forced_eos_token_id=tokenizer.eos_token_id,
            **model_args.size_options(),
            **model_args.graph_options(),
        )
        model = AutoModelForSeq2SeqLM.from_config(config, attn_implementation=model_args.attn_implementation)
    generation = model.generation_config
    generation.max_length = training_args.generation_max_length or data_args.max_target_length
    # the saved model translates like the test evaluation did
    # (Transformers 5 leaves generation defaults unset: a recipe that names no beam size decodes greedily)
    beams = training_args.test_num_beams or training_args.generation_num_beams or generation.num_beams or 1
    generation.num_beams = beams
    if model_args.model_name_or_path is None and generation.num_beams > 1:
        # Beam search ends once num_beams hypotheses are finished, as in fairseq and Marian: an
        # undertrained model's runaway beams otherwise run on to max_length and dominate decoding time.
        generation.early_stopping = True
    return model


def tokenize_splits(
    splits: dict[str, Dataset],
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
) -> dict[str, Dataset]:
    """Source ids and target labels (each ending in ``</s>``), truncated to the maximum lengths."""

    def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        sources = [pair[data_args.src_lang] for pair in batch["translation"]]
        targets = [pair[data_args.tgt_lang] for pair in batch["translation"]]
        features = tokenizer(sources, max_length=data_args.max_source_length, truncation=True)
        labels = tokenizer(text_target=targets, max_length=data_args.max_target_length, truncation=True)
        features["labels"] = labels["input_ids"]
        return features

    tokenized = {}
    with training_args.main_process_first(desc="tokenizing the corpus"):
        for role, split in splits.items():
            tokenized[role] = split.map(
                preprocess,
                batched=True,
                remove_columns=split.column_names,
                num_proc=data_args.preprocessing_num_workers,
                desc=f"Tokenizing the {role} split",
            )
    if "validation" in tokenized:
        # Validation BLEU compares predictions with labels in whatever order they come; generation
        # waits for the longest sentence of each batch, so batches of similar lengths are much faster.
        validation = tokenized["validation"]
        lengths = [len(ids) for ids in validation["input_ids"]]
        tokenized["validation"] = validation.select(sorted(range(len(lengths)), key=lengths.__getitem__))
    return tokenized


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
    family = FAMILY_OF_MODEL_TYPE.get(saved.get("model_type"), (None,))[0]
    if model_args.model_name_or_path is None and family != model_args.model_family:
        differing.insert(0, f"model_family (checkpoint {family!r}, recipe {model_args.model_family!r})")
    if differing:
        raise ResumeOptionsError(
            f"{checkpoint} was trained with other model options than the recipe's: {'; '.join(differing)}. "
            "Resume with the checkpoint's options, or start over with --overwrite_output_dir true "
            "(deletes the checkpoints) or another output_dir."
        )


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
    counter = patience_counter_in(checkpoint)
    patience = training_args.early_stopping_patience
    if patience is not None and counter >= patience:
        return f"early stopping ({counter} evaluations without improvement)"
    return None


def patience_counter_in(checkpoint: str | None) -> int:
    """Evaluations without a new best that a checkpoint records (0 for none)."""
    if checkpoint is None:
        return 0
    path = os.path.join(checkpoint, TRAINER_STATE_FILE)
    if not os.path.isfile(path):
        return 0
    with open(path, encoding="utf-8") as handle:
        stored = json.load(handle).get("stateful_callbacks", {}).get(EarlyStoppingCallback.__name__, {})
    if isinstance(stored, list):
        stored = stored[0] if stored else {}
    return int((stored.get("attributes") or {}).get("early_stopping_patience_counter", 0))


#: why training ended, as results.json and the grid rows record it
STOP_REASONS = ("validation plateau", "time budget", "step cap", "epoch cap")


def stop_reason(
    global_step: int,
    training_args: TranslationTrainingArguments,
    early_stopping: EarlyStoppingCallback | None,
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
    """The ``train`` part of the finished run's results.json, or what its checkpoint records."""
    try:
        with open(os.path.join(output_dir, RESULTS_FILE), encoding="utf-8") as handle:
            return json.load(handle)["train"]
    except (OSError, ValueError, KeyError, TypeError):
        with open(os.path.join(checkpoint, TRAINER_STATE_FILE), encoding="utf-8") as handle:
            state = json.load(handle)
        return {
            "global_step": state.get("global_step"),
            "best_checkpoint": state.get("best_model_checkpoint"),
            "resumed_from_checkpoint": checkpoint,
        }


def evaluate_test_split(
    trainer: Seq2SeqTrainer,
    raw: Dataset,
    tokenized: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
) -> tuple[dict[str, Any], list[str]]:
    """Translate the test split and score it against the raw reference text (not decoded labels)."""
    # Generation runs until the longest sentence of a batch is done: batches of similar lengths are
    # much faster. The predictions are put back in corpus order afterwards.
    lengths = [len(ids) for ids in tokenized["input_ids"]]
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    num_beams = trainer.args.test_num_beams or trainer.args.generation_num_beams
    output = trainer.predict(tokenized.select(order), metric_key_prefix="test", num_beams=num_beams)
    hypotheses = [""] * len(order)
    for position, text in zip(order, decode_token_ids(tokenizer, output.predictions)):
        hypotheses[position] = text
    sources = [pair[data_args.src_lang] for pair in raw["translation"]]
    single, multi = reference_lists(raw, data_args.tgt_lang)
    results: dict[str, Any] = {"test": translation_report(sources, hypotheses, single, data_args.length_buckets)}
    results["test"]["loss"] = output.metrics.get("test_loss")
    results["test"]["runtime"] = output.metrics.get("test_runtime")
    if multi is not None:
        results["test_multi_reference"] = translation_report(sources, hypotheses, multi, data_args.length_buckets)
    ids = raw["id"] if "id" in raw.column_names else [str(i) for i in range(len(raw))]
    count = min(data_args.num_sample_translations, len(hypotheses))
    spread = [i * len(hypotheses) // count for i in range(count)]  # across the split, not only its start
    results["samples"] = [
        {"id": ids[i], "source": sources[i], "reference": single[i][0], "translation": hypotheses[i]} for i in spread
    ]
    return results, hypotheses


def _plain(value: Any) -> Any:
    """Enum-valued arguments (``lr_scheduler_type``, ``optim``) as their plain string values."""
    return value.value if isinstance(value, Enum) else value


def hub_dataset_id(corpus: str) -> str | None:
    """The Hub id of a corpus loaded from the Hub (short names resolved), None for local data."""
    if os.path.exists(corpus):
        return None
    return HUB_CORPORA[corpus][0] if corpus in HUB_CORPORA else corpus


def built_corpus_record(corpus: str) -> dict[str, Any]:
    """For a corpus folder written by ``hf-graphtf build-corpus`` (its ``meta.json``): the command that
    rebuilds it, and its further test references, for the model card. Empty for any other corpus."""
    try:
        with open(os.path.join(corpus, "meta.json"), encoding="utf-8") as handle:
            meta = json.load(handle)
    except (OSError, ValueError):
        return {}
    if meta.get("name") != "bible-es-en" or "format_version" not in meta:
        return {}
    extra = [name.upper() for name in meta.get("sources") or {} if name not in ("es", "web")]
    return {
        "rebuild": f"hf-graphtf build-corpus --output-dir {corpus}",
        "extra_references": ", ".join(f"the {name}" for name in extra) or None,
    }


def software_record() -> dict[str, Any]:
    """The package's commit (when run from a git checkout) and the versions of the libraries that compute."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "hf_graphtf"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.splitlines()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        commit, changed = None, []
    packages = {}
    for name in ("hf_graphtf", "torch", "transformers", "tokenizers", "accelerate", "datasets", "sacrebleu"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "commit": commit or None,
        "code_changed_from_commit": sorted(line[3:] for line in changed),
        "packages": packages,
    }


def run_record(
    model: PreTrainedModel,
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
) -> dict[str, Any]:
    """What was trained on what, and how: the part of results.json that the model card describes."""
    return {
        "model": {
            "family": FAMILY_OF_MODEL_TYPE[model.config.model_type][0],
            "model_type": model.config.model_type,
            "parameters": model.num_parameters(),
            "options": {name: getattr(model.config, name) for name in model_args.graph_options()},
            "sizes": {name: getattr(model.config, name) for name in model_args.size_options()},
            "vocab_size": model.config.vocab_size,
            "license": model_args.license,
            "base_model": model_args.model_name_or_path,
        },
        "data": {
            "corpus": data_args.corpus,
            "corpus_config": data_args.corpus_config,
            "hub_dataset": hub_dataset_id(data_args.corpus),
            "name": data_args.display_name,
            "src_lang": data_args.src_lang,
            "tgt_lang": data_args.tgt_lang,
            "splits": {
                "train": data_args.train_split,
                "validation": data_args.validation_split,
                "test": data_args.test_split,
            },
            **built_corpus_record(data_args.corpus),
            "card_limitations": list(data_args.card_limitations),
        },
        "software": software_record(),
        "training": {name: _plain(getattr(training_args, name)) for name in RECORDED_TRAINING_ARGS},
    }


def hub_repo_id(training_args: TranslationTrainingArguments) -> str:
    """The Hub repository named like the Trainer names it: ``hub_model_id`` or the output folder's name."""
    return training_args.hub_model_id or Path(training_args.output_dir).absolute().name


def card_model_id(training_args: TranslationTrainingArguments) -> str:
    """The id the card's usage code shows for a model not pushed: ``hub_model_id`` when it names a user,
    else a placeholder user and the folder's name."""
    repo = hub_repo_id(training_args)
    return repo if "/" in repo else f"{HUB_ID_PLACEHOLDER}/{repo}"


def create_hub_repo(training_args: TranslationTrainingArguments) -> str:
    """Create (or find) the Hub repository before the card is written, which needs its full id."""
    from huggingface_hub import HfApi

    api = HfApi(token=training_args.hub_token)
    return api.create_repo(hub_repo_id(training_args), private=training_args.hub_private_repo, exist_ok=True).repo_id


def upload_to_hub(output_dir: str, training_args: TranslationTrainingArguments, repo_id: str) -> None:
    """Upload the finished model folder (no checkpoints) in one commit.

    `Trainer.push_to_hub` would replace the model card with its generic one, so the upload goes
    through `huggingface_hub` directly, with the Trainer's own ignore rules.
    """
    from huggingface_hub import HfApi

    HfApi(token=training_args.hub_token).upload_folder(
        repo_id=repo_id,
        folder_path=output_dir,
        commit_message="Upload translation model trained with hf_graphtf",
        ignore_patterns=HUB_IGNORE_PATTERNS,
        revision=training_args.hub_revision,
    )


def write_outputs(output_dir: str, results: dict[str, Any], hypotheses: list[str] | None) -> None:
    """results.json and the test translations, one per line in test-split order."""
    with open(os.path.join(output_dir, RESULTS_FILE), "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    if hypotheses is not None:
        with open(os.path.join(output_dir, PREDICTIONS_FILE), "w", encoding="utf-8") as handle:
            handle.writelines(hypothesis + "\n" for hypothesis in hypotheses)


def run_translation(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train, evaluate and save one translation model; returns what is written to results.json.

    ``push_to_hub`` uploads once at the end (after the card has the test scores), not at every save.
    """
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError("nothing to do: set at least one of do_train, do_eval, do_predict.")
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
    announce(training_args, f"loading the corpus {data_args.corpus}")
    splits = load_splits(data_args, training_args)
    tokenizer = build_tokenizer(model_args, data_args, training_args, splits.get("train"), checkpoint)
    if finished is None:
        model = build_model(model_args, data_args, training_args, tokenizer)
    else:
        model = AutoModelForSeq2SeqLM.from_pretrained(
            finished_model_dir(training_args.output_dir, checkpoint), attn_implementation=model_args.attn_implementation
        )
    announce(training_args, "tokenizing " + ", ".join(f"{len(split):,} {role}" for role, split in splits.items()))
    tokenized = tokenize_splits(splits, tokenizer, data_args, training_args)

    all_callbacks = list(callbacks)
    early_stopping = None
    if training_args.early_stopping_patience is not None:
        early_stopping = EarlyStoppingCallback(
            training_args.early_stopping_patience, training_args.early_stopping_threshold
        )
        # the Trainer does not restore it on resume: a resumed run would otherwise wait a whole patience
        # again, and stop later than the same run left uninterrupted
        early_stopping.early_stopping_patience_counter = patience_counter_in(checkpoint)
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
    results = run_record(model, model_args, data_args, training_args)
    if finished is not None:
        results["train"] = earlier_train_record(training_args.output_dir, checkpoint)
    if training_args.do_train:
        train_output = trainer.train(resume_from_checkpoint=checkpoint)
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
            "validation_bleu": [
                [entry["step"], entry["eval_bleu"]] for entry in trainer.state.log_history if "eval_bleu" in entry
            ],
        }
        if trainer.token_sampler is not None:
            results["train"]["batches_per_epoch"] = len(trainer.token_sampler.batches)
    if training_args.do_eval:
        results["eval"] = trainer.evaluate(metric_key_prefix="eval")
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


def format_summary(results: dict[str, Any], output_dir: str) -> str:
    """The end-of-run report printed by the recipe script and ``hf-graphtf train``."""
    lines = [f"Model, tokenizer, card and {RESULTS_FILE} saved in {output_dir}"]
    if "eval" in results:
        lines.append(f"Validation: BLEU {results['eval'].get('eval_bleu')}  chrF {results['eval'].get('eval_chrf')}")
    for key, title in (("test", "Test"), ("test_multi_reference", "Test, all references")):
        if key in results:
            report = results[key]
            lines.append(
                f"{title}: BLEU {report['bleu']}  chrF {report['chrf']}  "
                f"({report['sentences']} sentences, {report['references_per_sentence']} reference(s) per sentence)"
            )
    if "test" in results:
        share = results["test"]["repeated_token_outputs"]
        lines.append(f"Translations with a word repeated 4+ times in a row: {share:.1%}")
    if "test" in results:
        buckets = results["test"]["bleu_by_length"]
        lines.append(
            "BLEU by source length (words): "
            + "  ".join(f"{label}: {row['bleu']} ({row['sentences']})" for label, row in buckets.items())
        )
        lines.append(f"sacreBLEU: {results['test']['bleu_signature']}")
    for sample in results.get("samples", []):
        lines += [
            f"[{sample['id']}]",
            f"  source:      {sample['source']}",
            f"  reference:   {sample['reference']}",
            f"  translation: {sample['translation']}",
        ]
    return "\n".join(lines)


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


__all__ = [
    "build_model",
    "build_tokenizer",
    "format_summary",
    "load_splits",
    "main",
    "run_translation",
    "upload_to_hub",
]
