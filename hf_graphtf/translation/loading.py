"""Loading a saved model to translate with eagerly, in the dtype asked: the part of `inference.load_model`
that knows no engine.

The exporters (`aoti`, `runtimes`) load the model they export through here, and `inference.load_model` then
looks for an engine's package on top of it; keeping this apart is what lets the engines import the loader
without the loader importing the engines.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import UserError
from .dtype_choice import DecodingSetup, compile_decoding, decides_to_compile, resolve_translation_dtype


class DeviceError(UserError, ValueError):
    """A ``--device`` this torch or machine does not have."""


def default_device(device: str | None) -> str:
    """``device``, or the best available one when None: CUDA where torch sees a GPU, else the CPU. A CUDA device
    this torch cannot use is refused here, in one line, before anything loads (torch would assert deep in)."""
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise DeviceError(f"--device {device}: not a device torch knows ({error})") from None
    if parsed.type == "cuda":
        if not torch.backends.cuda.is_built():
            raise DeviceError(
                f"--device {device}: this torch ({torch.__version__}) is a CPU build, without CUDA; leave --device "
                "out (or --device cpu), or install a CUDA build of torch"
            )
        count = torch.cuda.device_count()
        if count == 0 or (parsed.index or 0) >= count:
            seen = f"sees {count} GPU{'s' if count != 1 else ''}" if count else "sees no GPU"
            raise DeviceError(f"--device {device}: torch {seen} on this machine; leave --device out to use the CPU")
    return device


def load_eager(
    name: str,
    device: str | None = None,
    dtype: str | DecodingSetup = "fp32",
    attn_implementation: str | None = None,
    compile: str = "off",
) -> tuple[Any, Any]:
    """Tokenizer and model (in eval mode, on ``device`` or the best available one), decoding eagerly: what
    `inference.load_model` says of ``dtype`` and ``compile``. The model's ``decoding_setup`` says what it was
    loaded in and why; ``exported_decoding`` is None."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_graphtf  # noqa: F401  (registers the graph_* model types with the Auto classes)

    from ..model_files import check_model_source, named_source
    from ..translation_pipeline import decode_with_cache

    check_model_source(name, tokenizer=True)
    device = default_device(device)
    # a bad dtype fails before anything loads; a mode resolved by the caller is not resolved again
    mode = dtype if isinstance(dtype, DecodingSetup) else resolve_translation_dtype(dtype, device)
    compiled, compile_reason = decides_to_compile(compile, device, mode.dtype)  # int8 refused before loading
    with named_source(name):
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSeq2SeqLM.from_pretrained(
            name, dtype=getattr(torch, mode.torch_dtype), attn_implementation=attn_implementation
        )
    model = model.to(device).eval()
    if cache_note := decode_with_cache(model):
        mode = replace(mode, reason=f"{mode.reason}; {cache_note}", cache_note=cache_note)
    if mode.record.prepare is not None:  # int8: its linear layers quantized
        model = mode.record.prepare(model)
    if compiled:
        model = compile_decoding(model)
        mode = replace(mode, compiled=True, reason=f"{mode.reason}; {compile_reason}")
    model.exported_decoding = None
    model.decoding_setup = model.translation_mode = mode  # translation_mode: its old name, for one release
    return tokenizer, model
