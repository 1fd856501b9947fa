"""One writer per folder: a process holds a folder for as long as it writes there.

Two processes writing the same files (two training runs on one output folder, two exports of one model in
one format) would leave a corrupted or mixed result, with both exiting 0. The writer takes an exclusive
`flock` on a lock file in the folder before it reads or removes anything there, and a second writer is
refused in one line that names the folder and the process holding it. The operating system drops the lock
when the holder ends, however it ends, so a folder left by a writer that died is taken over by the next,
with no stale lock to clear by hand.

A holder that ends normally removes the lock file, which names its host: a folder uploaded whole (a model
folder to the Hub) then carries none.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from .errors import UserError

try:
    import fcntl
except ImportError:  # not a POSIX system: folders are not guarded
    fcntl = None


class FolderInUseError(UserError, RuntimeError):
    """Another live process holds the folder."""


def _holder(lock_path: Path) -> str:
    try:
        record = json.loads(lock_path.read_text(encoding="utf-8"))
        return f"pid {record['pid']} on {record['host']}, since {record['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet said who it is"


@contextlib.contextmanager
def hold_folder(folder: str | os.PathLike[str], lock_file: str, refusal: Callable[[str], str]) -> Iterator[None]:
    """Hold ``folder`` (created if missing) through ``folder/lock_file`` for the duration of the block; where
    a live process holds it, raise `FolderInUseError` with ``refusal(holder)``, the holder described as
    "pid N on HOST, since TIME"."""
    if fcntl is None:
        yield
        return
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock_path = folder / lock_file
    handle = _lock(lock_path, refusal)
    try:
        handle.seek(0)
        handle.truncate()
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started}))
        handle.flush()
        yield
    finally:
        lock_path.unlink(missing_ok=True)  # while still held, so that no other process holds this file
        handle.close()  # releases the lock


def _lock(lock_path: Path, refusal: Callable[[str], str]) -> IO[str]:
    """The lock file, opened and locked; `FolderInUseError` where a live process holds it. A holder removes
    the file as it ends, so a file opened just before that removal may be locked once it is gone: then the
    lock is taken again on the file now at the path."""
    while True:
        handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held open until the block ends
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise FolderInUseError(refusal(_holder(lock_path))) from None
        try:
            if os.stat(lock_path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()


__all__ = ["FolderInUseError", "hold_folder"]
