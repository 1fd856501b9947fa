"""Plain text and Strong's numbers from the OSIS markup of SWORD Bible modules.

pysword's own ``clean=True`` drops tags without leaving a space where a footnote sat between two
words ("God<note>..</note><w>created</w>" becomes "Godcreated"), and it keeps the text of notes,
cross-references and headings.  A translation corpus wants the verse text only, so this module
reads the raw markup and decides tag by tag what survives.
"""

from __future__ import annotations

import collections
import html
import re
import unicodedata
from collections.abc import Iterable

__all__ = ["GLUE", "CaseModel", "WordJoiner", "clean_osis", "strongs_numbers"]

GLUE = "\ue000"
"""Marks a point where two word elements touch without whitespace (see :class:`WordJoiner`)."""

# Editorial material whose *content* is not part of the verse: footnotes, cross-references and
# speaker labels (Song of Songs in the WEB).
_DROP_WITH_CONTENT = re.compile(r"<(note|speaker)\b[^>]*?(?<!/)>.*?</\1\s*>", re.S)
_SELF_CLOSED_NOTE = re.compile(r"<note\b[^>]*/>")
_TITLE = re.compile(r"<title\b([^>]*?)(?<!/)>(.*?)</title\s*>", re.S)
# Structural milestones (poetry lines, paragraphs, line groups) separate words even when the
# module stores no space next to them; every other tag just goes.
_BREAK_TAG = re.compile(r"<\s*/?\s*(?:l|lb|lg|div|p|item|list|milestone|chapter|verse)\b[^>]*>")
_TAG = re.compile(r"<[^>]*>")
# A closing word-level tag directly followed by an opening one: "allí</w><transChange>también".
_WORD_ELEMENTS = "w|transChange|divineName|seg|foreign|hi|name"
_TOUCHING_ELEMENTS = re.compile(rf"((?:</(?:{_WORD_ELEMENTS})\s*>)+)((?:<(?:{_WORD_ELEMENTS})\b[^>]*(?<!/)>)+)")
# Glue next to whitespace is moot: the words are already apart.
_SPACE_AROUND_GLUE = re.compile(rf"\s+{GLUE}+\s*|{GLUE}+\s+")
_TRAILING_WORD = re.compile(r"[^\W_]+$")
_LEADING_WORD = re.compile(r"^[^\W_]+")
_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_CLOSING = re.compile(r"\s+([,.;:!?)\]”])")
_SPACE_AFTER_OPENING = re.compile(r"([¿¡(\[“])\s+")
_CLOSING_QUOTE_GLUED = re.compile(r"”(?=[^\W\d_])")
# Whatever follows the end of a book inside its last verse (the WEB appends its glossary to
# Revelation 22:21) is not verse text.
_BOOK_END = re.compile(r"<div\b(?=[^>]*\btype=\"book\")(?=[^>]*\beID=)[^>]*>")
# Leftover USFM character markers ("the \\nd LORD" in a few KJV verses) and the KJV's paragraph
# signs are typesetting, not text.
_USFM_MARKER = re.compile(r"\\\+?[a-z]+\d*\*?\s*")
_PILCROW = re.compile(r"¶\s*")
_STRONG = re.compile(r"strong:([HG])0*(\d+)")
_LEMMA = re.compile(r"<w\b[^>]*\blemma=\"([^\"]*)\"")


def _title_text(match: re.Match[str]) -> str:
    """Keep canonical psalm superscriptions, drop editorial headings.

    "A Psalm of David." is part of the Hebrew text and the Spanish module carries it inline in
    verse 1, so dropping it on the English side would leave the Spanish sentence with words that
    have no counterpart.  Section headings and the KJV's epistle subscriptions are editorial.
    """
    attrs = match.group(1)
    if 'canonical="true"' in attrs:
        return " " + match.group(2) + " "
    return " "


def clean_osis(raw: str, *, keep_glue: bool = False) -> str:
    """Return the verse text of one OSIS-marked verse, with normalized spacing.

    Notes are replaced by a space rather than nothing because modules place them between words
    without surrounding whitespace; the spacing rules below then remove the spaces that end up
    in front of punctuation.

    Word elements that touch without whitespace are ambiguous: the Reina-Valera module writes
    "allí</w><transChange>también" (two words) but also "díjo</w><w>le" (one word, "díjole").
    With ``keep_glue`` such points are kept as :data:`GLUE` for a :class:`WordJoiner` to decide;
    otherwise they become spaces, the more common reading.
    """
    book_end = _BOOK_END.search(raw)
    text = raw[: book_end.start()] if book_end else raw
    text = _TOUCHING_ELEMENTS.sub(rf"\1{GLUE}\2", text)
    text = _DROP_WITH_CONTENT.sub(" ", text)
    text = _SELF_CLOSED_NOTE.sub(" ", text)
    text = _TITLE.sub(_title_text, text)
    text = _BREAK_TAG.sub(" ", text)
    text = _TAG.sub("", text)
    text = html.unescape(text)
    text = _USFM_MARKER.sub("", text)
    text = _PILCROW.sub("", text)
    text = _normalize_spacing(text)
    if not keep_glue:
        text = WordJoiner(frozenset()).resolve(text)
    return text


def _normalize_spacing(text: str) -> str:
    """Single spaces between words, none inside punctuation (nor around glue points)."""
    text = _SPACE.sub(" ", text).strip()
    text = _SPACE_AROUND_GLUE.sub(" ", text).strip(" " + GLUE)
    text = _SPACE_BEFORE_CLOSING.sub(r"\1", text)
    text = _SPACE_AFTER_OPENING.sub(r"\1", text)
    return _CLOSING_QUOTE_GLUED.sub("” ", text)


class WordJoiner:
    """Decides whether two touching word elements form one word, from the text's own vocabulary.

    "díjo" + "le" is joined because "díjole" occurs as a single word elsewhere in the same Bible;
    "allí" + "también" is not, because "allítambién" never does.  ``suffixes`` restricts joining
    to a closed class of attachable pieces (Spanish clitic pronouns), so that "Señor" + "es"
    stays two words even though "señores" is a word.
    """

    def __init__(self, vocabulary: frozenset[str], suffixes: frozenset[str] | None = None):
        self._vocabulary = vocabulary
        self._suffixes = suffixes

    @classmethod
    def from_texts(cls, texts: Iterable[str], suffixes: Iterable[str] | None = None) -> WordJoiner:
        """Learn the vocabulary of whole words, i.e. words not split or joined by a glue point."""
        vocabulary: set[str] = set()
        for text in texts:
            vocabulary.update(word.lower() for word in _WORD.findall(text.replace(GLUE, " ")))
        return cls(frozenset(vocabulary), None if suffixes is None else frozenset(suffixes))

    def joins(self, left: str, right: str) -> bool:
        """Whether ``left`` and ``right`` written together are one word."""
        if self._suffixes is not None and right.lower() not in self._suffixes:
            return False
        return (left + right).lower() in self._vocabulary

    def resolve(self, text: str) -> str:
        """Replace every glue point of ``text`` by nothing (one word) or a space (two words)."""
        if GLUE not in text:
            return text
        pieces = text.split(GLUE)
        result = pieces[0]
        for piece in pieces[1:]:
            left, right = _TRAILING_WORD.search(result), _LEADING_WORD.search(piece)
            if left and right and not self.joins(left.group(), right.group()):
                result += " "
            result += piece
        return _normalize_spacing(result)


def strongs_numbers(raw: str) -> list[str]:
    """Strong's numbers of the tagged words of a verse, in order, without zero padding.

    Modules disagree on padding ("H07225" vs "H7225"), so numbers are normalized to "H7225".
    """
    numbers: list[str] = []
    for lemma in _LEMMA.findall(raw):
        numbers.extend(f"{prefix}{int(digits)}" for prefix, digits in _STRONG.findall(lemma))
    return numbers


_SENTENCE_END = ".!?¿¡"
# Capitals after a colon say nothing about a word's usual case either: colons introduce speech.
_CLAUSE_END = _SENTENCE_END + ":;"


def _starts_after(text: str, position: int, previous_end: int | None, boundaries: str) -> bool:
    """Whether the word at ``position`` opens the text or follows one of ``boundaries``."""
    if previous_end is None:
        return True
    before = text[previous_end:position].rstrip()
    return bool(before) and before[-1] in boundaries


def _fold(word: str) -> str:
    """Lower case without diacritics: "Achâb" -> "achab"."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _most_frequent(forms: collections.Counter[str]) -> str:
    # Ties resolve to the lexicographically smallest form so that builds are reproducible.
    return min(forms.items(), key=lambda item: (-item[1], item[0]))[0]


def _is_shouted(word: str) -> bool:
    return len(word) > 1 and word.isupper()


class CaseModel:
    """How a language writes each word mid-sentence, learned from the corpus itself.

    The Reina-Valera module prints the opening words of nearly every chapter in capitals
    ("EN el principio", "Y ACONTECIÓ"), a typographic convention that would otherwise leave about
    1,100 verses starting with shouted words.  The usual casing of a word elsewhere in the same
    text tells whether "MOISÉS" becomes "Moisés" and "ACONTECIÓ" becomes "aconteció".
    """

    def __init__(self, counts: dict[str, collections.Counter[str]]):
        self._counts = counts
        # Spellings differ in diacritics between a chapter opening and the running text
        # ("ACHAB" vs "Achâb"); the folded index still tells that the word is a name.
        self._folded: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for key, forms in counts.items():
            self._folded[_fold(key)].update(forms)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> CaseModel:
        counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for text in texts:
            previous_end = None
            for match in _WORD.finditer(text):
                word = match.group()
                if not _is_shouted(word) and not _starts_after(text, match.start(), previous_end, _CLAUSE_END):
                    counts[word.lower()][word] += 1
                previous_end = match.end()
        return cls(dict(counts))

    def usual_form(self, word: str) -> str | None:
        """The most frequent non-capitalized spelling of ``word``, or None if never seen.

        A word seen only with other diacritics keeps its own letters in the case it is seen in.
        """
        forms = self._counts.get(word.lower())
        if forms:
            return _most_frequent(forms)
        forms = self._folded.get(_fold(word))
        if forms:
            return word[0] + word[1:].lower() if _most_frequent(forms)[0].isupper() else word.lower()
        return None

    def restore(self, text: str) -> str:
        """Rewrite the opening capitals of a sentence in the verse ("Y ACONTECIÓ") in their usual case.

        Only the first run of capitals is touched, and only when it starts a sentence, possibly
        after one-letter words ("Y Á SUS"): that is the typographic opening.  Capitals elsewhere are
        meant ("Yo soy JEHOVÁ", "EL REY DE LOS JUDIOS", "MENE, MENE, TEKEL").  Opening words never
        seen elsewhere ("TORNÉME", "EXISTÍA") are lower-cased.
        """
        pieces: list[str] = []
        previous_end: int | None = None
        opening = "before"  # -> "inside" at the opening capitals, -> "after" at the next normal word
        previous_in_sentence: list[str] = []
        for match in _WORD.finditer(text):
            word = match.group()
            pieces.append(text[previous_end or 0 : match.start()])
            sentence_start = _starts_after(text, match.start(), previous_end, _SENTENCE_END)
            if sentence_start:
                previous_in_sentence = []
            only_letters_before = all(len(previous) == 1 for previous in previous_in_sentence)
            # "Y Á SUS discípulos": a capital one-letter word inside the opening belongs to it.
            shouted = _is_shouted(word) or (
                opening != "after" and len(word) == 1 and word.isupper() and not sentence_start and only_letters_before
            )
            if opening == "before" and shouted:
                opening = "inside" if only_letters_before else "after"
            elif opening == "inside" and not shouted:
                opening = "after"
            previous_in_sentence.append(word)
            if opening != "inside" or not shouted:
                pieces.append(word)
            else:
                form = self.usual_form(word) or word.lower()
                pieces.append(form[0].upper() + form[1:] if sentence_start else form)
            previous_end = match.end()
        pieces.append(text[previous_end or 0 :])
        return "".join(pieces)
