"""`Seq2SeqTrainer` with token batches, crash-safe checkpoints and a time budget; and the launch check."""

from __future__ import annotations

import os
import shutil

from datasets import Dataset
from transformers import (
    Seq2SeqTrainer,
    TrainerCallback,
)
from transformers.trainer_callback import ExportableState, PrinterCallback
from transformers.trainer_utils import rotate_checkpoints
from transformers.utils import logging

from ..transformers_seam import saved_with_use_cache
from .adapters import is_adapter_model, load_extra_parameters, save_extra_parameters
from .batching import TokenBatchSampler
from .budget import TrainingTimeBudget
from .checkpoints import (
    TRAINER_STATE_FILE,
    publish_checkpoint,
    staging_path,
)
from .log_lines import LogLines
from .schedule import with_cooldown

logger = logging.get_logger(__name__)


#: environment flags `accelerate launch` sets for an engine config -> the distributed type it should give
_ENGINE_FLAGS = {"ACCELERATE_USE_FSDP": "FSDP", "ACCELERATE_USE_DEEPSPEED": "DEEPSPEED"}


class TranslationTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` whose training batches are token-based when ``max_tokens_per_batch`` is set."""

    token_sampler: TokenBatchSampler | None = None

    def __init__(self, *args, time_budget: TrainingTimeBudget | None = None, **kwargs):
        """``time_budget`` (``max_train_minutes``) stops training, and its spent share drives the
        learning-rate cool-down (``lr_cooldown_fraction``)."""
        model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
        #: what the model decodes with once saved: Trainer sets the config's use_cache to its own (False)
        self.saved_use_cache = getattr(getattr(model, "config", None), "use_cache", None)
        super().__init__(*args, **kwargs)
        self.time_budget = time_budget
        if time_budget is not None:
            self.add_callback(time_budget)
        self.add_callback(_SamplerEpoch(self))
        if self.args.disable_tqdm:
            self.remove_callback(PrinterCallback)
            self.add_callback(LogLines)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Every checkpoint and the final folder with ``use_cache`` as the model had it before training
        (`transformers_seam.saved_with_use_cache`), so that a model built from a saved config decodes with its
        cache."""
        with saved_with_use_cache(self.model, self.saved_use_cache):
            super().save_model(output_dir, _internal_call=_internal_call)

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
        # a state resumed from a checkpoint saved with other stateful callbacks (e.g. before early stopping
        # counted the loss too) lacks this run's names, and the Trainer's save would fail on the lookup
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, ExportableState):
                self.state.stateful_callbacks.setdefault(type(callback).__name__, {})
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

    # LoRA: the Trainer saves and loads a PEFT model's adapter only (Trainer._save, _load_from_checkpoint and
    # _load_best_model, the PeftModel branches); the learned link gates train beside it and are saved and loaded
    # with it here, and the checkpoint gets the model's config, which resuming checks the recipe against.

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        super()._save(output_dir, state_dict)
        model = self.accelerator.unwrap_model(self.model)
        if is_adapter_model(model) and self.args.should_save:
            folder = output_dir if output_dir is not None else self.args.output_dir
            model.get_base_model().config.save_pretrained(folder)
            save_extra_parameters(model, folder)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        loaded = model if model is not None else self.model
        if is_adapter_model(loaded):
            load_extra_parameters(loaded, resume_from_checkpoint)

    def _load_best_model(self) -> None:
        super()._load_best_model()
        if is_adapter_model(self.model):
            load_extra_parameters(self.model, self.state.best_model_checkpoint)

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
