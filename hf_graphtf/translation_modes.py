"""The number format a model translates in: ``--dtype auto | fp32 | bf16 | fp16 | int8``.

Translation is where users feel speed, and a model with the attention link or graph attention has no
other engine (CTranslate2 and Marian C++ cannot run it), so the package offers the cheaper formats
itself, and ``auto`` picks by what the device computes natively, the way training's ``precision: auto``
does:

- **bf16** changes only the arithmetic's precision, so ``auto`` takes it where the device computes it
  natively (a CPU with ``avx512_bf16`` or AMX, a GPU that supports it; elsewhere torch emulates it, many
  times slower). What it costs in BLEU is measured, not assumed, and stated on the results page.
- **int8** (CPU only) changes the weights themselves: every ``nn.Linear`` gets int8 weights and int8
  products with activations quantized on the fly (`quantize_int8`). Another user's model may lose more
  than the one measured, so ``auto`` never takes it: it is asked for by name.

Compiled decoding (``--compile``) is a separate choice: a static KV cache and ``torch.compile`` of the
model's forward, greedy and beam search alike (`compile_decoding`). ``auto`` compiles only where it measured
faster end to end (`COMPILED_DECODING_PAYS`).

The figures are measured by `recipes/benchmarks/translation_quality.py` (quality) and
`recipes/benchmarks/translation_speed.py` (speed, beside CTranslate2); `RESULTS_PAGE`, "Fast translation", has
both tables, and the lines the CLI prints point there rather than restate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .machine import BF16_CPU_FLAGS, cpu_flags

#: the ``--dtype`` values of translation, ``auto`` first (the default of ``hf-graphtf translate``)
TRANSLATION_DTYPES = ("auto", "fp32", "bf16", "fp16", "int8")
#: the torch dtype each float format loads its weights in (int8 loads in fp32, then quantizes)
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64", "int8": "float32"}
#: other spellings accepted wherever the package takes a dtype (the self-check spells torch's names)
DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64", "qint8": "int8"}

#: where each format's measured cost and speed are (the section "Fast translation")
RESULTS_PAGE = "recipes/benchmarks/RESULTS.md"


def canonical_dtype(name: str, allowed: tuple[str, ...] = TRANSLATION_DTYPES) -> str:
    """``name`` in the package's spelling (``bfloat16`` -> ``bf16``); a value outside ``allowed`` is refused,
    naming the choices."""
    canonical = DTYPE_ALIASES.get(name, name)
    if canonical not in allowed:
        aliases = ", ".join(alias for alias, target in DTYPE_ALIASES.items() if target in allowed)
        raise ValueError(f"dtype must be one of {', '.join(allowed)} (or {aliases}); got {name!r}")
    return canonical


@dataclass(frozen=True)
class TranslationMode:
    """What a model translates in and why: ``dtype`` is one of `TRANSLATION_DTYPES` but ``auto``;
    ``reason`` is the one line the CLI prints; ``emulated`` marks bf16 on a device without it; ``compiled``
    marks compiled static-cache decoding (`compile_decoding`)."""

    dtype: str
    requested: str
    reason: str
    emulated: bool = False
    compiled: bool = False

    @property
    def torch_dtype(self) -> str:
        return TORCH_DTYPES[self.dtype]


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


def resolve_translation_dtype(requested: str, device: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> TranslationMode:
    """The format to translate in on ``device``, with the line that says why.

    ``auto`` takes bf16 where the device computes it natively, fp32 elsewhere; it never takes int8. An
    explicit format is kept: bf16
    on a device without it is marked emulated (it works, slowly), and int8 off a CPU is refused."""
    requested = canonical_dtype(requested)
    native = device_computes_bf16(device, cpuinfo)
    where = "this GPU" if str(device).startswith("cuda") else "this CPU"
    if requested == "int8" and str(device) != "cpu":
        raise ValueError(
            f"dtype int8 runs on a CPU only (torch's dynamic int8 quantization of nn.Linear); on {device} use "
            "bf16, which `auto` picks where the device has it"
        )
    if requested == "int8":
        return TranslationMode(
            "int8",
            requested,
            f"translating in int8 (weights quantized; its measured cost in BLEU is in {RESULTS_PAGE}, 'Fast "
            "translation', and yours may lose more)",
        )
    if requested == "auto":
        if native:
            return TranslationMode(
                "bf16",
                requested,
                f"translating in bf16: {where} computes it natively (its cost against fp32: {RESULTS_PAGE}, 'Fast "
                "translation'); --dtype fp32 for full precision, --dtype int8 for more speed",
            )
        why = "cannot tell whether it computes bf16" if native is None else "has no native bf16"
        return TranslationMode("fp32", requested, f"translating in fp32: {where} {why}")
    if requested == "bf16" and native is False:
        return TranslationMode(
            "bf16",
            requested,
            f"translating in bf16, which {where} emulates (no {'/'.join(BF16_CPU_FLAGS)}): many times slower "
            "than fp32; --dtype auto picks the fastest format this device runs",
            emulated=True,
        )
    return TranslationMode(requested, requested, f"translating in {requested}")


def quantize_int8(model: Any) -> Any:
    """``model`` with every ``nn.Linear`` replaced by a dynamically quantized int8 one (CPU inference only).

    torch's ``quantize_dynamic`` (fbgemm/oneDNN int8 GEMMs, activations quantized per batch) rather than
    torchao's ``quantize_``: on a CPU in eager mode torchao's int8 configs measured slower than it
    (`RESULTS_PAGE`, "Fast translation"), and it needs no extra package. torch marks it deprecated in favour
    of torchao; where a torch release drops it, the error says so. Embeddings stay float: they are lookups,
    not products."""
    import torch

    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError as error:  # pragma: no cover - torch releases that removed it
        raise RuntimeError(
            f"dtype int8 needs torch.ao.quantization.quantize_dynamic, gone from this torch: {error}"
        ) from error
    import warnings

    with warnings.catch_warnings():
        # torch 2.13 warns that its quantized tensor types will go (pytorch issue 184982): said in the
        # docstring above and on the results page, not at every translation
        warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor.*deprecated", category=UserWarning)
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


#: ``--compile`` values of translation, ``auto`` first (the default)
COMPILE_CHOICES = ("auto", "on", "off")
#: device type -> whether compiled static-cache decoding measured faster than eager decoding there, compile
#: time included, on a file of the size people translate. On a CPU it did not: it pays back its compiling
#: only on batches of one shape, and a file brings many (`RESULTS_PAGE`, "Compiled decoding" and "Compiled
#: decoding end to end"). A device type not listed is not compiled unasked: ``auto`` compiles only where it
#: paid.
COMPILED_DECODING_PAYS: dict[str, bool] = {"cpu": False}


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
    if requested == "off" or not COMPILED_DECODING_PAYS.get(device_type) or dtype == "int8":
        return False, ""
    return True, f"compiling the decoding step: it measured faster on {device_type}"


def check_compilable(dtype: str) -> None:
    """Refuse compiled decoding of int8 models: their quantized linears do not compile."""
    if dtype == "int8":
        raise ValueError("compiled decoding takes fp32, bf16 or fp16, not int8: quantized linears do not compile")


def compile_decoding(model: Any, *, backend: str = "inductor") -> Any:
    """``model`` set to decode with a static KV cache and its forward compiled whole (``fullgraph``): greedy
    and beam search alike, since `generate` calls the compiled forward at every step (Transformers compiles
    its own loop only for greedy and sampling on CUDA). In float32 the outputs equal eager decoding's
    (tests/test_compiled_decoding.py); in bf16 the compiler's fused kernels round differently, and some
    translations change (16 of 40 lines of the quickstart model), though not its test BLEU (+0.03 against
    fp32; RESULTS.md, "Compiled decoding"). int8 models are refused: their quantized linears do not compile;
    so are M2M100/NLLB models on Transformers before 5.20 (`transformers_seam.compiled_decoding_refusal`)."""
    import torch

    from .transformers_seam import compiled_decoding_refusal

    check_compilable(getattr(getattr(model, "translation_mode", None), "dtype", "fp32"))
    refusal = compiled_decoding_refusal(model.config.model_type)
    if refusal is not None:  # said before the first batch, not as a compiler trace at it
        raise ValueError(refusal)
    model.generation_config.cache_implementation = "static"
    model.forward = torch.compile(model.forward, fullgraph=True, backend=backend)
    return model


__all__ = [
    "COMPILED_DECODING_PAYS",
    "COMPILE_CHOICES",
    "DTYPE_ALIASES",
    "RESULTS_PAGE",
    "TORCH_DTYPES",
    "TRANSLATION_DTYPES",
    "TranslationMode",
    "canonical_dtype",
    "check_compilable",
    "compile_decoding",
    "decides_to_compile",
    "device_computes_bf16",
    "quantize_int8",
    "resolve_translation_dtype",
]
