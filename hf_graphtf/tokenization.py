"""Joint source/target subword tokenizers for translation models.

A single vocabulary shared by both languages lets the encoder and decoder share (or tie)
embeddings, which matters in the low-resource settings this package targets.  The token layout
follows Marian: ``<pad>`` = 0 (also the decoder start token), ``</s>`` = 1 appended to every
sequence, ``<unk>`` = 2, and SentencePiece-style "▁" word boundaries so that decoding restores
the original spacing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

__all__ = ["EOS_TOKEN", "PAD_TOKEN", "SPECIAL_TOKENS", "UNK_TOKEN", "iter_corpus_texts", "train_joint_tokenizer"]

PAD_TOKEN, EOS_TOKEN, UNK_TOKEN = "<pad>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, EOS_TOKEN, UNK_TOKEN)
"""In id order: the trainers assign ids to special tokens first, in the order given."""
MODEL_MAX_LENGTH = 512
_METASPACE = "▁"
# Letters and punctuation of the Latin-1 range are always in the vocabulary, so that an accented
# letter missing from a small training sample ("Ñ") still round-trips instead of becoming <unk>.
_LATIN_ALPHABET = sorted({chr(code) for code in range(0x20, 0x7F)} | {chr(code) for code in range(0xA1, 0x100)})


def _is_dataset_like(obj: Any) -> bool:
    return hasattr(obj, "column_names") and hasattr(obj, "iter")


def iter_corpus_texts(texts_or_dataset: Any, *, src_lang: str, tgt_lang: str) -> Iterator[str]:
    """The sentences a joint tokenizer is trained on: both sides of each pair, or plain strings.

    A ``DatasetDict`` contributes only its ``train`` split, so that a tokenizer never sees the
    sentences it will be evaluated on.
    """
    data = texts_or_dataset
    if hasattr(data, "keys") and not _is_dataset_like(data) and not isinstance(data, (str, bytes)):
        if "train" not in data:
            raise ValueError(f"a DatasetDict needs a 'train' split to train a tokenizer on; it has {list(data)}")
        data = data["train"]
    if _is_dataset_like(data):
        if "translation" not in data.column_names:
            raise ValueError(f"dataset has no 'translation' column (columns: {data.column_names})")
        for batch in data.iter(batch_size=1000):
            for pair in batch["translation"]:
                for lang in (src_lang, tgt_lang):
                    if pair.get(lang):
                        yield pair[lang]
        return
    if isinstance(data, (str, bytes)):
        raise TypeError("pass an iterable of sentences or a dataset, not a single string")
    for text in data:
        if not isinstance(text, str):
            raise TypeError(f"expected sentences as str, got {type(text).__name__}")
        if text:
            yield text


def _build_tokenizer(model: str, vocab_size: int, show_progress: bool) -> tuple[Tokenizer, Any]:
    if model == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            unk_token=UNK_TOKEN,
            initial_alphabet=_LATIN_ALPHABET,
            show_progress=show_progress,
        )
    elif model == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=_LATIN_ALPHABET,
            show_progress=show_progress,
        )
    else:
        raise ValueError(f"model must be 'unigram' or 'bpe', got {model!r}")
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    return tokenizer, trainer


def _with_stable_ids(tokenizer: Tokenizer) -> Tokenizer:
    """The trained tokenizer with scores and ids that depend only on the corpus.

    The unigram trainer sums scores and adds the required characters it did not select in hash-map
    order, which changes from one process to the next: scores differ in their last bits, the added
    characters get the scores ``min_score + k * 1e-4`` in a different order, and pieces of equal score
    get different ids. Two runs of one recipe then encode sentences differently and train different
    models. Here scores are rounded to 1e-6 (far below any difference that decides a segmentation),
    the added characters take their scores in character order, and pieces are sorted by score with
    ties broken by the piece itself. BPE ids follow the merge order, which is already fixed.
    """
    state = json.loads(tokenizer.to_str())
    model = state["model"]
    if model["type"] != "Unigram":
        return tokenizer
    specials = model["vocab"][: len(SPECIAL_TOKENS)]
    pieces = [[piece, round(score, _SCORE_DECIMALS)] for piece, score in model["vocab"][len(SPECIAL_TOKENS) :]]
    added = _added_characters(pieces)
    scores = sorted((pieces[i][1] for i in added), reverse=True)
    characters = sorted(pieces[i][0] for i in added)
    for i, character, score in zip(added, characters, scores):
        pieces[i] = [character, score]
    model["vocab"] = specials + sorted(pieces, key=lambda entry: (-entry[1], entry[0]))
    return Tokenizer.from_str(json.dumps(state))


_SCORE_DECIMALS = 6
_ADDED_SCORE_STEP = 1e-4  # the trainer's penalty step for the required characters it adds


def _added_characters(pieces: list[list[Any]]) -> list[int]:
    """Positions of the single characters whose scores lie on the trainer's grid of added characters,
    ``min_score + k * 1e-4``. A trained character that happens to lie on it is included too, which
    keeps the result a function of the pieces and their rounded scores alone."""
    if not pieces:
        return []
    lowest = min(score for _, score in pieces)
    top = lowest + _ADDED_SCORE_STEP * sum(len(piece) == 1 for piece, _ in pieces)  # at most one step each
    found = []
    for i, (piece, score) in enumerate(pieces):
        steps = (score - lowest) / _ADDED_SCORE_STEP
        if len(piece) == 1 and score <= top and abs(steps - round(steps)) < 0.01:
            found.append(i)
    return found


def train_joint_tokenizer(
    texts_or_dataset: Iterable[str] | Any,
    *,
    src_lang: str,
    tgt_lang: str,
    vocab_size: int = 8000,
    model: Literal["unigram", "bpe"] = "unigram",
    output_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
) -> PreTrainedTokenizerFast:
    """Train one subword vocabulary on both languages and wrap it for ``transformers``.

    ``texts_or_dataset`` is an iterable of sentences, or a ``Dataset``/``DatasetDict`` with a
    ``translation`` column (both ``src_lang`` and ``tgt_lang`` sides are used).  The returned
    tokenizer appends ``</s>`` to every encoded text, pads with ``<pad>`` (id 0), has
    ``model_max_length`` 512, and records ``src_lang``/``tgt_lang`` in its init kwargs so that
    ``save_pretrained`` / ``AutoTokenizer.from_pretrained`` keep the language pair.  It is saved
    to ``output_dir`` when one is given.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    tokenizer, trainer = _build_tokenizer(model, vocab_size, show_progress)
    tokenizer.train_from_iterator(
        iter_corpus_texts(texts_or_dataset, src_lang=src_lang, tgt_lang=tgt_lang), trainer=trainer
    )
    tokenizer = _with_stable_ids(tokenizer)
    ids = [tokenizer.token_to_id(token) for token in SPECIAL_TOKENS]
    if ids != list(range(len(SPECIAL_TOKENS))):
        raise RuntimeError(f"special tokens got ids {ids}, expected {list(range(len(SPECIAL_TOKENS)))}")
    eos_id = ids[SPECIAL_TOKENS.index(EOS_TOKEN)]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS_TOKEN}", pair=f"$A $B {EOS_TOKEN}", special_tokens=[(EOS_TOKEN, eos_id)]
    )
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        model_max_length=MODEL_MAX_LENGTH,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
    )
    if output_dir is not None:
        wrapped.save_pretrained(os.fspath(output_dir))
    return wrapped
