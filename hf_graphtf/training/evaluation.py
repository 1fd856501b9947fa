"""The test split translated by the trained model and scored against the raw references."""

from __future__ import annotations

from typing import Any

from datasets import Dataset
from transformers import (
    PreTrainedTokenizerBase,
    Seq2SeqTrainer,
)

from ..scoring import translation_report
from ..translation.inference import decode_token_ids, reference_lists
from .arguments import DataArguments


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
    results: dict[str, Any] = {
        "test": translation_report(sources, hypotheses, single, data_args.length_buckets, data_args.tgt_lang)
    }
    results["test"]["loss"] = output.metrics.get("test_loss")
    results["test"]["runtime"] = output.metrics.get("test_runtime")
    if multi is not None:
        results["test_multi_reference"] = translation_report(
            sources, hypotheses, multi, data_args.length_buckets, data_args.tgt_lang
        )
    ids = raw["id"] if "id" in raw.column_names else [str(i) for i in range(len(raw))]
    count = min(data_args.num_sample_translations, len(hypotheses))
    spread = [i * len(hypotheses) // count for i in range(count)]  # across the split, not only its start
    results["samples"] = [
        {"id": ids[i], "source": sources[i], "reference": single[i][0], "translation": hypotheses[i]} for i in spread
    ]
    return results, hypotheses
