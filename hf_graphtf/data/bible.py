"""Spanish-English Bible parallel corpus built offline from Debian's SWORD modules.

Sources (all public domain): Reina-Valera 1909 (``sword-text-sparv``) for Spanish, the World
English Bible (``sword-text-web``) as the English side, and the King James Version
(``sword-text-kjv``) as a second English reference and as the pivot of the alignment:

* Spanish and KJV both tag words with Strong's numbers, and those tags follow the same
  numbering, so Spanish verses are aligned to KJV verses on Strong's-number overlap.
* The WEB's Strong's tags cannot be trusted for this (they follow Hebrew numbering in about
  110 chapters, and sit on the wrong words in places: Gen 1:1 tags "In" as H430, "God"), so
  the WEB is aligned to the KJV on English word overlap instead.
* A Spanish-WEB pair exists where both alignments meet on the same KJV verse; its id is the KJV
  reference.

Alignment is monotone within each chapter (see :mod:`hf_graphtf.data.align`) because about 20
chapters of the Spanish module store Spanish verse numbers in KJV slots.

Run ``python -m hf_graphtf.data.bible --out data/bible-es-en``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_graphtf.data.align import AlignedVerse, align_chapter, english_content_words
from hf_graphtf.data.fingerprints import fingerprint_bytes, fingerprint_mismatch, read_meta
from hf_graphtf.data.osis import CaseModel, WordJoiner, clean_osis, strongs_numbers
from hf_graphtf.data.splits import SPLIT_NAMES, drop_seen_sources, split_by_chapter, stable_subset

from ..errors import UserError

__all__ = [
    "APT_COMMAND",
    "BIBLE_BOOKS",
    "EDITIONS",
    "Edition",
    "SwordModulesMissing",
    "build_bible_corpus",
    "ensure_sword_modules",
    "main",
]

DEFAULT_SWORD_PATH = Path("/usr/share/sword")
SRC_LANG, TGT_LANG = "es", "en"
TEST_FRACTION, VALID_FRACTION = 0.05, 0.03
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Subset:
    """A fixed sample of another training split, the papers' low-resource conditions: ``size`` pairs of
    ``parent`` ranked by sha1(``name`` + ':' + id). Each is drawn from the one before it, so the smaller
    condition's pairs are all in the larger one's (5K within 10K within train)."""

    name: str
    parent: str
    size: int


#: the training subsets every Bible corpus writes, each after its parent
SUBSETS = (Subset("train_10k", "train", 10_000), Subset("train_5k", "train_10k", 5_000))
TRAIN_10K_SIZE = SUBSETS[0].size
#: the splits a corpus folder holds, in the order they are written
CORPUS_SPLITS = ("train", *(subset.name for subset in SUBSETS), "valid", "test")
OUTPUT_FILES = (*(f"{name}.jsonl" for name in CORPUS_SPLITS), "meta.json")

# Alignment settings.  Same-numbered verses may always pair and get a bonus on top of their
# similarity; differently numbered ones need real evidence.  The Spanish bonus is small because
# Strong's overlap is a strong signal (median Dice 0.88 for true pairs, 0.11 for neighbours); the
# KJV/WEB bonus is larger because modern and archaic English share fewer words (median 0.76 vs
# 0.07) while the two editions' numbering almost never disagrees.
ES_MIN_SIMILARITY, ES_SAME_NUMBER_BONUS = 0.3, 0.15
EN_MIN_SIMILARITY, EN_SAME_NUMBER_BONUS = 0.3, 0.3


@dataclass(frozen=True)
class Edition:
    """One SWORD module used by the corpus and the Debian package that ships it."""

    role: str
    module: str
    package: str
    language: str
    title: str


EDITIONS = (
    Edition("es", "spaRV1909eb", "sword-text-sparv", "es", "Reina-Valera 1909"),
    Edition("web", "engWEB2015eb", "sword-text-web", "en", "World English Bible"),
    Edition("kjv", "engKJV2006eb", "sword-text-kjv", "en", "King James Version"),
)
APT_COMMAND = "apt-get install -y " + " ".join(edition.package for edition in EDITIONS)


def _kjv_books() -> tuple[str, ...]:
    from pysword.canons import canons

    return tuple(book[1] for testament in ("ot", "nt") for book in canons["kjv"][testament])


BIBLE_BOOKS: tuple[str, ...] = _kjv_books()
"""OSIS names of the 66 books, in canonical order ("Gen" ... "Rev")."""


class SwordModulesMissing(UserError, FileNotFoundError):
    """The SWORD modules the corpus is built from are not installed."""


def _resolve_sword_path(sword_path: str | os.PathLike[str] | None) -> Path:
    if sword_path is not None:
        return Path(sword_path)
    return Path(os.environ.get("SWORD_PATH", DEFAULT_SWORD_PATH))


def ensure_sword_modules(
    sword_path: str | os.PathLike[str] | None = None, editions: Sequence[Edition] = EDITIONS
) -> Path:
    """Return the SWORD library path after checking that the ``editions``' modules (by default all three)
    are installed.

    The path defaults to ``$SWORD_PATH`` or ``/usr/share/sword`` (where the Debian packages
    install).  Raises :class:`SwordModulesMissing` naming the missing modules and the exact apt
    command that installs them, since the usual failure is simply a machine without them.
    """
    path = _resolve_sword_path(sword_path)
    missing = [edition for edition in editions if not _module_installed(path, edition.module)]
    if missing:
        names = ", ".join(f"{edition.module} ({edition.package})" for edition in missing)
        command = "apt-get install -y " + " ".join(edition.package for edition in editions)
        raise SwordModulesMissing(
            f"SWORD Bible modules missing from {path}: {names}. "
            f"Install them with `sudo {command}` (run `sudo apt-get update` first on a fresh "
            "machine), or point SWORD_PATH at a SWORD library that has them."
        )
    return path


def _module_conf(path: Path, module: str) -> dict[str, str] | None:
    """The lower-cased key/value pairs of a module's .conf file, or None if there is none."""
    conf_dir = path / "mods.d"
    if not conf_dir.is_dir():
        return None
    for conf in sorted(conf_dir.glob("*.conf")):
        lines = conf.read_text(encoding="utf-8", errors="replace").splitlines()
        if any(line.strip() == f"[{module}]" for line in lines):
            values: dict[str, str] = {}
            for line in lines:
                key, sep, value = line.partition("=")
                if sep and not line.startswith("#"):
                    values.setdefault(key.strip().lower(), value.strip())
            return values
    return None


def _module_installed(path: Path, module: str) -> bool:
    conf = _module_conf(path, module)
    if conf is None or "datapath" not in conf:
        return False
    data_dir = path / conf["datapath"]
    return data_dir.is_dir() and any(data_dir.iterdir())


def _open_bibles(path: Path, editions: Sequence[Edition] = EDITIONS) -> dict[str, Any]:
    """pysword Bible objects by edition role, with per-block decompression cached.

    pysword decompresses a module's whole compressed block (a book, for these modules) for every
    verse it returns; caching the last blocks makes reading the Bible take a second, not minutes.
    """
    from pysword.modules import SwordModules

    library = SwordModules(str(path))
    library.parse_modules()
    bibles = {}
    for edition in editions:
        bible = library.get_bible_from_module(edition.module)
        if hasattr(bible, "_decompressed_text"):
            bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        bibles[edition.role] = bible
    return bibles


def _read_book(bible: Any, book: str) -> list[list[str]]:
    """Raw OSIS text of every verse of ``book``, as a list of chapters of verses."""
    _testament, structure = bible.get_structure().find_book(book)
    return [
        list(bible.get_iter(books=book, chapters=chapter, clean=False))
        for chapter in range(1, structure.num_chapters + 1)
    ]


_ACROSTIC_LETTER = re.compile(r"^[A-Z]{2,}\.?\s+(?=\S)")
# The Spanish module prints the KJV's epistle subscriptions ("Fué escrita de Corinto á los
# Romanos...") after the closing "Amén." of the last verse; the KJV marks them as non-canonical
# titles and the WEB has none.
_SUBSCRIBED_BOOKS = frozenset("Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm Heb".split())
_SUBSCRIPTION = re.compile(r"(Amén\.)\s+\S.*$")
# Clitic pronouns the Reina-Valera attaches to verbs ("díjole"); the module sometimes stores
# them as separate word elements with no space in between.
SPANISH_CLITICS = frozenset("me te se nos os lo la los las le les".split())


def _verse_text(book: str, chapter: int, verse: int, raw: str, *, role: str) -> str:
    """Clean verse text; drops the Hebrew letter headings of Psalm 119's stanzas.

    The letter names ("ALEPH", "BETH") head every eighth verse in the Spanish and WEB text but
    not in the KJV, and are not translations of anything.  Spanish text keeps its glue points for
    the :class:`WordJoiner` that is trained once the whole text has been read.
    """
    text = clean_osis(raw, keep_glue=role == "es")
    if book == "Ps" and chapter == 119 and verse % 8 == 1:
        text = _ACROSTIC_LETTER.sub("", text)
    return text


@dataclass
class _Pair:
    book: str
    chapter: int
    kjv_verse: int
    es_verse: int
    web_verse: int
    es: str
    web: str
    kjv: str

    @property
    def id(self) -> str:
        return f"{self.book}.{self.chapter}.{self.kjv_verse}"

    def record(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "translation": {SRC_LANG: self.es, TGT_LANG: self.web},
            "references": {TGT_LANG: [self.web, self.kjv]},
        }


def kjv_web_pairs(kjv: dict[int, str], web: dict[int, str]) -> list[tuple[int, int]]:
    """(KJV verse, WEB verse) pairs of one chapter, aligned on English word overlap: the WEB numbers a few
    chapters' verses otherwise than the KJV, whose versification the other sides follow."""
    return align_chapter(
        [AlignedVerse(v, english_content_words(text)) for v, text in kjv.items()],
        [AlignedVerse(v, english_content_words(text)) for v, text in web.items()],
        min_similarity=EN_MIN_SIMILARITY,
        same_number_bonus=EN_SAME_NUMBER_BONUS,
    )


def chapter_texts(book: str, chapter: int, verses: Sequence[str], role: str) -> dict[int, str]:
    """Clean text of a chapter's verses by verse number; verses a translation omits are left out."""
    texts = {}
    for verse, raw in enumerate(verses, start=1):
        text = _verse_text(book, chapter, verse, raw, role=role)
        if text:
            texts[verse] = text
    return texts


def _align_book(
    book: str, chapters: dict[str, list[list[str]]], stats: collections.Counter[str], spanish_texts: list[str]
) -> list[_Pair]:
    """Align one book chapter by chapter; also collects its Spanish verse texts."""
    pairs: list[_Pair] = []
    for chapter_index in range(len(chapters["kjv"])):
        chapter = chapter_index + 1
        texts: dict[str, dict[int, str]] = {}
        raws: dict[str, dict[int, str]] = {}
        for role in ("es", "web", "kjv"):
            verses = chapters[role][chapter_index] if chapter_index < len(chapters[role]) else []
            texts[role], raws[role] = {}, {}
            for verse, raw in enumerate(verses, start=1):
                text = _verse_text(book, chapter, verse, raw, role=role)
                if text:  # verses a translation omits or moved elsewhere are empty slots
                    texts[role][verse], raws[role][verse] = text, raw
        if book in _SUBSCRIBED_BOOKS and chapter == len(chapters["es"]) and texts["es"]:
            last = max(texts["es"])
            texts["es"][last] = _SUBSCRIPTION.sub(r"\1", texts["es"][last])
        spanish_texts.extend(texts["es"].values())
        es_pairs = align_chapter(
            [AlignedVerse(v, collections.Counter(strongs_numbers(raws["es"][v]))) for v in texts["es"]],
            [AlignedVerse(v, collections.Counter(strongs_numbers(raws["kjv"][v]))) for v in texts["kjv"]],
            min_similarity=ES_MIN_SIMILARITY,
            same_number_bonus=ES_SAME_NUMBER_BONUS,
        )
        en_pairs = kjv_web_pairs(texts["kjv"], texts["web"])
        web_of_kjv = dict(en_pairs)
        for es_verse, kjv_verse in es_pairs:
            web_verse = web_of_kjv.get(kjv_verse)
            if web_verse is None:
                stats["es_kjv_pairs_without_web"] += 1
                continue
            stats["shifted_es"] += es_verse != kjv_verse
            stats["shifted_web"] += web_verse != kjv_verse
            pairs.append(
                _Pair(
                    book,
                    chapter,
                    kjv_verse,
                    es_verse,
                    web_verse,
                    texts["es"][es_verse],
                    texts["web"][web_verse],
                    texts["kjv"][kjv_verse],
                )
            )
        for role in ("es", "web", "kjv"):
            stats[f"{role}_verses"] += len(texts[role])
        stats["es_kjv_pairs"] += len(es_pairs)
        stats["kjv_web_pairs"] += len(en_pairs)
    return pairs


def _average_words(records: Sequence[dict[str, Any]], lang: str) -> float:
    if not records:
        return 0.0
    return round(sum(len(record["translation"][lang].split()) for record in records) / len(records), 2)


def _write_atomic(path: Path, content: str) -> None:
    """Write via a temporary file so an interrupted build never leaves a complete-looking file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(content, encoding="utf-8")
    os.replace(partial, path)


def _jsonl(records: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def _sources_meta(path: Path) -> dict[str, Any]:
    sources = {}
    for edition in EDITIONS:
        conf = _module_conf(path, edition.module) or {}
        sources[edition.role] = {
            "title": edition.title,
            "language": edition.language,
            "sword_module": edition.module,
            "module_version": conf.get("version"),
            "debian_package": edition.package,
            "license": conf.get("distributionlicense", "Public Domain"),
        }
    return sources


def _select_books(books: Sequence[str] | None) -> list[str]:
    if books is None:
        return list(BIBLE_BOOKS)
    unknown = [book for book in books if book not in BIBLE_BOOKS]
    if unknown:
        raise ValueError(f"unknown book names {unknown}; use OSIS names such as {list(BIBLE_BOOKS[:3])}")
    wanted = set(books)
    return [book for book in BIBLE_BOOKS if book in wanted]


def build_bible_corpus(
    output_dir: str | os.PathLike[str],
    *,
    force: bool = False,
    books: Sequence[str] | None = None,
    sword_path: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the es-en Bible corpus into ``output_dir`` and return its metadata.

    Writes ``train.jsonl`` (the "30K" condition), ``train_10k.jsonl`` (a fixed 10,000-pair
    sample of train, the "10K" condition), ``train_5k.jsonl`` (5,000 pairs of train_10k, the "5K"
    condition), ``valid.jsonl``, ``test.jsonl`` and ``meta.json``.
    Each line is ``{"id": "Gen.1.1", "translation": {"es": ..., "en": <WEB>}, "references":
    {"en": [<WEB>, <KJV>]}}``.  Chapters are assigned to splits by a SHA-1 hash of their
    reference (5% test, 3% valid), and test/valid pairs whose Spanish sentence also occurs in
    train are dropped.  The output is byte-identical across runs.

    ``books`` restricts the build to some OSIS book names (for quick tests).  An existing build
    of the same books is reused unless ``force``.
    """
    output = Path(output_dir)
    selected = _select_books(books)
    if not force and all((output / name).is_file() for name in OUTPUT_FILES):
        reason = _reuse_problem(output, selected)
        if reason is None:
            return read_meta(output)
        print(f"Rebuilding the corpus in {output}: {reason}.", file=sys.stderr)

    path = ensure_sword_modules(sword_path)
    bibles = _open_bibles(path)
    stats: collections.Counter[str] = collections.Counter()
    pairs: list[_Pair] = []
    spanish_texts: list[str] = []
    from tqdm.auto import tqdm

    for book in tqdm(selected, desc="Aligning Bible books", unit="book", disable=not progress):
        chapters = {role: _read_book(bible, book) for role, bible in bibles.items()}
        pairs.extend(_align_book(book, chapters, stats, spanish_texts))

    # Settle the Spanish word boundaries first, then restore the case of the opening words of
    # chapters (and of a few sections, such as Luke 1:5), which the Spanish module prints in capitals.
    joiner = WordJoiner.from_texts(spanish_texts, suffixes=SPANISH_CLITICS)
    case_model = CaseModel.from_texts(joiner.resolve(text) for text in spanish_texts)
    for pair in pairs:
        pair.es = case_model.restore(joiner.resolve(pair.es))

    records = [pair.record() for pair in pairs]
    outputs, split_meta = split_records(records, SRC_LANG, TGT_LANG)
    meta = {
        "name": "bible-es-en",
        "format_version": FORMAT_VERSION,
        "language_pair": {"source": SRC_LANG, "target": TGT_LANG},
        "license": "public domain",
        "sources": _sources_meta(path),
        "books": selected,
        **split_meta,
        "alignment": {
            "verses": {role: stats[f"{role}_verses"] for role in ("es", "web", "kjv")},
            "es_kjv_pairs": stats["es_kjv_pairs"],
            "kjv_web_pairs": stats["kjv_web_pairs"],
            "es_kjv_pairs_without_web": stats["es_kjv_pairs_without_web"],
            "pairs_with_shifted_es_number": stats["shifted_es"],
            "pairs_with_shifted_web_number": stats["shifted_web"],
        },
    }
    return write_corpus(output, outputs, meta)


def split_records(
    records: list[dict[str, Any]], src_lang: str, tgt_lang: str
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The Bible corpora's splits of ``records`` (ids ``Book.Chapter.Verse``) and what ``meta.json`` says of
    them: chapters assigned by hash (the same chapters in every pair), valid/test pairs whose source occurs
    in train dropped, and the `SUBSETS` (``train_10k`` from train, ``train_5k`` from train_10k) drawn by a
    hash of the id."""
    splits = split_by_chapter(records, test_fraction=TEST_FRACTION, valid_fraction=VALID_FRACTION)
    dropped = {}
    for name in ("valid", "test"):
        splits[name], removed = drop_seen_sources(splits[name], splits["train"], src_lang=src_lang)
        dropped[name] = len(removed)
    outputs = dict(splits)
    for subset in SUBSETS:
        outputs[subset.name] = stable_subset(outputs[subset.parent], subset.size, salt=subset.name)
    meta = {
        "splits": {
            name: {
                "pairs": len(outputs[name]),
                "avg_words": {lang: _average_words(outputs[name], lang) for lang in (src_lang, tgt_lang)},
            }
            for name in (*SPLIT_NAMES, *(subset.name for subset in SUBSETS))
        },
        "total_pairs": sum(len(splits[name]) for name in SPLIT_NAMES),
        "split_rule": (
            f"sha1 of 'Book.Chapter' mapped to [0, 1): < {TEST_FRACTION} test, "
            f"< {TEST_FRACTION + VALID_FRACTION} valid, else train; valid/test pairs whose source "
            "also occurs in train are dropped; "
            + "; ".join(f"{s.name} ranks {s.parent} by sha1('{s.name}:' + id)" for s in SUBSETS)
        ),
        "dropped_as_seen_in_train": dropped,
    }
    return outputs, meta


def write_corpus(output: Path, outputs: dict[str, list[dict[str, Any]]], meta: dict[str, Any]) -> dict[str, Any]:
    """Write the splits (`CORPUS_SPLITS`) and ``meta.json`` (with each file's line count and sha256) atomically."""
    output.mkdir(parents=True, exist_ok=True)
    meta["files"] = {}
    for name in CORPUS_SPLITS:
        content = _jsonl(outputs[name])
        _write_atomic(output / f"{name}.jsonl", content)
        meta["files"][f"{name}.jsonl"] = fingerprint_bytes(content.encode("utf-8"))
    _write_atomic(output / "meta.json", json.dumps(meta, ensure_ascii=False, indent=2) + "\n")
    return meta


def _reuse_problem(output: Path, selected: list[str], name: str = "bible-es-en") -> str | None:
    """Why the corpus in ``output`` cannot be reused as is (None when it can): other books or format,
    damaged metadata, or a file that no longer matches the line count and hash recorded for it."""
    try:
        existing = read_meta(output)
    except ValueError as error:
        return str(error)
    if existing.get("books") != selected or existing.get("format_version") != FORMAT_VERSION:
        return "it was built with other books or an older format"
    if existing.get("name", name) != name:
        return f"it is the {existing['name']} corpus"
    files = existing.get("files")
    if not isinstance(files, dict) or set(files) != {name for name in OUTPUT_FILES if name != "meta.json"}:
        return "its meta.json records no file fingerprints (built by an older version)"
    for name, recorded in files.items():
        mismatch = fingerprint_mismatch(output / name, recorded)
        if mismatch:
            return mismatch
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hf_graphtf.data.bible",
        description="Build the Spanish-English Bible corpus (RV1909 / WEB, KJV as second reference).",
    )
    parser.add_argument("--out", default="data/bible-es-en", help="output directory (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the output exists")
    parser.add_argument("--books", help="comma-separated OSIS book names to build, e.g. Gen,Ruth (default: all)")
    parser.add_argument("--sword-path", help="SWORD library (default: $SWORD_PATH or /usr/share/sword)")
    args = parser.parse_args(argv)
    books = [book.strip() for book in args.books.split(",") if book.strip()] if args.books else None
    start = time.perf_counter()
    try:
        meta = build_bible_corpus(args.out, force=args.force, books=books, sword_path=args.sword_path)
    except SwordModulesMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - start
    for name, split in meta["splits"].items():
        words = split["avg_words"]
        print(f"{name:>9}: {split['pairs']:6d} pairs, avg words es {words['es']:.1f} / en {words['en']:.1f}")
    print(f"wrote {args.out} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
