"""The number formats a model translates in (``--dtype``), one record each.

A format says everything that differs between formats: the torch dtype its weights load in, the device types
it runs on, what is done to the model after loading (int8 quantizes its linear layers), whether decoding
compiles, whether the device may only emulate it, whether ``auto`` may pick it, and its one-line description.
Everything that offers or reads a format reads the record: the CLI's ``--dtype`` choices and aliases,
`inference.load_model`, ``evaluate``, ``check``, the benchmarks and the GPU scripts. So a format is one
registration (docs/internals.md, "Adding a translation format"), at the end of this module;
`translation_modes` holds the rule ``auto`` follows and compiled decoding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from ..machine import BF16_CPU_FLAGS, cpu_flags

#: where each format's measured cost and speed are (the section "Fast translation")
RESULTS_PAGE = "recipes/benchmarks/RESULTS.md"


@dataclass(frozen=True)
class TranslationDtype:
    """One format.

    ``torch_dtype`` is the torch dtype's name the weights load in (int8 loads in float32, then
    ``prepare`` quantizes). ``devices`` are the device types it runs on (empty: any). ``native(device, cpuinfo)``
    tells whether a device computes it in hardware (None: it cannot be told), for a format other devices
    only emulate; without it, every device runs the format natively. ``auto_rank`` orders the formats
    ``auto`` may pick (lowest first, the first the device computes natively); None: asked for by name only.
    ``translates`` is False for a format only the self-check uses (fp64)."""

    name: str
    torch_dtype: str
    description: str
    aliases: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    prepare: Callable[[Any], Any] | None = None
    compiles: bool = True
    native: Callable[[str, Path], bool | None] | None = None
    auto_rank: int | None = None
    translates: bool = True
    #: whether ``hf-graphtf check`` runs in it (against its float64 re-computation, to this format's tolerance)
    self_checked: bool = False
    #: said after "translating in <name>" where the format is asked for by name (int8: what it may cost)
    note: str = ""
    #: whether ``hf-graphtf export`` builds packages in it (`exported_models`; CPU, AOTInductor)
    exports: bool = False

    def runs_on(self, device: str) -> bool:
        return not self.devices or str(device).split(":")[0] in self.devices

    def torch(self) -> Any:
        """The torch dtype object (torch is imported only when a model is built)."""
        import torch

        return getattr(torch, self.torch_dtype)


#: the registered formats by name, in registration order
DTYPE_RECORDS: dict[str, TranslationDtype] = {}


def register_dtype(fmt: TranslationDtype) -> TranslationDtype:
    """Add ``fmt`` to `DTYPE_RECORDS`; a name or alias taken already is refused."""
    taken = {name for known in DTYPE_RECORDS.values() for name in (known.name, *known.aliases)}
    clashes = sorted(taken & {fmt.name, *fmt.aliases})
    if clashes:
        raise ValueError(f"translation dtype {', '.join(clashes)} is registered already")
    if fmt.name == "auto" or "auto" in fmt.aliases:
        raise ValueError("'auto' is the choice among dtypes, not a dtype")
    DTYPE_RECORDS[fmt.name] = fmt
    return fmt


def dtype_names(*, translates: bool | None = True) -> tuple[str, ...]:
    """The registered names (the translation formats by default; None: every format, fp64 too)."""
    return tuple(name for name, fmt in DTYPE_RECORDS.items() if translates is None or fmt.translates is translates)


def float_dtype_names() -> tuple[str, ...]:
    """The translation formats whose models load and run as they are (not int8, which quantizes after
    loading): the formats a benchmark or a training-time model is built in."""
    return tuple(name for name in dtype_names() if DTYPE_RECORDS[name].prepare is None)


def auto_candidates() -> list[TranslationDtype]:
    """The formats ``auto`` may take, in its order of preference (``auto_rank``)."""
    ranked = [fmt for fmt in DTYPE_RECORDS.values() if fmt.auto_rank is not None]
    return sorted(ranked, key=lambda fmt: fmt.auto_rank)


def self_checked_names() -> tuple[str, ...]:
    """The formats ``hf-graphtf check --dtype`` takes."""
    return tuple(fmt.name for fmt in DTYPE_RECORDS.values() if fmt.self_checked)


def aliases() -> dict[str, str]:
    """Every other spelling accepted, to the format's name (``bfloat16`` -> ``bf16``)."""
    return {alias: fmt.name for fmt in DTYPE_RECORDS.values() for alias in fmt.aliases}


def canonical_name(name: str, allowed: Sequence[str]) -> str:
    """``name`` in the package's spelling (``bfloat16`` -> ``bf16``); a value outside ``allowed`` is refused,
    naming the choices and their other spellings."""
    allowed = tuple(allowed)
    canonical = aliases().get(name, name)
    if canonical not in allowed:
        spellings = ", ".join(alias for alias, target in aliases().items() if target in allowed)
        raise ValueError(f"dtype must be one of {', '.join(allowed)} (or {spellings}); got {name!r}")
    return canonical


def dtype_record(name: str, allowed: Sequence[str] | None = None) -> TranslationDtype:
    """The format named ``name`` or one of its aliases; a name outside ``allowed`` (by default the translation
    formats) is refused, naming the choices."""
    return DTYPE_RECORDS[canonical_name(name, dtype_names() if allowed is None else allowed)]


class LiveNames(Sequence[str]):
    """A tuple-like view of names read from the registry at each use, so a format registered after import is
    offered too (a tuple made at import would not see it)."""

    def __init__(self, names: Callable[[], tuple[str, ...]]) -> None:
        self._names = names

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, LiveNames)) else other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(self._names())


class LiveMapping(Mapping[str, str]):
    """A read-only mapping computed from the registry at each use (`dtype_choice.TORCH_DTYPES`,
    `DTYPE_ALIASES`): the old tables' names, now views of the records."""

    def __init__(self, compute: Callable[[], dict[str, str]]) -> None:
        self._compute = compute

    def __getitem__(self, key: str) -> str:
        return self._compute()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._compute())

    def __len__(self) -> int:
        return len(self._compute())

    def __repr__(self) -> str:
        return repr(self._compute())


def device_computes_bf16(device: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether ``device`` multiplies bf16 in hardware; None where it cannot be told (a CPU whose flags
    cannot be read: not Linux)."""
    if str(device).startswith("cuda"):
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if str(device) != "cpu":
        return None
    flags = cpu_flags(cpuinfo)
    return bool(flags & set(BF16_CPU_FLAGS)) if flags else None


def quantize_int8(model: Any) -> Any:
    """``model`` with every ``nn.Linear`` replaced by an int8 one (CPU inference only): weights quantized per
    output feature, activations per row at each call, as CTranslate2 quantizes them (`int8_linear`).

    Per row rather than torch's ``quantize_dynamic`` (one scale for the whole batch): with one scale, a line's
    translation depended on the lines batched with it, which a scale per row cannot do. It costs some speed in
    eager decoding (`RESULTS_PAGE`, "int8 with a scale per row"). Not torchao's ``quantize_``: on a CPU in
    eager mode its int8 configs measured slower ("Fast translation"), and it is an extra package. Embeddings
    stay float: they are lookups, not products."""
    from .int8_linear import quantize_linear_layers

    return quantize_linear_layers(model)


# --------------------------------------------------------------------------- the formats

register_dtype(
    TranslationDtype(
        "fp32",
        "float32",
        "full precision: the weights as trained",
        aliases=("float32",),
        auto_rank=1,
        self_checked=True,
        exports=True,
    )
)
register_dtype(
    TranslationDtype(
        "bf16",
        "bfloat16",
        "bfloat16 weights and products: fp32's range, fewer digits",
        aliases=("bfloat16",),
        native=device_computes_bf16,
        auto_rank=0,
        self_checked=True,
        exports=True,
    )
)
register_dtype(TranslationDtype("fp16", "float16", "float16 weights and products", aliases=("float16",)))
register_dtype(
    TranslationDtype(
        "int8",
        "float32",
        "int8 linear layers, activations scaled per row (as CTranslate2)",
        aliases=("qint8",),
        devices=("cpu",),
        prepare=quantize_int8,
        compiles=False,
        exports=True,
        note=f"weights quantized; its measured cost in BLEU is in {RESULTS_PAGE}, 'int8 with a scale per row', and "
        "yours may lose more",
    )
)
register_dtype(
    TranslationDtype(
        "fp64",
        "float64",
        "float64: the self-check's reference",
        aliases=("float64",),
        translates=False,
        self_checked=True,
    )
)


__all__ = [
    "RESULTS_PAGE",
    "DTYPE_RECORDS",
    "LiveMapping",
    "LiveNames",
    "TranslationDtype",
    "aliases",
    "auto_candidates",
    "canonical_name",
    "device_computes_bf16",
    "float_dtype_names",
    "dtype_names",
    "quantize_int8",
    "register_dtype",
    "self_checked_names",
    "dtype_record",
]
