"""A finished run's record: one JSON line of a grid's results file, read as a typed `Row`.

Rows are appended as runs finish and never rewritten, so a results file holds rows of every version
the runner has written. `Row.from_json` reads any of them and upgrades an older one in this one place:
what a version did not record reads as None (and the report says "–"), or as the value that was the
only one at the time (``attn_implementation``: sdpa).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

#: the version of the rows the runner writes now. Version 1 (rows without a ``version``): the rows written
#: before rows said it; the fields added while it lasted (``resumed_from_step``, the converged protocol's
#: ``stop_reason``, ``best_step``, ``train_minutes``, ``precision``, the tuning's ``tuning``,
#: ``attn_implementation``) are absent from the rows before them. Version 2: every field, and the version.
ROW_VERSION = 2


@dataclass(frozen=True)
class Row:
    """One finished run of a grid: what ran, on what, how fast, and its validation and test scores.

    ``valid`` and ``test`` are the score records as sacreBLEU and the training script give them
    (``test``: ``bleu``, ``chrf``, ``chrf_pp``, ``bleu_tokenized``, their signatures, ``bleu_by_length``,
    ``repeated_token_outputs``); ``provenance`` is the commit, packages, corpus hashes and CPU record.
    """

    run: str
    grid: str
    variant: str
    size: str
    seed: int
    recipe: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    steps: int | None = None
    epochs: float | None = None
    wall_seconds: float | None = None
    target_tokens_per_second: float | None = None
    parameters: int | None = None
    valid: dict[str, Any] = field(default_factory=dict)
    test: dict[str, Any] = field(default_factory=dict)
    output_dir: str | None = None
    hypotheses: str | None = None
    provenance: dict[str, Any] | None = None
    finished: str | None = None
    #: at most this many runs shared the device (``--jobs``)
    concurrent_runs: int = 1
    cpu_seconds: float | None = None
    cores_used: float | None = None
    train_seconds: float | None = None
    resumed_from_step: int | None = None
    #: a tuning run's ``{"field": ..., "value": ...}``
    tuning: dict[str, Any] | None = None
    #: why training stopped (``validation plateau``, ``step cap``, ...), its best checkpoint's step and its
    #: training minutes over every sitting: rows of the converged protocol
    stop_reason: str | None = None
    best_step: int | None = None
    train_minutes: float | None = None
    precision: str | None = None
    attn_implementation: str = "sdpa"
    version: int = ROW_VERSION

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        """A row of any version, upgraded; a key no version writes is an error naming it."""
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"run {data.get('run')!r}: unknown fields {unknown} (a newer runner's row?)")
        data = {**data, "version": data.get("version", 1)}
        if data.get("attn_implementation") is None:
            data.pop("attn_implementation", None)  # before it was recorded: sdpa, the only default then
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        """The row as its results-file line holds it (this version's)."""
        return {**asdict(self), "version": ROW_VERSION}


#: a grid's rows by (variant, size), each list in seed order (`Grid.rows_by_cell`)
RowsByCell = dict[tuple[str, str], list[Row]]


def read_results(path: Path) -> list[Row]:
    """The rows of a results file (JSON lines); a damaged line is an error naming the file and line."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(Row.from_json(json.loads(line)))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: not a JSON object ({error.msg})") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}, line {number}: {error}") from None
    return rows
