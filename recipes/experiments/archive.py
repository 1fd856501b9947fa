"""What the report needs from each finished run, kept in the repository beside the results file.

A run's output folder (model, checkpoints, translations, training log) is too large for git and stays
on the machine that trained it, but the report needs two things from it: the test translations, for
the paired bootstrap test against vanilla, and the training log, for the learning curves. Without
them a checkout elsewhere could not redraw the tables it ships. So every finished run also leaves
``<archive>/<run>/test_predictions.txt.gz`` (about 40 KB for the Bible test split) and
``<archive>/<run>/log_history.json`` (the Trainer's log: losses, learning rates, validation scores
by step). The report reads the archive first and the output folder second.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

HYPOTHESES = "test_predictions.txt.gz"
LOG_HISTORY = "log_history.json"
OUTPUT_HYPOTHESES = "test_predictions.txt"
OUTPUT_TRAINER_STATE = "trainer_state.json"


def _write_atomically(path: Path, data: bytes) -> None:
    """Write through a temporary file so an interrupted write never leaves half a file under ``path``."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def can_archive(output_dir: Path) -> bool:
    """Whether ``output_dir`` holds a finished run's translations and training log."""
    return (output_dir / OUTPUT_HYPOTHESES).is_file() and (output_dir / OUTPUT_TRAINER_STATE).is_file()


def archive_run(output_dir: Path, folder: Path) -> Path:
    """Copy a finished run's test translations (gzip) and training log from ``output_dir`` to ``folder``.

    The gzip stream carries no time stamp or file name, so archiving the same translations twice gives
    the same bytes (a restored run shows no diff when it reproduces its original)."""
    translations = (output_dir / OUTPUT_HYPOTHESES).read_bytes()
    state = json.loads((output_dir / OUTPUT_TRAINER_STATE).read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomically(folder / HYPOTHESES, gzip.compress(translations, compresslevel=9, mtime=0))
    _write_atomically(folder / LOG_HISTORY, (json.dumps(state["log_history"], indent=1) + "\n").encode("utf-8"))
    return folder


def is_archived(folder: Path) -> bool:
    return (folder / HYPOTHESES).is_file() and (folder / LOG_HISTORY).is_file()


def read_hypotheses(folder: Path, output_dir: Path) -> list[str] | None:
    """A run's test translations from its archive ``folder``, else from its ``output_dir``; None if neither."""
    if (folder / HYPOTHESES).is_file():
        return gzip.decompress((folder / HYPOTHESES).read_bytes()).decode("utf-8").splitlines()
    if (output_dir / OUTPUT_HYPOTHESES).is_file():
        return (output_dir / OUTPUT_HYPOTHESES).read_text(encoding="utf-8").splitlines()
    return None


def read_log_history(folder: Path, output_dir: Path) -> list[dict[str, Any]] | None:
    """A run's training log from its archive ``folder``, else from its ``output_dir``; None if neither."""
    if (folder / LOG_HISTORY).is_file():
        return json.loads((folder / LOG_HISTORY).read_text(encoding="utf-8"))
    if (output_dir / OUTPUT_TRAINER_STATE).is_file():
        return json.loads((output_dir / OUTPUT_TRAINER_STATE).read_text(encoding="utf-8"))["log_history"]
    return None
