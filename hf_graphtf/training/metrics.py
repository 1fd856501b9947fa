"""`compute_metrics` for the Trainer: validation BLEU, chrF and output length from generated token ids.

The scores come from the package's `evaluate` metric (`hf_graphtf.translation_scores`); scoring text
outside training (the test report, analyses, the CLI) is `hf_graphtf.scoring`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from transformers import EvalPrediction, PreTrainedTokenizerBase

from ..translation.inference import decode_token_ids
from ..translation_scores import TranslationScores

#: what `DataCollatorForSeq2Seq` puts in padded label positions, and the Trainer in padded predictions
IGNORE_INDEX = -100


def build_compute_metrics(tokenizer: PreTrainedTokenizerBase) -> Callable[[EvalPrediction], dict[str, float]]:
    """`compute_metrics` for `Seq2SeqTrainer` with ``predict_with_generate``: BLEU, chrF, mean length, from
    the package's `evaluate` metric (`translation_scores`, kept in memory: nothing written per process).

    References are the decoded labels, as in the Transformers examples; the final test evaluation
    scores against the raw reference text instead (see `translation_report`).
    """
    metric = TranslationScores(keep_in_memory=True)

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predictions = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        hypotheses = decode_token_ids(tokenizer, predictions)
        references = decode_token_ids(tokenizer, prediction.label_ids)
        scores = metric.compute(predictions=hypotheses, references=references, tokenized=False)
        lengths = np.count_nonzero((predictions != tokenizer.pad_token_id) & (predictions >= 0), axis=-1)
        return {"bleu": scores["bleu"], "chrf": scores["chrf"], "gen_len": round(float(np.mean(lengths)), 2)}

    return compute_metrics
