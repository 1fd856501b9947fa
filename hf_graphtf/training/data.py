"""The run's data: its splits, its subword tokenizer, and the splits tokenized."""

from __future__ import annotations

import json
import os
from typing import Any

from datasets import Dataset
from transformers import (
    AutoTokenizer,
    PreTrainedTokenizerBase,
)

from ..data import load_parallel_corpus
from ..data.splits import source_key
from ..errors import UserError
from ..model_files import check_model_source, named_source
from ..tokenization import train_joint_tokenizer
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments
from .log_lines import announce


class NoTokenizerError(UserError, ValueError):
    """A run that neither trains nor names a tokenizer (or a model that has one) has none to use."""


def load_splits(data_args: DataArguments, training_args: TranslationTrainingArguments) -> dict[str, Dataset]:
    """The raw splits the run needs, keyed ``train``, ``validation`` and ``test``.

    Each split is loaded on its own, so an evaluation-only run does not read the training data;
    a missing split or a malformed file raises the corpus loader's `ValueError`, naming the file.
    """
    wanted = {
        "train": (training_args.do_train, data_args.train_split, data_args.max_train_samples),
        "validation": (_evaluates(training_args), data_args.validation_split, data_args.max_eval_samples),
        "test": (training_args.do_predict, data_args.test_split, data_args.max_test_samples),
    }
    splits = {}
    for role, (needed, name, limit) in wanted.items():
        if not needed:
            continue
        split = load_parallel_corpus(
            data_args.corpus,
            src_lang=data_args.src_lang,
            tgt_lang=data_args.tgt_lang,
            split=name,
            config=data_args.corpus_config,
        )
        if limit is not None and limit < len(split):
            spread = role == "validation" and data_args.spread_eval_samples
            split = split.select([i * len(split) // limit for i in range(limit)] if spread else range(limit))
        splits[role] = split
    return splits


def overlap_with_train(splits: dict[str, Dataset], src_lang: str) -> dict[str, int]:
    """For the validation and test splits of a run that trains: how many of their sources occur in the
    training split, the same sentence as the Bible builders' deduplication counts it (`source_key`: case and
    spacing aside). A test sentence the model was trained on is scored on memory, not translation, and
    nothing else would say so; the Bible corpora have none (their builders drop such pairs)."""
    if "train" not in splits:
        return {}
    seen = set()  # hashes, not the sentences: a few dozen bytes a pair of WMT14's 4.5 million, in every process
    for batch in splits["train"].iter(batch_size=10_000):
        seen.update(hash(source_key(pair[src_lang])) for pair in batch["translation"])
    return {
        role: sum(hash(source_key(pair[src_lang])) in seen for pair in splits[role]["translation"])
        for role in ("validation", "test")
        if role in splits
    }


def overlap_lines(overlap: dict[str, int], splits: dict[str, Dataset]) -> list[str]:
    """One line per evaluation split that shares sources with the training split."""
    return [
        f"{role}: {count:,} of {len(splits[role]):,} sources also occur in the training split (case and spacing "
        "aside); scores on them measure what the model memorised, not how it translates: drop them from one split"
        for role, count in overlap.items()
        if count
    ]


def _evaluates(training_args: TranslationTrainingArguments) -> bool:
    return training_args.do_eval or training_args.eval_strategy != "no"


#: what a tokenizer saved in output_dir was trained on, so that a rerun reuses it only for the same data
TOKENIZER_RECORD = "_tokenizer_training.json"


def build_tokenizer(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    train_split: Dataset | None,
    checkpoint: str | None,
) -> PreTrainedTokenizerBase:
    """The given tokenizer, the one saved with the checkpoint being resumed, or a joint one trained on
    the training split.

    A new tokenizer is trained once, by the main process, and saved in ``output_dir`` with a record of
    what it was trained on; a rerun into that folder before any checkpoint exists (a run stopped while
    loading or in its first steps) reuses it when the record matches, instead of training it again. The
    other processes of a distributed run wait and load that copy, so every process has the same
    vocabulary.
    """
    source = model_args.tokenizer_name_or_path or checkpoint or model_args.model_name_or_path
    if source is not None:
        check_model_source(source, weights=False)
        with named_source(source):
            return AutoTokenizer.from_pretrained(source)
    if train_split is None:
        raise NoTokenizerError(
            "no tokenizer to use: set tokenizer_name_or_path or model_name_or_path, or train (do_train: true), "
            "which trains one on the training split"
        )
    record = {
        "corpus": data_args.corpus,
        "split": data_args.train_split,
        "pairs": len(train_split),
        "languages": [data_args.src_lang, data_args.tgt_lang],
        "vocab_size": data_args.vocab_size,
        "model": data_args.tokenizer_model,
    }
    record_path = os.path.join(training_args.output_dir, TOKENIZER_RECORD)
    with training_args.main_process_first(local=False, desc="training the tokenizer"):
        if training_args.process_index == 0:
            if not training_args.overwrite_output_dir and _saved_record(record_path) == record:
                announce(training_args, f"using the tokenizer saved in {training_args.output_dir} (same data)")
                tokenizer = AutoTokenizer.from_pretrained(training_args.output_dir)
            else:
                announce(
                    training_args,
                    f"training a {data_args.tokenizer_model} tokenizer of up to {data_args.vocab_size:,} pieces on "
                    f"{len(train_split):,} {data_args.train_split} pairs",
                )
                tokenizer = train_joint_tokenizer(
                    train_split,
                    src_lang=data_args.src_lang,
                    tgt_lang=data_args.tgt_lang,
                    vocab_size=data_args.vocab_size,
                    model=data_args.tokenizer_model,
                    show_progress=not training_args.disable_tqdm,
                )
                if len(tokenizer) < data_args.vocab_size:  # a small corpus has fewer pieces than asked for
                    announce(
                        training_args,
                        f"the tokenizer has {len(tokenizer):,} pieces: all that {len(train_split):,} pairs "
                        f"hold, fewer than vocab_size {data_args.vocab_size:,}",
                    )
                tokenizer.save_pretrained(training_args.output_dir)
                with open(record_path, "w", encoding="utf-8") as handle:
                    json.dump(record, handle)
        else:
            tokenizer = AutoTokenizer.from_pretrained(training_args.output_dir)
    return tokenizer


def _saved_record(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


#: the columns `tokenize_splits` adds while tokenizing, to count what the maximum lengths cut (then removed)
_CUT_COLUMNS = ("source_cut", "target_cut")


def tokenize_splits(
    splits: dict[str, Dataset],
    tokenizer: PreTrainedTokenizerBase,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
) -> tuple[dict[str, Dataset], dict[str, dict[str, int]]]:
    """Source ids and target labels (each ending in ``</s>``), truncated to the maximum lengths; and, per
    split, how many pairs there are and how many sources and targets the truncation cut (`cut_lines` says
    it: a cut test source is translated in part and scored against the whole reference, a cut training
    target teaches the model to stop early)."""

    def preprocess(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        sources = [pair[data_args.src_lang] for pair in batch["translation"]]
        targets = [pair[data_args.tgt_lang] for pair in batch["translation"]]
        features = tokenizer(sources, max_length=data_args.max_source_length, truncation=True)
        labels = tokenizer(text_target=targets, max_length=data_args.max_target_length, truncation=True)
        features["labels"] = labels["input_ids"]
        features["source_cut"] = _cut(sources, features["input_ids"], data_args.max_source_length, target=False)
        features["target_cut"] = _cut(targets, labels["input_ids"], data_args.max_target_length, target=True)
        return features

    def _cut(texts: list[str], kept: list[list[int]], max_length: int, target: bool) -> list[bool]:
        """Whether truncation cut each text: only one kept at the maximum length may have been, so only those
        are tokenized again, whole (as targets or sources: NLLB's language codes differ)."""
        at_limit = [i for i, ids in enumerate(kept) if len(ids) >= max_length]
        cut = [False] * len(texts)
        if at_limit:
            chosen = [texts[i] for i in at_limit]
            whole = tokenizer(text_target=chosen, verbose=False) if target else tokenizer(chosen, verbose=False)
            for i, ids in zip(at_limit, whole["input_ids"]):
                cut[i] = len(ids) > len(kept[i])
        return cut

    tokenized = {}
    with training_args.main_process_first(desc="tokenizing the corpus"):
        for role, split in splits.items():
            tokenized[role] = split.map(
                preprocess,
                batched=True,
                remove_columns=split.column_names,
                num_proc=data_args.preprocessing_num_workers,
                desc=f"Tokenizing the {role} split",
            )
    cuts = {}
    for role, split in tokenized.items():
        cuts[role] = {"pairs": len(split), "sources": sum(split["source_cut"]), "targets": sum(split["target_cut"])}
        tokenized[role] = split.remove_columns(list(_CUT_COLUMNS))
    if "validation" in tokenized:
        # Validation BLEU compares predictions with labels in whatever order they come; generation
        # waits for the longest sentence of each batch, so batches of similar lengths are much faster.
        validation = tokenized["validation"]
        lengths = [len(ids) for ids in validation["input_ids"]]
        tokenized["validation"] = validation.select(sorted(range(len(lengths)), key=lengths.__getitem__))
    return tokenized, cuts


#: what a cut does, by split and side: the test split is scored against the corpus's whole references,
#: validation BLEU against the (cut) labels
_CUT_EFFECTS = {
    ("train", "sources"): "the model learns from the cut sentences",
    ("train", "targets"): "the model learns from the cut sentences",
    ("validation", "sources"): "their translations miss what was cut",
    ("validation", "targets"): "validation BLEU compares translations with the cut references",
    ("test", "sources"): "their translations miss what was cut and are scored against whole references",
    ("test", "targets"): "only the test loss sees it: test BLEU uses the whole references",
}


def cut_lines(cuts: dict[str, dict[str, int]], data_args: DataArguments) -> list[str]:
    """One line per split whose sentences the maximum lengths cut, saying what that does to the run."""
    limits = {
        "sources": f"max_source_length ({data_args.max_source_length})",
        "targets": f"max_target_length ({data_args.max_target_length})",
    }
    lines = []
    for role, count in cuts.items():
        parts = [
            f"{count[side]:,} {side} longer than {limit} are cut to it ({_CUT_EFFECTS.get((role, side), 'cut')})"
            for side, limit in limits.items()
            if count[side]
        ]
        if parts:
            lines.append(
                f"{role}: of {count['pairs']:,} pairs, {', and '.join(parts)}; raise the maximum lengths (up to the "
                "model's max_position_embeddings) to keep whole sentences"
            )
    return lines
