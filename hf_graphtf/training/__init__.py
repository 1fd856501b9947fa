"""Training recipes: arguments, metrics and the `Seq2SeqTrainer` setup behind `hf-graphtf train`.

The names below are what code outside the package (the scripts in ``recipes/``) may use from training;
the submodules are internals, and a test keeps ``recipes/`` from importing them.
"""

from .adapters import add_lora
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments, load_recipe, parse_recipe_args
from .batching import token_batches
from .checkpoints import checkpoint_step, newest_complete_checkpoint
from .metrics import build_compute_metrics
from .plateau import PlateauRule
from .precision import cpu_has_bf16
from .recipe import main, run_translation
from .records import format_summary, software_record
from .schedule import noam_peak_learning_rate

__all__ = [
    "DataArguments",
    "ModelArguments",
    "PlateauRule",
    "TranslationTrainingArguments",
    "add_lora",
    "build_compute_metrics",
    "checkpoint_step",
    "cpu_has_bf16",
    "format_summary",
    "load_recipe",
    "main",
    "newest_complete_checkpoint",
    "noam_peak_learning_rate",
    "parse_recipe_args",
    "run_translation",
    "software_record",
    "token_batches",
]
