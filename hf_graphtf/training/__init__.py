"""Training recipes: arguments, metrics and the `Seq2SeqTrainer` setup behind `hf-graphtf train`."""

from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments, parse_recipe_args
from .metrics import build_compute_metrics, corpus_scores, translation_report
from .recipe import main, run_translation
from .records import format_summary

__all__ = [
    "DataArguments",
    "ModelArguments",
    "TranslationTrainingArguments",
    "build_compute_metrics",
    "corpus_scores",
    "format_summary",
    "main",
    "parse_recipe_args",
    "run_translation",
    "translation_report",
]
