"""Reproducible train/valid/test splits for verse-level parallel data.

Neighbouring verses share names, formulas and whole clauses, so a random verse-level split leaks
test content into training.  Splits are therefore made per chapter, from a hash of the chapter
reference: stable across runs, machines and Python versions (unlike ``hash()``), and unaffected
by adding or removing other chapters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "SPLIT_NAMES",
    "chapter_of",
    "chapter_split",
    "drop_seen_sources",
    "source_key",
    "split_by_chapter",
    "stable_subset",
]

Record = dict[str, Any]
SPLIT_NAMES = ("train", "valid", "test")


def _unit_interval(text: str) -> float:
    """Map ``text`` to [0, 1) through SHA-1, the same on every run and machine."""
    digest = hashlib.sha1(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def chapter_split(chapter: str, *, test_fraction: float = 0.05, valid_fraction: float = 0.03) -> str:
    """The split ("train", "valid" or "test") of a chapter reference such as ``"Gen.1"``."""
    if test_fraction < 0 or valid_fraction < 0 or test_fraction + valid_fraction >= 1:
        raise ValueError("test_fraction and valid_fraction must be non-negative and sum to less than 1")
    position = _unit_interval(chapter)
    if position < test_fraction:
        return "test"
    if position < test_fraction + valid_fraction:
        return "valid"
    return "train"


def chapter_of(record_id: str) -> str:
    """``"Gen.1.1"`` -> ``"Gen.1"``: the unit that must not straddle two splits."""
    book, chapter, _verse = record_id.rsplit(".", 2)
    return f"{book}.{chapter}"


def split_by_chapter(
    records: Iterable[Record], *, test_fraction: float = 0.05, valid_fraction: float = 0.03
) -> dict[str, list[Record]]:
    """Distribute records (with ids like ``"Gen.1.1"``) over the splits, keeping their order."""
    splits: dict[str, list[Record]] = {name: [] for name in SPLIT_NAMES}
    for record in records:
        name = chapter_split(chapter_of(record["id"]), test_fraction=test_fraction, valid_fraction=valid_fraction)
        splits[name].append(record)
    return splits


def source_key(text: str) -> str:
    """What counts as "the same sentence" for deduplication: case and spacing are ignored."""
    return " ".join(text.casefold().split())


def drop_seen_sources(
    records: Sequence[Record], seen: Iterable[Record], *, src_lang: str
) -> tuple[list[Record], list[Record]]:
    """Split ``records`` into (kept, dropped), dropping those whose source occurs in ``seen``.

    Repeated verses (refrains, parallel passages in Kings and Chronicles) would otherwise let a
    model score on test sentences it memorized in training.
    """
    seen_keys = {source_key(record["translation"][src_lang]) for record in seen}
    kept: list[Record] = []
    dropped: list[Record] = []
    for record in records:
        key = source_key(record["translation"][src_lang])
        (dropped if key in seen_keys else kept).append(record)
    return kept, dropped


def stable_subset(records: Sequence[Record], size: int, *, salt: str) -> list[Record]:
    """A pseudo-random sample of ``size`` records that is identical on every run, in input order.

    Records are ranked by the SHA-1 of ``salt`` and their id, so the sample does not depend on
    the input order or on a random generator's state.
    """
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    if size >= len(records):
        return list(records)
    ranked = sorted(range(len(records)), key=lambda index: (_unit_interval(f"{salt}:{records[index]['id']}"), index))
    chosen = set(ranked[:size])
    return [record for index, record in enumerate(records) if index in chosen]
