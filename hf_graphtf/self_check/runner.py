"""Running the checks of `hf-graphtf check` (`checks`) over families and option sets: one line each, the
versions and device first, a count last. Tiny models run on one CPU thread."""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable, Iterable
from typing import TextIO

import torch

from ..translation.dtypes import dtype_record, self_checked_names
from .checks import DTYPES, Case, check_cached, check_refused, check_save_load, check_spec, check_vanilla
from .matrix import FAMILIES, OPTION_MATRIX, supports


def versions() -> dict[str, str]:
    """The versions a check ran with, as it prints them."""
    import transformers

    from .. import __version__

    return {
        "hf_graphtf": __version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def device_description(device: str) -> str:
    if device.startswith("cuda"):
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"


def checks_for(case: Case) -> list[tuple[str, Callable[[], str]]]:
    """The named checks of one case: vanilla equivalence for the options-off model, the rest for all; for an
    option set the family does not define, only that its config refuses it."""
    if not supports(case.family, OPTION_MATRIX[case.options]):
        return [("not defined: refused", lambda: check_refused(case))]
    checks: list[tuple[str, Callable[[], str]]] = []
    if not OPTION_MATRIX[case.options]:
        checks.append(("vanilla equivalence", lambda: check_vanilla(case)))
    checks += [
        ("method re-computation", lambda: check_spec(case)),
        ("cached == uncached, greedy", lambda: check_cached(case, num_beams=1)),
        ("cached == uncached, beam 3", lambda: check_cached(case, num_beams=3)),
        ("save/load round trip", lambda: check_save_load(case)),
    ]
    return checks


def run_checks(
    device: str = "cpu",
    dtype: str = "float32",
    families: Iterable[str] | None = None,
    options: Iterable[str] | None = None,
    out: TextIO | None = None,
) -> bool:
    """Run every check for the chosen families and option sets; print one line each (to ``out``, by default
    standard output); True if all pass."""
    out = out or sys.stdout
    dtype = dtype_record(dtype, self_checked_names()).torch_dtype  # fp32 or float32
    families = list(families or FAMILIES)
    options = list(options or OPTION_MATRIX)
    for name, chosen, known in (("family", families, FAMILIES), ("option set", options, OPTION_MATRIX)):
        unknown = [value for value in chosen if value not in known]
        if unknown:
            raise ValueError(f"unknown {name} {', '.join(unknown)}; known: {', '.join(known)}")
    from transformers.utils import logging

    logging.disable_progress_bar()  # the save/load checks' shard and weight bars
    threads = torch.get_num_threads()
    if not device.startswith("cuda"):
        torch.set_num_threads(1)  # tiny models: a second thread only adds synchronisation (3x slower here)
    try:
        return _run(device, dtype, families, options, out)
    finally:
        torch.set_num_threads(threads)


def _run(device: str, dtype: str, families: list[str], options: list[str], out: TextIO) -> bool:
    print(" ".join(f"{name} {value}" for name, value in versions().items()), file=out)
    print(f"device {device_description(device)}, dtype {dtype}", file=out, flush=True)
    started, failures, total = time.perf_counter(), 0, 0
    for family in families:
        for option_set in options:
            case = Case(family, option_set, device, DTYPES[dtype])
            for check_name, check in checks_for(case):
                total += 1
                try:
                    result, detail = "PASS", check()
                except Exception as error:  # any error is a failed check, reported and counted
                    result, detail = "FAIL", f"{type(error).__name__}: {error}"
                    failures += 1
                print(f"{result}  {family:<7} {option_set:<28} {check_name:<27} {detail}", file=out, flush=True)
    seconds = time.perf_counter() - started
    verdict = "all passed" if not failures else f"{failures} FAILED"
    print(f"{total} checks, {verdict}, in {seconds:.1f} s", file=out, flush=True)
    return failures == 0


__all__ = ["checks_for", "device_description", "run_checks", "versions"]
