"""One training run per output folder (`folder_lock`): a run holds its folder for as long as it lives.

The main process of a run (rank 0; the other ranks write nothing of their own) holds ``<output_dir>/.run.lock``
before it reads or removes any checkpoint; a second run started on the folder is refused, and a folder left
by a run that died is taken over by the next run, which resumes from its checkpoints.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..folder_lock import FolderInUseError, hold_folder

LOCK_FILE = ".run.lock"


@contextlib.contextmanager
def hold_output_folder(output_dir: str | os.PathLike[str], *, main_process: bool = True) -> Iterator[None]:
    """Hold ``output_dir`` for the duration of the block; refuse with `FolderInUseError` if a live run holds
    it. Only the main process takes the lock (``main_process``); the others pass through."""
    if not main_process:
        yield
        return

    def refusal(holder: str) -> str:
        return (
            f"{Path(output_dir)} is in use by another training run ({holder}); "
            "wait for it to end or choose another output_dir"
        )

    with hold_folder(output_dir, LOCK_FILE, refusal):
        yield


__all__ = ["LOCK_FILE", "FolderInUseError", "hold_output_folder"]
