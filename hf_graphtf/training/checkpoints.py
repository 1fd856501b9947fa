"""Checkpoints a crash cannot corrupt, and the choice of the one to resume from.

The Trainer writes ``checkpoint-N/`` file by file: a run killed in the middle leaves a folder with the
weights but no ``trainer_state.json`` (or only the modeling code), and ``get_last_checkpoint`` then
picks that folder on every later run, which fails until someone deletes it by hand. Here a checkpoint
is written under ``output_dir/.checkpoint-staging/`` and renamed into place once every process has
written its part, so a folder named ``checkpoint-N`` is always whole; and resuming takes the newest
checkpoint that passes `checkpoint_problem`, naming the ones it skips (written by older versions, or
damaged on disk afterwards).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.utils import ADAPTER_CONFIG_NAME, ADAPTER_SAFE_WEIGHTS_NAME

from ..model_files import safetensors_problem, weights_problem
from .adapters import EXTRA_PARAMETERS_FILE

STAGING_DIR = ".checkpoint-staging"
TRAINER_STATE_FILE = "trainer_state.json"
_CHECKPOINT_NAME = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step number in a ``checkpoint-N`` folder name, None for any other name."""
    match = _CHECKPOINT_NAME.match(Path(path).name)
    return int(match.group(1)) if match else None


def callback_attributes(checkpoint: str | None, callback: str) -> dict:
    """The attributes a checkpoint's ``trainer_state.json`` stores for a stateful callback, by class name
    (empty for no checkpoint, no state file, or a state written without that callback)."""
    if checkpoint is None:
        return {}
    path = os.path.join(checkpoint, TRAINER_STATE_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        stored = json.load(handle).get("stateful_callbacks", {}).get(callback, {})
    if isinstance(stored, list):
        stored = stored[0] if stored else {}
    return stored.get("attributes") or {}


def checkpoint_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be resumed from (a short phrase), or None when it is a whole checkpoint.

    Whole means: a readable ``trainer_state.json`` (written last by the Trainer), the model config,
    and weight files that are all present and not cut short.
    """
    folder = Path(path)
    state_file = folder / TRAINER_STATE_FILE
    if not state_file.is_file():
        return f"no {TRAINER_STATE_FILE} (interrupted while being written)"
    try:
        json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"unreadable {TRAINER_STATE_FILE} ({error})"
    if not (folder / "config.json").is_file():
        return "no config.json"
    if (folder / ADAPTER_CONFIG_NAME).is_file():  # a LoRA run's: the adapter, and the gates trained beside it
        return _adapter_problem(folder)
    return weights_problem(folder)


def _adapter_problem(folder: Path) -> str | None:
    """What a LoRA run's checkpoint lacks: the adapter's weights, or the learned link gates its model has."""
    adapter = folder / ADAPTER_SAFE_WEIGHTS_NAME
    if not adapter.is_file():
        return f"no {ADAPTER_SAFE_WEIGHTS_NAME}"
    problem = safetensors_problem(adapter)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"unreadable config.json ({error})"
    gates = folder / EXTRA_PARAMETERS_FILE
    if problem is None and config.get("attention_link_gate") == "learned":
        problem = (
            safetensors_problem(gates) if gates.is_file() else f"no {EXTRA_PARAMETERS_FILE} (the learned link gates)"
        )
    return problem


def newest_complete_checkpoint(output_dir: str | os.PathLike[str]) -> tuple[str | None, list[tuple[str, str]]]:
    """The newest whole ``checkpoint-N`` in ``output_dir`` and the newer ones skipped, with the reason."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None, []
    found = sorted(
        (
            (checkpoint_step(path), path)
            for path in folder.iterdir()
            if path.is_dir() and checkpoint_step(path) is not None
        ),
        reverse=True,
    )
    skipped = []
    for _, path in found:
        problem = checkpoint_problem(path)
        if problem is None:
            return str(path), skipped
        skipped.append((str(path), problem))
    return None, skipped


def staging_path(run_dir: str | os.PathLike[str], step: int) -> tuple[str, str]:
    """Where the checkpoint of ``step`` is written, and where it is renamed to when complete."""
    name = f"{PREFIX_CHECKPOINT_DIR}-{step}"
    return os.path.join(run_dir, STAGING_DIR, name), os.path.join(run_dir, name)


def publish_checkpoint(staged: str, final: str) -> None:
    """Move a fully written checkpoint into place; one already there (the same step saved again after
    a resume) is replaced, and a whole checkpoint exists at every moment in between."""
    if os.path.exists(final):
        replaced = final + ".replaced"
        shutil.rmtree(replaced, ignore_errors=True)
        os.replace(final, replaced)
        os.replace(staged, final)
        shutil.rmtree(replaced, ignore_errors=True)
    else:
        os.replace(staged, final)
    staging = os.path.dirname(staged)
    if not os.listdir(staging):
        os.rmdir(staging)


def remove_staging(run_dir: str | os.PathLike[str]) -> list[str]:
    """Delete checkpoints left half-written by an interrupted save; returns what was removed."""
    staging = Path(run_dir) / STAGING_DIR
    if not staging.is_dir():
        return []
    removed = sorted(str(path) for path in staging.iterdir())
    shutil.rmtree(staging)
    return removed


def remove_checkpoints(run_dir: str | os.PathLike[str]) -> list[str]:
    """Delete every ``checkpoint-N`` (and the staging area) of ``run_dir``, for a run that starts over."""
    folder = Path(run_dir)
    removed = remove_staging(folder) if folder.is_dir() else []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.is_dir() and checkpoint_step(path) is not None:
            shutil.rmtree(path)
            removed.append(str(path))
    return removed


__all__ = [
    "STAGING_DIR",
    "checkpoint_problem",
    "checkpoint_step",
    "newest_complete_checkpoint",
    "publish_checkpoint",
    "remove_checkpoints",
    "remove_staging",
    "staging_path",
]
