"""The package's translation scores, also an `evaluate` metric module: ``evaluate.load`` this folder."""

from pathlib import Path

from .translation_scores import TOKENIZED_METHOD, TranslationScores, reference_streams, score_translations

#: what ``evaluate.load`` takes to load the metric from this installation
METRIC_PATH = str(Path(__file__).resolve().parent)

__all__ = ["METRIC_PATH", "TOKENIZED_METHOD", "TranslationScores", "reference_streams", "score_translations"]
