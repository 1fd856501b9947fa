"""One training run per output folder: a run holds its folder for as long as it lives.

Two runs writing the same checkpoints would leave a corrupted or mixed run, with both exiting 0. The main
process of a run (rank 0; the other ranks write nothing of their own) takes an exclusive `flock` on
``<output_dir>/.run.lock`` before it reads or removes any checkpoint, and a second run started on the
folder is refused in one line that names the folder and the run holding it. The operating system drops
the lock when the holding process ends, however it ends, so a folder left by a run that died is taken
over by the next run (which resumes from its checkpoints), with no stale lock to clear by hand.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from ..errors import UserError

LOCK_FILE = ".run.lock"

try:
    import fcntl
except ImportError:  # not a POSIX system: runs are not guarded
    fcntl = None


class FolderInUseError(UserError, RuntimeError):
    """Another live training run holds the output folder."""


def _holder(lock_path: Path) -> str:
    try:
        record = json.loads(lock_path.read_text(encoding="utf-8"))
        return f"pid {record['pid']} on {record['host']}, since {record['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet said who it is"


@contextlib.contextmanager
def hold_output_folder(output_dir: str | os.PathLike[str], *, main_process: bool = True) -> Iterator[None]:
    """Hold ``output_dir`` for the duration of the block; refuse with `FolderInUseError` if a live run holds
    it. Only the main process takes the lock (``main_process``); the others pass through."""
    if not main_process or fcntl is None:
        yield
        return
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    lock_path = folder / LOCK_FILE
    handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the whole run
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderInUseError(
                f"{folder} is in use by another training run ({_holder(lock_path)}); "
                "wait for it to end or choose another output_dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}))
        handle.flush()
        yield
    finally:
        handle.close()  # releases the lock


__all__ = ["LOCK_FILE", "FolderInUseError", "hold_output_folder"]
