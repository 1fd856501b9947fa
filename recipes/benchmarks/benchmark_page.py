"""The header (machine, software, date, load) and the Markdown tables of a benchmark's page.

The header says where the numbers came from, because ratios measured on another machine, with other
thread counts or under other load are not comparable; the load average is printed at the start and
the end since a shared machine's neighbours are the largest source of noise.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers

from hf_graphtf.machine import cpu_model


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def package_revision() -> str:
    """The commit of the checkout and the package files changed since (they may change the numbers)."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(root), "diff", "--name-only", "HEAD", "--", "hf_graphtf"], capture_output=True, text=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + (f" + uncommitted changes to {', '.join(changed)}" if changed else "")


@dataclass(frozen=True)
class RunStart:
    """When a run started and how loaded the machine was then (the header is printed at the end)."""

    time: datetime.datetime
    load: str
    clock: float
    revision: str  # read at the start: the code a run imports is the code of its start


def run_start() -> RunStart:
    return RunStart(
        datetime.datetime.now(datetime.timezone.utc), load_average(), time.perf_counter(), package_revision()
    )


def header(title: str, settings: dict[str, object], device: str, start: RunStart, threads: str | None = None) -> str:
    """A Markdown heading and bullet list: date, machine, software, load, then the run's settings.

    ``threads`` replaces this process's torch thread count where the measured code ran at others (child
    processes, or several counts in turn).
    """
    threads = threads or str(torch.get_num_threads())
    machine = f"{cpu_model()}, {os.cpu_count()} logical CPUs, torch threads {threads}"
    if device.startswith("cuda"):
        machine += f"; GPU {torch.cuda.get_device_name(device)}"
    else:
        machine += f", CPU capability {torch.backends.cpu.get_cpu_capability()}"
    lines = [
        f"## {title}",
        "",
        f"- date: {start.time:%Y-%m-%d %H:%M} UTC (run took {time.perf_counter() - start.clock:.0f} s)",
        f"- machine: {machine}",
        f"- software: Python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, hf_graphtf {start.revision}",
        f"- load average (1/5/15 min) at start: {start.load}, at end: {load_average()}",
    ]
    lines += [f"- {key}: {value}" for key, value in settings.items()]
    return "\n".join(lines)


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table with padded columns (readable as plain text too)."""
    cells = [[str(c) for c in columns]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def ratio(value: float, spread: float | None = None) -> str:
    """``0.97x`` or ``0.97x +-0.02``."""
    text = f"{value:.2f}x"
    return text if spread is None else f"{text} ±{spread:.2f}"


def verdict(passed: bool | None) -> str:
    return "" if passed is None else ("PASS" if passed else "MISS")


def megabytes(nbytes: float) -> str:
    return f"{nbytes / 2**20:.0f} MiB"
