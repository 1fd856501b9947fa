"""One encoding policy for every text file the package reads: UTF-8, with a byte-order mark dropped.

A UTF-8 BOM (what Windows editors put at the start of a file) otherwise stays glued to the first
sentence: a TSV header ``es<TAB>en`` stops being recognised and becomes a training pair, and a
reference file loses BLEU without a warning. Any other encoding (Latin-1, UTF-16) is refused with
the file name and the byte offset of the first invalid byte, never decoded by guesswork.
"""

from __future__ import annotations

import codecs
import os
import sys

from ..errors import UserError

__all__ = ["TextEncodingError", "decode_text", "read_text", "read_text_lines"]


class TextEncodingError(UserError, ValueError):
    """A text file that is not UTF-8; the message names the file and the byte offset."""


def decode_text(data: bytes, name: str) -> str:
    """``data`` decoded as UTF-8 without a leading BOM; ``name`` (a path) goes into the error."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        offset = len(codecs.BOM_UTF8)
    else:
        offset = 0
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        position = error.start + offset
        line = data.count(b"\n", 0, error.start) + 1
        raise TextEncodingError(
            f"{name}: not UTF-8 text (byte offset {position}, line {line}: {data[error.start : error.start + 4]!r}); "
            "convert it, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole file as text under the package's encoding policy (``-`` reads standard input)."""
    if os.fspath(path) == "-":
        if hasattr(sys.stdin, "buffer"):
            return decode_text(sys.stdin.buffer.read(), "<stdin>")
        return sys.stdin.read().removeprefix("\ufeff")  # a text stream (already decoded), as in tests
    with open(path, "rb") as handle:
        return decode_text(handle.read(), os.fspath(path))


def read_text_lines(path: str | os.PathLike[str]) -> list[str]:
    """Lines without terminators (``\\n`` or ``\\r\\n``); a final newline adds no empty line."""
    lines = read_text(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
