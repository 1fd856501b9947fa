"""The offline Bible corpora ``hf-graphtf build-corpus --pair`` makes, and the command that builds each.

A module of its own, importing nothing heavy: the command line reads it to offer ``--pair`` (without
loading `datasets` before a translation), and the corpus loader to name the command in its error for a
corpus folder that is not there.
"""

from __future__ import annotations

import os
from pathlib import Path

#: language pair -> the module and function that build its corpus (imported on use: ny-en needs the [ny]
#: extra); the first is the default pair
BIBLE_BUILDERS: dict[str, tuple[str, str]] = {
    "es-en": ("hf_graphtf.data.bible", "build_bible_corpus"),
    "ny-en": ("hf_graphtf.data.bible_ny", "build_bible_ny_corpus"),
}
DEFAULT_BIBLE_PAIR = next(iter(BIBLE_BUILDERS))


def build_corpus_command(path: str | os.PathLike[str], src_lang: str, tgt_lang: str) -> str | None:
    """The command that builds the Bible corpus of ``src_lang``-``tgt_lang`` into ``path`` (``--pair``
    named unless it is the default), or None for a pair the Bible builder does not make."""
    pair = f"{src_lang}-{tgt_lang}"
    if pair not in BIBLE_BUILDERS:
        return None
    option = "" if pair == DEFAULT_BIBLE_PAIR else f" --pair {pair}"
    return f"hf-graphtf build-corpus{option} --output-dir {Path(path).as_posix()}"
