"""Which float precision a run trains in: ``precision: auto | fp32 | bf16``.

bf16 autocast speeds a CPU run up only where the CPU has bf16 instructions (``avx512_bf16`` or AMX);
on an AVX2-only CPU torch emulates bf16 and a training step ran many times slower than fp32
(recipes/benchmarks/RESULTS.md, "Attention path under bf16"), so ``auto`` takes fp32 there and an explicit
``bf16`` is warned about. The
hosts this project trains on come in several kinds under one CPU model name, so ``auto`` decides on
the machine the run starts on, and the run records what it chose (results.json, the grid's rows): a
bf16 run and an fp32 run are different runs, whatever their recipe says.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..machine import BF16_CPU_FLAGS, cpu_flags, cpu_has_bf16

PRECISIONS = ("auto", "fp32", "bf16")

#: The attention kernel a bf16 run on a CPU of each kind trains fastest with, at equal loss, as measured
#: interleaved in one process (`recipes/benchmarks/speed_flags.py --modes fp32,bf16,bf16-eager --dropout 0.4`;
#: recipes/benchmarks/RESULTS.md, "Attention path under bf16"). SDPA's CPU flash-attention backward takes
#: much of bf16's gain away on both kinds measured, for the graph variants' own models too (`speed_flags.py
#: --recipe`). A run keeps the kernel it started with when it resumes (`training.resume.keep_attention`),
#: whatever this table says by then. On a CPU without bf16 instructions fp32 with eager attention measured no
#: faster than with sdpa, so sdpa stays the fp32 kernel.
BF16_CPU_ATTENTION = {"amx_bf16": "eager", "avx512_bf16": "eager"}


class EmulatedPrecisionWarning(UserWarning):
    """bf16 was asked for on a CPU that has no bf16 instructions: it trains, many times slower than fp32."""


ATTENTION_CHOICES = ("auto", "sdpa", "eager")


def cpu_kind(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The key of `BF16_CPU_ATTENTION` this CPU falls under (AMX first), None without bf16 instructions."""
    flags = cpu_flags(cpuinfo)
    return next((kind for kind in BF16_CPU_ATTENTION if kind in flags), None)


def resolve_attention(
    requested: str,
    precision: str,
    on_cpu: bool,
    cpuinfo: Path = Path("/proc/cpuinfo"),
    attention_link: str = "none",
) -> str:
    """``sdpa`` or ``eager``: ``auto`` takes the measured fastest for a bf16 run on this kind of CPU
    (`BF16_CPU_ATTENTION`) and sdpa everywhere else; an explicit choice is kept. The run records it.

    A linked model (``attention_link`` not ``none``) keeps sdpa: on a CPU its sdpa path already sums
    materialised scores and never reaches the flash backward that eager avoids, so eager measured no faster
    (`speed_flags.py --attention-link both`), and the link's converged runs before this measurement trained
    with sdpa."""
    if requested not in ATTENTION_CHOICES:
        raise ValueError(f"attn_implementation must be one of {ATTENTION_CHOICES}; got {requested!r}.")
    if requested != "auto":
        return requested
    if precision == "bf16" and on_cpu and attention_link == "none":
        return BF16_CPU_ATTENTION.get(cpu_kind(cpuinfo) or "", "sdpa")
    return "sdpa"


def resolve_precision(requested: str, use_cpu: bool, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``fp32`` or ``bf16``: ``auto`` becomes bf16 on a GPU that supports it or a CPU with bf16
    instructions, fp32 elsewhere; an explicit choice is kept, with an `EmulatedPrecisionWarning` for bf16
    on a CPU whose flags show no bf16 instructions (where the flags cannot be read nothing is said)."""
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}; got {requested!r}.")
    flags = cpu_flags(cpuinfo) if requested == "bf16" and use_cpu else set()
    if flags and not flags & set(BF16_CPU_FLAGS):
        warnings.warn(
            f"precision 'bf16' on a CPU without bf16 instructions ({'/'.join(BF16_CPU_FLAGS)}): torch emulates "
            "it, many times slower than fp32 (recipes/benchmarks/RESULTS.md, 'Attention path under bf16'). "
            "Set precision 'auto' or 'fp32' unless bf16 is what you mean to measure.",
            EmulatedPrecisionWarning,
            stacklevel=3,
        )
    if requested != "auto":
        return requested
    import torch

    if not use_cpu and torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_bf16(cpuinfo) else "fp32"


__all__ = [
    "ATTENTION_CHOICES",
    "BF16_CPU_ATTENTION",
    "BF16_CPU_FLAGS",
    "EmulatedPrecisionWarning",
    "PRECISIONS",
    "cpu_flags",
    "cpu_has_bf16",
    "cpu_kind",
    "resolve_attention",
    "resolve_precision",
]
