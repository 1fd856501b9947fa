"""The machine a figure came from, as the benchmark reports and the experiment rows record it.

CPU float sums come out differently on different vector kernels, so a speed table or a training run
is comparable (or reproducible bit for bit) only on the same kind of CPU: both name it the same way.
"""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
