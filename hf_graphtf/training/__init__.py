"""Training recipes: arguments, metrics and the `Seq2SeqTrainer` setup behind `hf-graphtf train`.

The names below are the training API, what code outside the package may use; the scripts in ``recipes/``
reach the few internals they need through `hf_graphtf.training.tooling`, and a test keeps them to the two.
"""

from .adapters import add_lora
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments, load_recipe, parse_recipe_args
from .metrics import build_compute_metrics
from .recipe import main, run_translation
from .records import format_summary

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TranslationTrainingArguments",
    "add_lora",
    "build_compute_metrics",
    "format_summary",
    "load_recipe",
    "main",
    "parse_recipe_args",
    "run_translation",
]
