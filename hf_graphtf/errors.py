"""Errors whose message says all a user needs, and how every entry point reports them.

A missing corpus folder, a malformed TSV line, a damaged model folder, model options that differ from
the checkpoint being resumed, missing SWORD modules: each message names the file, line or field and
what to do. The CLI and the training script print such an error as one ``error:`` line (on the first
process only, under ``accelerate launch``) and exit with status 2, instead of a traceback.

This module travels with saved checkpoints (``trust_remote_code``): it imports nothing.
"""

from __future__ import annotations

import os
import sys

#: the exit status of every entry point for a user error (argparse's, for a bad command line)
USER_ERROR_EXIT = 2


class UserError(Exception):
    """Base of the errors a user can fix from the message alone (mixed into ValueError and friends)."""


def report_user_error(error: BaseException) -> int:
    """Print ``error: <message>`` once (rank 0 of a distributed launch) and return the exit status."""
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"error: {error}", file=sys.stderr, flush=True)
    return USER_ERROR_EXIT


def named_first_line(error: BaseException) -> str:
    """``Type: first line`` of an error whose message runs long (torch's compilers and exporters print traces
    of a hundred lines; the first names the cause); ``Type: Type`` where the message is empty."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else type(error).__name__}"


__all__ = ["USER_ERROR_EXIT", "UserError", "named_first_line", "report_user_error"]
