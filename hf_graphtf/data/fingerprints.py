"""Line counts and content hashes of corpus files, recorded in ``meta.json`` and checked on use.

A corpus folder is reused across runs; a file cut short by a full disk or edited by hand would
otherwise be trained on and reported as whole. `build-corpus` records each file's fingerprint;
`build-corpus` rebuilds a folder whose files no longer match, and loading a split from such a
folder refuses the changed file by name.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

META_FILE = "meta.json"

__all__ = ["META_FILE", "fingerprint", "fingerprint_bytes", "fingerprint_mismatch", "read_meta"]


def fingerprint_bytes(data: bytes) -> dict[str, Any]:
    """``{"lines": ..., "sha256": ...}`` of a file's content."""
    return {"lines": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest()}


def fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The fingerprint of the file at ``path``."""
    return fingerprint_bytes(Path(path).read_bytes())


def fingerprint_mismatch(path: str | os.PathLike[str], recorded: dict[str, Any]) -> str | None:
    """How the file differs from its recorded fingerprint (a phrase naming it), or None."""
    path = Path(path)
    if not path.is_file():
        return f"{path} is missing"
    actual = fingerprint(path)
    if actual["lines"] != recorded.get("lines"):
        return f"{path} has {actual['lines']} lines, {META_FILE} records {recorded.get('lines')}"
    if actual["sha256"] != recorded.get("sha256"):
        return f"{path} has other content than {META_FILE} records (sha256 differs)"
    return None


def read_meta(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``directory/meta.json`` as a dict; a ValueError naming the file when it is not readable JSON."""
    path = Path(directory) / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: damaged corpus metadata ({error})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: damaged corpus metadata (not a JSON object)")
    return meta
