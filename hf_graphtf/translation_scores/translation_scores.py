"""Translation scores as an `evaluate` metric: sacreBLEU BLEU, chrF and chrF++ with their signatures, and
BLEU on Moses-tokenized text (the papers' multi-bleu.perl convention), with one or more references per
sentence.

    import evaluate
    scores = evaluate.load("path/to/hf_graphtf/translation_scores")   # this folder; or a Hub copy of it
    scores.compute(predictions=["the cat sat"], references=[["the cat sat", "a cat sat"]], tgt_lang="en")

The training script's validation and test scores come from `score_translations` below, so a score
computed with this metric and one in a run's ``results.json`` are the same number. This file depends
on `evaluate`, `datasets`, `sacrebleu` and (for the tokenized BLEU) `sacremoses` only, so the folder
can be published on the Hub as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import evaluate
from sacrebleu.metrics import BLEU, CHRF

_DESCRIPTION = __doc__.split("\n\n")[0]
_KWARGS_DESCRIPTION = """
Args:
    predictions: list of translations (detokenized text).
    references: one reference per prediction, or a list of references per prediction (sentences may have
        different numbers of them).
    tgt_lang: the target language, for the Moses tokenizer of `bleu_tokenized` (default "en").
    tokenized: also compute `bleu_tokenized` (needs sacremoses; default True).
Returns:
    bleu, chrf, chrf_pp, bleu_tokenized (scores, 0-100, rounded to 2 decimals) and the sacreBLEU signature
    of each (`bleu_signature`, ...).
"""
_CITATION = """@inproceedings{post-2018-call,
  title = {A Call for Clarity in Reporting {BLEU} Scores},
  author = {Post, Matt},
  booktitle = {Proceedings of the Third Conference on Machine Translation},
  year = {2018}
}"""
TOKENIZED_METHOD = "Moses-tokenized (sacremoses), case-sensitive, tokenize=none: like multi-bleu.perl"


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence reference lists as sacreBLEU's per-position streams (None fills the gaps)."""
    if not references or any(len(refs) == 0 for refs in references):
        raise ValueError("every sentence needs at least one reference")
    width = max(len(refs) for refs in references)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(width)]


def score_translations(
    predictions: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    tgt_lang: str = "en",
    tokenized: bool = True,
) -> dict[str, Any]:
    """The scores of ``predictions`` against one or more references each, with sacreBLEU signatures."""
    per_sentence = [[refs] if isinstance(refs, str) else list(refs) for refs in references]
    if len(predictions) != len(per_sentence):
        raise ValueError(f"{len(predictions)} predictions but {len(per_sentence)} reference lists")
    streams = reference_streams(per_sentence)
    hypotheses = list(predictions)
    report: dict[str, Any] = {}
    for key, metric in (("bleu", BLEU()), ("chrf", CHRF()), ("chrf_pp", CHRF(word_order=2))):
        report[key] = round(metric.corpus_score(hypotheses, streams).score, 2)
        report[f"{key}_signature"] = str(metric.get_signature())
    if tokenized:
        from sacremoses import MosesTokenizer

        moses = MosesTokenizer(lang=tgt_lang)

        def tokenize(texts: Sequence[str | None]) -> list[str | None]:
            return [None if text is None else moses.tokenize(text, escape=False, return_str=True) for text in texts]

        bleu = BLEU(tokenize="none", force=True)
        report["bleu_tokenized"] = round(
            bleu.corpus_score(tokenize(hypotheses), [tokenize(stream) for stream in streams]).score, 2
        )
        report["bleu_tokenized_method"] = TOKENIZED_METHOD
    return report


class TranslationScores(evaluate.Metric):
    """BLEU, chrF, chrF++ and Moses-tokenized BLEU in one call, as `hf_graphtf` reports them."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Sequence(datasets.Value("string"))}
                ),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
            reference_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions, references, tgt_lang: str = "en", tokenized: bool = True) -> dict[str, Any]:
        return score_translations(predictions, references, tgt_lang=tgt_lang, tokenized=tokenized)
