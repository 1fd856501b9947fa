"""What ``--engine auto`` decodes with: the model's exported packages, ordered by a rule on what the host has.

Two choices are made, each by what the CPU's flags and vendor say, never by a figure typed in here (the
figures are on the results page, and they move with every release of every runtime):

- **Which dtype**, where ``--dtype`` is left out (or ``auto``) and the model has exported packages: the dtype
  the host computes in hardware comes first, int8 where the CPU has int8 dot products (VNNI, AMX), then bf16
  where it has bf16 ones, then fp32; a dtype the host only emulates comes after fp32. Having built an int8
  export is asking for int8: eager decoding still never takes int8 unasked (`dtype_choice`).
- **Which engine**, for that dtype: aoti first (its package is compiled for this very CPU, and its int8
  scales activations per row, so a line translates alike in any batch), then the runtime made for the CPU's
  vendor (OpenVINO on an Intel CPU, ONNX Runtime elsewhere), then the other.

The line the CLI prints names the choice and the rule's reason (`PackagePick.reason`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..machine import BF16_CPU_FLAGS, cpu_flags
from .dtype_choice import DecodingSetup, canonical_dtype, resolve_translation_dtype

#: the x86 flags of int8 dot-product instructions (VNNI in AVX-512 or AVX, AMX's int8 tiles)
INT8_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
#: the dtypes the host may compute in hardware, each with the flags that say it does (fp32: every CPU)
_HARDWARE_FLAGS = {"int8": INT8_CPU_FLAGS, "bf16": BF16_CPU_FLAGS}
#: the engine each CPU vendor's own runtime is, where it has one
_VENDOR_ENGINE = {"GenuineIntel": "openvino"}


@dataclass(frozen=True)
class Host:
    """What the rule reads of the CPU: its feature flags and its vendor (``GenuineIntel``, ``AuthenticAMD``)."""

    flags: frozenset[str]
    vendor: str

    @classmethod
    def read(cls, cpuinfo: Path = Path("/proc/cpuinfo")) -> Host:
        vendor = ""
        try:
            for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        return cls(frozenset(cpu_flags(cpuinfo)), vendor)

    def computes(self, dtype: str) -> tuple[bool, str]:
        """Whether the CPU computes ``dtype`` in hardware, and the flag that says so (or that none does)."""
        if dtype == "fp32":
            return True, "every CPU"
        wanted = _HARDWARE_FLAGS.get(dtype, ())
        present = sorted(self.flags & set(wanted))
        return (True, present[0]) if present else (False, f"no {'/'.join(wanted) or dtype} on this CPU")


def dtype_order(host: Host, dtypes: list[str]) -> list[str]:
    """``dtypes`` best first: int8, then bf16, where the host computes them in hardware; fp32; then int8 without
    its instructions (slower products, still integer ones), bf16 emulated (many times slower), the rest."""
    native = [dtype for dtype in ("int8", "bf16", "fp32") if dtype in dtypes and host.computes(dtype)[0]]
    rest = [dtype for dtype in ("fp32", "int8", "bf16", *dtypes) if dtype in dtypes and dtype not in native]
    return native + list(dict.fromkeys(rest))


def engine_order(host: Host, engines: list[str]) -> list[str]:
    """``engines`` best first: aoti, then the CPU vendor's own runtime (OpenVINO on Intel), then the others in
    the order they were registered."""
    first = [name for name in ("aoti", _VENDOR_ENGINE.get(host.vendor)) if name in engines]
    return first + [name for name in engines if name not in first]


def engine_reason(host: Host, chosen: str) -> str:
    """Why the rule put ``chosen`` first, in a clause."""
    if chosen == "aoti":
        return "aoti first: compiled for this CPU, its int8 scaled per row"
    vendor = host.vendor or "unknown"
    if _VENDOR_ENGINE.get(host.vendor) == chosen:
        return f"{chosen} first on this {vendor} CPU: its vendor's runtime"
    leads = ", ".join(f"{engine} leads on {owner}" for owner, engine in _VENDOR_ENGINE.items())
    return f"{chosen} first on this {vendor} CPU; {leads}"


@dataclass(frozen=True)
class PackagePick:
    """The dtype to translate in, chosen by the packages the model has, with its engines best first."""

    dtype: str
    engines: tuple[str, ...]
    reason: str


def packages_held(model_dir: str | os.PathLike[str], engine: str, trust_exported: bool) -> dict[str, list[str]]:
    """dtype -> the engines holding a package of the model in it that may run here (a carried package that
    runs code only where trusted); ``engine`` names one engine, or is a chooser (every engine)."""
    from .engines import CHOOSERS, TRANSLATION_ENGINES

    held: dict[str, list[str]] = {}
    if not Path(model_dir).is_dir():
        return held
    names = list(TRANSLATION_ENGINES) if engine in CHOOSERS else [engine]
    for name in names:
        record = TRANSLATION_ENGINES[name]
        if record.holds is None:
            continue
        for dtype in record.dtypes:
            if record.holds(model_dir, dtype, trust_exported):
                held.setdefault(dtype, []).append(name)
    return held


def pick_package(
    model_dir: str | os.PathLike[str],
    engine: str = "auto",
    trust_exported: bool = False,
    cpuinfo: Path = Path("/proc/cpuinfo"),
) -> PackagePick | None:
    """The dtype of the model's best package for this host, or None where it has none (translation then takes
    ``--dtype auto``'s float)."""
    held = packages_held(model_dir, engine, trust_exported)
    if not held:
        return None
    host = Host.read(cpuinfo)
    dtype = dtype_order(host, list(held))[0]
    engines = engine_order(host, held[dtype])
    native, flag = host.computes(dtype)
    why = f"{dtype} first: {flag}" if native and dtype != "fp32" else f"the dtype of its package ({flag})"
    others = sorted(f"{name} {other}" for other, names in held.items() for name in names if other != dtype)
    exports = f"{', '.join(engines[:-1])} and {engines[-1]} exports" if len(engines) > 1 else f"{engines[0]} export"
    reason = f"translating in {dtype}, as the model's {exports} ({why}"
    if len(engines) > 1:
        reason += f"; {engine_reason(host, engines[0])}"
    reason += f"; also there: {', '.join(others)})" if others else ")"
    return PackagePick(dtype, tuple(engines), reason)


def resolve_setup(
    requested: str,
    device: str,
    model_dir: str | os.PathLike[str],
    *,
    engine: str = "auto",
    trust_exported: bool = False,
    compile: str = "off",
    cpuinfo: Path = Path("/proc/cpuinfo"),
) -> DecodingSetup:
    """``--dtype`` resolved once for the model it loads: ``auto`` (or left out) takes the dtype of the model's
    best package for this host where it has one and a package may decode (an exporting or choosing
    ``engine``, on the CPU, not compiled); otherwise `dtype_choice.resolve_translation_dtype` decides."""
    canonical = canonical_dtype(requested)
    if canonical == "auto" and engine != "eager" and compile != "on" and str(device) == "cpu":
        pick = pick_package(model_dir, engine, trust_exported, cpuinfo)
        if pick is not None:
            setup = resolve_translation_dtype(pick.dtype, device, cpuinfo)
            return DecodingSetup(pick.dtype, "auto", pick.reason, emulated=setup.emulated, engines=pick.engines)
    return resolve_translation_dtype(canonical, device, cpuinfo)


__all__ = [
    "INT8_CPU_FLAGS",
    "Host",
    "PackagePick",
    "dtype_order",
    "engine_order",
    "engine_reason",
    "packages_held",
    "pick_package",
    "resolve_setup",
]
