"""Scoring translations: corpus BLEU, chrF and chrF++, BLEU by source length, and the test-set report.

One module for every caller that scores text (the training script's test evaluation, `hf-graphtf
evaluate`, the analyses, the benchmarks and the experiment runner); nothing here depends on training.
The corpus scores come from the package's `evaluate` metric (`hf_graphtf.translation_scores`), so a
run's numbers and ``evaluate.load`` of that metric agree: sacrebleu's defaults (BLEU with the 13a
tokenizer, chrF2) on detokenized text, comparable with published sacreBLEU numbers, signatures included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from .translation_scores import reference_streams, score_translations


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tgt_lang: str = "en", tokenized: bool = False
) -> dict[str, Any]:
    """Corpus BLEU, chrF and chrF++ (and with ``tokenized`` the Moses-tokenized BLEU) of ``hypotheses``
    against one or more references per sentence, as the package's `evaluate` metric computes them."""
    return score_translations(hypotheses, references, tgt_lang=tgt_lang, tokenized=tokenized)


def length_bucket_labels(edges: Sequence[int]) -> list[str]:
    """``[10, 20]`` -> ``["1-10", "11-20", "21+"]``."""
    labels, low = [], 1
    for high in edges:
        labels.append(f"{low}-{high}")
        low = high + 1
    labels.append(f"{low}+")
    return labels


def source_length_bucket(source: str, edges: Sequence[int]) -> int:
    """Index of the bucket of a source sentence, by its number of whitespace-separated words."""
    words = len(source.split())
    for index, high in enumerate(edges):
        if words <= high:
            return index
    return len(edges)


def bleu_by_length(
    sources: Sequence[str],
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    edges: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """Corpus BLEU of the sentences in each source-length bucket (the Graph-Transformer analysis).

    Buckets are counted in source words so that they do not depend on the subword vocabulary; an
    empty bucket reports ``bleu: None``.
    """
    labels = length_bucket_labels(edges)
    members: list[list[int]] = [[] for _ in labels]
    for i, source in enumerate(sources):
        members[source_length_bucket(source, edges)].append(i)
    report = {}
    for label, indices in zip(labels, members):
        bleu = None
        if indices:
            streams = reference_streams([references[i] for i in indices])
            bleu = round(BLEU().corpus_score([hypotheses[i] for i in indices], streams).score, 2)
        report[label] = {"sentences": len(indices), "bleu": bleu}
    return report


_TOKENIZE_13A = Tokenizer13a()


def has_repeated_token(text: str, times: int = 4) -> bool:
    """True when one token (BLEU's 13a tokenization) occurs ``times`` or more times in a row ("been been been been")."""
    run, previous = 0, None
    for token in _TOKENIZE_13A(text).split():
        run = run + 1 if token == previous else 1
        if run >= times:
            return True
        previous = token
    return False


def translation_report(
    sources: Sequence[str] | None,
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    edges: Sequence[int],
    tgt_lang: str = "en",
) -> dict[str, Any]:
    """Everything reported for a test set: BLEU, chrF, chrF++, Moses-tokenized BLEU, BLEU by source
    length (None without ``sources``), reference count."""
    report = corpus_scores(hypotheses, references, tgt_lang=tgt_lang, tokenized=True)
    report["sentences"] = len(hypotheses)
    report["references_per_sentence"] = max(len(refs) for refs in references)
    report["bleu_by_length"] = None if sources is None else bleu_by_length(sources, hypotheses, references, edges)
    # the degenerate output of an undertrained model: the share of translations that stutter
    repeated = sum(has_repeated_token(hypothesis) for hypothesis in hypotheses)
    report["repeated_token_outputs"] = round(repeated / max(len(hypotheses), 1), 4)
    return report


__all__ = [
    "bleu_by_length",
    "corpus_scores",
    "has_repeated_token",
    "length_bucket_labels",
    "source_length_bucket",
    "translation_report",
]
