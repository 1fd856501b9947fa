"""Monotone verse alignment inside one chapter.

Bible modules that claim the same versification do not always keep it: the Reina-Valera module
stores Spanish verse numbers in KJV slots in about 20 chapters (Num 30 starts one verse early),
and the WEB, with NRSV versification, leaves out or merges a few verses.  Pairing verses by reference alone would
silently misalign those chapters, so verses are paired by content instead, keeping their order:
a sequence alignment that may skip verses on either side, maximizing the total gain.
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "AlignedVerse",
    "align_chapter",
    "containment",
    "dice",
    "english_content_words",
    "monotone_align",
]


def monotone_align(n_left: int, n_right: int, gain: Callable[[int, int], float | None]) -> list[tuple[int, int]]:
    """Order-preserving one-to-one pairing maximizing the summed ``gain`` of the pairs.

    Dynamic programming over the (n_left+1) x (n_right+1) grid: each step either skips an item on
    one side (no cost) or pairs the two current items.  ``gain(i, j)`` returns None for pairs that
    must never be made, so unrelated items stay unpaired rather than being forced together.

    Returns the pairs ``(i, j)``, increasing in both indices.  Among alignments with the same total
    the traceback prefers pairing early items, which keeps results reproducible.
    """
    gains = [[gain(i, j) for j in range(n_right)] for i in range(n_left)]
    # best[i][j]: best total for left[i:] and right[j:], filled backwards so the traceback runs forwards.
    best = [[0.0] * (n_right + 1) for _ in range(n_left + 1)]
    for i in range(n_left - 1, -1, -1):
        row, below, row_gains = best[i], best[i + 1], gains[i]
        for j in range(n_right - 1, -1, -1):
            value = max(below[j], row[j + 1])
            pair_gain = row_gains[j]
            if pair_gain is not None:
                value = max(value, below[j + 1] + pair_gain)
            row[j] = value
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n_left and j < n_right:
        pair_gain = gains[i][j]
        if pair_gain is not None and best[i][j] == best[i + 1][j + 1] + pair_gain:
            pairs.append((i, j))
            i += 1
            j += 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def _shared(left: Mapping[str, int], right: Mapping[str, int]) -> int:
    """Size of the multiset intersection (``Counter.__and__`` without building a new Counter)."""
    if len(left) > len(right):
        left, right = right, left
    shared = 0
    for key, count in left.items():
        other = right.get(key)
        if other:
            shared += count if count < other else other
    return shared


def dice(left: Mapping[str, int], right: Mapping[str, int]) -> float:
    """Dice coefficient of two multisets, 2|A∩B| / (|A|+|B|); 0 when both are empty."""
    total = sum(left.values()) + sum(right.values())
    if total == 0:
        return 0.0
    return 2.0 * _shared(left, right) / total


def containment(part: Mapping[str, int], whole: Mapping[str, int]) -> float:
    """Share of the multiset ``part`` found in ``whole``; 0 when ``part`` is empty."""
    size = sum(part.values())
    if size == 0:
        return 0.0
    return _shared(part, whole) / size


@dataclass(frozen=True)
class AlignedVerse:
    """A verse reduced to what alignment needs: its number in the chapter and comparable features."""

    number: int
    features: collections.Counter[str]

    @functools.cached_property
    def size(self) -> int:
        return sum(self.features.values())


def align_chapter(
    left: Sequence[AlignedVerse],
    right: Sequence[AlignedVerse],
    *,
    min_similarity: float,
    same_number_bonus: float,
    merge_containment: float = 0.6,
    merge_length: float = 0.7,
    max_shift: int = 20,
) -> list[tuple[int, int]]:
    """Pair the verses of one chapter in two editions; returns ``(left number, right number)`` pairs.

    Verses with the same number may always be paired, and get ``same_number_bonus`` on top of
    their Dice similarity: translations sometimes share few comparable features (a Spanish verse
    tagged only on its particles), and in refrains or genealogies many verses look alike, where
    the numbering is the best evidence left.  Verses with different numbers are paired only on
    similarity at least ``min_similarity``; a consistently shifted chapter then wins over the
    numbering because every shifted pair scores far above the bonus.

    A verse that the other edition splits in two (KJV Num 30:15-16 are one Spanish verse) can only be paired
    with one half; the pair would carry words with no counterpart, so it is dropped when the
    unpaired neighbour of its partner is mostly contained in it as well.

    Verses whose numbers differ by more than ``max_shift`` are never paired: editions disagree by
    a few verses at most inside a chapter, and the band keeps long chapters (Psalm 119) cheap.
    """

    def gain(i: int, j: int) -> float | None:
        if abs(left[i].number - right[j].number) > max_shift:
            return None
        total = left[i].size + right[j].size
        similarity = 2.0 * _shared(left[i].features, right[j].features) / total if total else 0.0
        if left[i].number == right[j].number:
            return similarity + same_number_bonus
        return similarity if similarity >= min_similarity else None

    pairs = monotone_align(len(left), len(right), gain)
    paired_left = {i for i, _ in pairs}
    paired_right = {j for _, j in pairs}

    def absorbs_neighbour(verse: AlignedVerse, others: Sequence[AlignedVerse], index: int, paired: set[int]) -> bool:
        """Whether ``verse`` holds both ``others[index]`` and an unpaired neighbour of it."""
        partner_size = others[index].size
        for neighbour in (index - 1, index + 1):
            if not 0 <= neighbour < len(others) or neighbour in paired:
                continue
            features = others[neighbour].features
            # Short formulas ("And the LORD spake unto Moses") are contained in many verses; only a
            # verse long enough for both halves counts as a merge.
            long_enough = verse.size >= merge_length * (partner_size + others[neighbour].size)
            if long_enough and containment(features, verse.features) >= merge_containment:
                return True
        return False

    kept = [
        (i, j)
        for i, j in pairs
        if not absorbs_neighbour(left[i], right, j, paired_right)
        and not absorbs_neighbour(right[j], left, i, paired_left)
    ]
    return [(left[i].number, right[j].number) for i, j in kept]


_ENGLISH_WORD = re.compile(r"[a-z]+")
# Function words, and archaic forms whose modern equivalents differ (KJV "thee", WEB "you"), add
# nothing but noise to a KJV/WEB comparison.
_ENGLISH_STOP = frozenset(
    """a all an and are as at be but by did do doth for from had has hath have he her him his i if
    in into is it its let me my no not o of on or our out said say shall she so that the thee their
    them then there these they thine this those thou thy to unto up upon us was we were what when
    which who whom will with ye yea you your""".split()
)


def english_content_words(text: str, *, stem: int = 5) -> collections.Counter[str]:
    """Lower-cased content words of an English verse, cut to their first ``stem`` letters.

    KJV and WEB differ mostly in inflection and spelling ("creepeth"/"creeps",
    "abomination"/"abominable"); a crude prefix stem lets the shared vocabulary dominate.
    """
    words: collections.Counter[str] = collections.Counter()
    for word in _ENGLISH_WORD.findall(text.lower()):
        if len(word) >= 3 and word not in _ENGLISH_STOP:
            words[word[:stem]] += 1
    return words
