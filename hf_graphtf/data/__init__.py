"""Parallel data for translation experiments: the offline Bible corpus and user corpora.

The corpus loader, the Bible builder and the tokenizer trainer are imported on first use: the loader
pulls in `datasets`, which the command line must not load before a translation; the builder pysword;
the trainer ``transformers``; and ``python -m hf_graphtf.data.bible`` must not find its own module
already imported by the package.
"""

from __future__ import annotations

from typing import Any

from hf_graphtf.data.splits import chapter_split, drop_seen_sources, split_by_chapter, stable_subset

_LAZY = {
    "HUB_CORPORA": "hf_graphtf.data.corpora",
    "CorpusError": "hf_graphtf.data.corpora",
    "CorpusFileNotFound": "hf_graphtf.data.corpora",
    "load_parallel_corpus": "hf_graphtf.data.corpora",
    "missing_local_corpus": "hf_graphtf.data.corpora",
    "APT_COMMAND": "hf_graphtf.data.bible",
    "SwordModulesMissing": "hf_graphtf.data.bible",
    "build_bible_corpus": "hf_graphtf.data.bible",
    "ensure_sword_modules": "hf_graphtf.data.bible",
    "train_joint_tokenizer": "hf_graphtf.tokenization",
}

__all__ = [
    "APT_COMMAND",
    "HUB_CORPORA",
    "CorpusError",
    "CorpusFileNotFound",
    "SwordModulesMissing",
    "build_bible_corpus",
    "chapter_split",
    "drop_seen_sources",
    "ensure_sword_modules",
    "load_parallel_corpus",
    "missing_local_corpus",
    "split_by_chapter",
    "stable_subset",
    "train_joint_tokenizer",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
