"""The number format a model translates in: ``--dtype auto | fp32 | bf16 | fp16 | int8``.

Translation is where users feel speed, and a model with the attention link or graph attention has no
other engine (CTranslate2 and Marian C++ cannot run it), so the package offers the cheaper formats
itself, and ``auto`` picks by what the device computes natively, the way training's ``precision: auto``
does:

- **bf16** changes only the arithmetic's precision, so ``auto`` takes it where the device computes it
  natively (a CPU with ``avx512_bf16`` or AMX, a GPU that supports it; elsewhere torch emulates it, many
  times slower). What it costs in BLEU is measured, not assumed, and stated on the results page.
- **int8** (CPU only) changes the weights themselves: every ``nn.Linear`` gets int8 weights and int8
  products with activations quantized on the fly, a scale per row (`quantize_int8`). Another user's model may
  lose more than the one measured, so ``auto`` never takes it: it is asked for by name.

Compiled decoding (``--compile``) is a separate choice: a static KV cache and ``torch.compile`` of the
model's forward, greedy and beam search alike (`compile_decoding`). ``auto`` compiles only where it measured
faster end to end (`COMPILED_DECODING_PAYS`).

Each format is one record (`dtypes.TranslationDtype`), registered there; ``auto`` takes the
registered format of lowest ``auto_rank`` that the device computes natively. The figures are measured by
`recipes/benchmarks/translation_quality.py` (quality) and `recipes/benchmarks/translation_speed.py` (speed,
beside CTranslate2); `RESULTS_PAGE`, "Fast translation", has both tables, and the lines the CLI prints point
there rather than restate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError, named_first_line
from .dtypes import (
    DTYPE_RECORDS,
    RESULTS_PAGE,
    LiveMapping,
    LiveNames,
    TranslationDtype,
    aliases,
    auto_candidates,
    canonical_name,
    device_computes_bf16,
    dtype_names,
    dtype_record,
    quantize_int8,
)

#: how a refusal names the device types a format runs on
_DEVICE_WORDS = {"cpu": "a CPU", "cuda": "a CUDA GPU"}


#: the ``--dtype`` values of translation, ``auto`` first (the default of ``hf-graphtf translate``); read from
#: the registry at each use
TRANSLATION_DTYPES = LiveNames(lambda: ("auto", *dtype_names()))
#: the torch dtype each format loads its weights in (int8 loads in fp32, then quantizes): a view of the records
TORCH_DTYPES = LiveMapping(lambda: {fmt.name: fmt.torch_dtype for fmt in DTYPE_RECORDS.values()})
#: other spellings accepted wherever the package takes a dtype (the self-check spells torch's names): a view
DTYPE_ALIASES = LiveMapping(aliases)


def canonical_dtype(name: str, allowed: tuple[str, ...] | LiveNames = TRANSLATION_DTYPES) -> str:
    """``name`` in the package's spelling (``bfloat16`` -> ``bf16``), ``auto`` included; a value outside
    ``allowed`` is refused, naming the choices (`dtypes.canonical_name`)."""
    return canonical_name(name, allowed)


@dataclass(frozen=True)
class DecodingSetup:
    """What a model translates in and why: ``dtype`` is a registered format's name (never ``auto``);
    ``reason`` is the one line the CLI prints; ``emulated`` marks a format the device only emulates;
    ``compiled`` marks compiled static-cache decoding (`compile_decoding`); ``engine_note`` is what the line
    says of an exported package (used, or there but not fitting: `aoti.find_exported`), empty where
    the model folder has none; ``cache_note`` says where the folder's config turned the KV cache off and
    decoding turned it back on (`translation_pipeline.decode_with_cache`); ``engines`` are the engines to try,
    best first, where the dtype was picked from the model's packages (`engine_choice.pick_package`)."""

    dtype: str
    requested: str
    reason: str
    emulated: bool = False
    compiled: bool = False
    engine_note: str = ""
    cache_note: str = ""
    engines: tuple[str, ...] = ()

    @property
    def record(self) -> TranslationDtype:
        return DTYPE_RECORDS[self.dtype]

    @property
    def torch_dtype(self) -> str:
        return self.record.torch_dtype


def resolve_translation_dtype(requested: str, device: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> DecodingSetup:
    """The format to translate in on ``device``, with the line that says why.

    ``auto`` takes the format of lowest ``auto_rank`` that the device computes natively (bf16 where it has
    it, fp32 elsewhere); it never takes int8, which is asked for by name. An explicit format is kept: one
    the device only emulates is marked so (it works, slowly), and one the device cannot run is refused."""
    requested = canonical_dtype(requested)
    where = "this GPU" if str(device).startswith("cuda") else "this CPU"
    if requested == "auto":
        return _auto_setup(device, cpuinfo, where)
    fmt = DTYPE_RECORDS[requested]
    if not fmt.runs_on(device):
        runs_on = " or ".join(_DEVICE_WORDS.get(kind, kind) for kind in fmt.devices)
        raise ValueError(
            f"dtype {fmt.name} runs on {runs_on} only ({fmt.description}); on {device} use --dtype auto, which "
            "picks the fastest dtype the device computes natively"
        )
    if fmt.note:
        return DecodingSetup(fmt.name, requested, f"translating in {fmt.name} ({fmt.note})")
    if fmt.native is not None and fmt.native(device, cpuinfo) is False:
        return DecodingSetup(
            fmt.name,
            requested,
            f"translating in {fmt.name}, which {where} emulates (it does not compute it natively): many times "
            "slower than fp32; --dtype auto picks the fastest dtype this device runs",
            emulated=True,
        )
    return DecodingSetup(fmt.name, requested, f"translating in {fmt.name}")


def _auto_setup(device: str, cpuinfo: Path, where: str) -> DecodingSetup:
    """``auto``: the first format by ``auto_rank`` the device computes natively; the line names the format
    passed over, where one was."""
    ranked = [fmt for fmt in auto_candidates() if fmt.runs_on(device)]
    passed_over = ""
    for fmt in ranked:
        native = True if fmt.native is None else fmt.native(device, cpuinfo)
        if native and fmt.native is not None:
            return DecodingSetup(
                fmt.name,
                "auto",
                f"translating in {fmt.name}: {where} computes it natively (its cost against fp32: {RESULTS_PAGE}, "
                "'Fast translation'); --dtype fp32 for full precision, --dtype int8 for more speed",
            )
        if native:
            return DecodingSetup(fmt.name, "auto", f"translating in {fmt.name}" + passed_over)
        if not passed_over:
            why = f"cannot tell whether it computes {fmt.name}" if native is None else f"has no native {fmt.name}"
            passed_over = f": {where} {why}"
    raise ValueError(f"no dtype `auto` may take runs on {device}")


#: ``--compile`` values of translation, ``auto`` first (the default)
COMPILE_CHOICES = ("auto", "on", "off")
#: device type -> whether compiled static-cache decoding measured faster than eager decoding there, compile
#: time included, on a file of the size people translate. On a CPU it did not: it pays back its compiling
#: only on batches of one shape, and a file brings many (`RESULTS_PAGE`, "Compiled decoding" and "Compiled
#: decoding end to end"). On a CUDA GPU it gained little per batch, as decoding there waits on the host,
#: and each new batch shape waits for the compiler (`RESULTS_PAGE`, the H200's second lease). A device type
#: not listed is not compiled unasked: ``auto`` compiles only where it paid.
COMPILED_DECODING_PAYS: dict[str, bool] = {"cpu": False, "cuda": False}


def decides_to_compile(requested: str, device: str, dtype: str = "fp32") -> tuple[bool, str]:
    """Whether to compile decoding on ``device`` for ``--compile requested``, with the line that says why
    (empty for the default choice of eager decoding where compiling was measured not to pay); a format that
    does not compile (`check_compilable`) is refused when compiling is asked for."""
    if requested not in COMPILE_CHOICES:
        raise ValueError(f"compile must be one of {', '.join(COMPILE_CHOICES)}; got {requested!r}")
    device_type = str(device).split(":")[0]
    if requested == "on":
        check_compilable(dtype)
        return True, (
            "compiling the decoding step (static cache, torch.compile): each new batch shape waits a minute or "
            "more for the compiler at first"
        )
    compiles = dtype_record(dtype, dtype_names(translates=None)).compiles
    if requested == "off" or not COMPILED_DECODING_PAYS.get(device_type) or not compiles:
        return False, ""
    return True, f"compiling the decoding step: it measured faster on {device_type}"


def check_compilable(dtype: str) -> None:
    """Refuse compiled decoding of a format not offered compiled (int8: its compiled form is the exported package)."""
    fmt = dtype_record(dtype, dtype_names(translates=None))
    if not fmt.compiles:
        compiling = ", ".join(name for name in dtype_names() if DTYPE_RECORDS[name].compiles)
        message = f"compiled decoding takes {compiling}, not {fmt.name} ({fmt.description})"
        if fmt.exports:
            message += f"; `hf-graphtf export --dtype {fmt.name}` compiles decoding in {fmt.name} ahead of time"
        raise ValueError(message)


def compile_decoding(model: Any, *, backend: str = "inductor") -> Any:
    """``model`` set to decode with a static KV cache and its forward compiled whole (``fullgraph``): greedy
    and beam search alike, since `generate` calls the compiled forward at every step (Transformers compiles
    its own loop only for greedy and sampling on CUDA). In float32 the outputs equal eager decoding's
    (tests/test_compiled_decoding.py); in bf16 the compiler's fused kernels round differently, so some
    translations change (`RESULTS_PAGE`, "Compiled decoding"). int8 models are refused (their compiled form
    is `hf-graphtf export`'s package);
    so are M2M100/NLLB models on Transformers before 5.20 (`transformers_seam.compiled_decoding_refusal`)."""
    import torch

    from ..transformers_seam import compiled_decoding_refusal

    check_compilable(getattr(getattr(model, "decoding_setup", None), "dtype", "fp32"))
    refusal = compiled_decoding_refusal(model.config.model_type)
    if refusal is not None:  # said before the first batch, not as a compiler trace at it
        raise ValueError(refusal)
    model.generation_config.cache_implementation = "static"
    model.forward = _said_if_it_fails(torch.compile(model.forward, fullgraph=True, backend=backend), model.forward)
    return model


class CompileError(UserError, RuntimeError):
    """The installed torch cannot compile a model's decoding step (`compile_decoding`)."""


def _said_if_it_fails(compiled: Any, forward: Any) -> Any:
    """``compiled`` (the model's ``forward`` under `torch.compile`), whose compiler failures at a batch become
    a `CompileError` of one line instead of a compiler trace of a hundred: torch 2.6's compiler, for one,
    cannot trace Transformers 5.17's forward (tests/test_translation_modes.py)."""
    import functools

    import torch

    @functools.wraps(forward)
    def forward_compiled(*args: Any, **kwargs: Any) -> Any:
        try:
            return compiled(*args, **kwargs)
        except torch._dynamo.exc.TorchDynamoException as error:
            raise CompileError(
                f"torch {torch.__version__} cannot compile this model's decoding step ({named_first_line(error)}); "
                "translate without --compile"
            ) from error

    return forward_compiled


__all__ = [
    "COMPILED_DECODING_PAYS",
    "COMPILE_CHOICES",
    "CompileError",
    "DTYPE_ALIASES",
    "RESULTS_PAGE",
    "TORCH_DTYPES",
    "TRANSLATION_DTYPES",
    "DecodingSetup",
    "canonical_dtype",
    "check_compilable",
    "compile_decoding",
    "decides_to_compile",
    "device_computes_bf16",
    "quantize_int8",
    "resolve_translation_dtype",
]
