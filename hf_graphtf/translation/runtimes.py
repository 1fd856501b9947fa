"""The ONNX Runtime and OpenVINO engines: a model's two graphs exported through ``transformers.exporters``.

``hf-graphtf export --model DIR --engine onnx`` traces the graphs `export_graphs` makes of the model (the
encoder with the cross-attention cache, and one decoder step; batch rows, source and cache lengths stay
dynamic), hands each to Transformers' own exporter (`OnnxExporter`, `OpenVINOExporter`), and writes them as
``ExportedModel.save_pretrained`` writes them, into ``DIR/exported/<engine>-<dtype>/`` (or ``--output``):
``transformers.exporters.ExportedModel.from_pretrained`` loads that folder. Decoding then goes through
`generate` exactly as the AOTInductor engine's does (`exported_decoding`): the runtime runs the graphs, the
model's own embeddings feed them, and `generate` does all of the search.

ONNX and OpenVINO IR are data: loading them runs no code of the folder's, so a folder copied from elsewhere
(another machine, the Hub) is used without any trust flag, wherever it fits the model (`RUNTIME_MANIFEST`
records the model's digest and the graphs' layout, and a folder that does not fit is said so and not used).

The releases differ: Transformers 5.17 has an ONNX exporter but no runners, 5.23 has both exporters, their
runners and quantizers. `runtime_problem` says in one line what is missing, and the other engines remain.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import named_first_line
from ..folder_lock import hold_folder
from .packages import EXPORT_DIR, ExportError, PackageLookup, model_digest

#: the manifest ``ExportedModel.save_pretrained`` writes (``transformers.exporters.base.EXPORT_MANIFEST_FILE``,
#: named here so that a folder is looked at without importing the exporters, which older releases lack)
EXPORTERS_MANIFEST = "export.json"
#: what hf_graphtf records beside it: what the graphs were built from
RUNTIME_MANIFEST = "hf_graphtf_export.json"


@dataclass(frozen=True)
class Runtime:
    """One runtime the exporters reach: its exporter and config classes in ``transformers.exporters``, the
    modules it needs (and the extra that installs them), and its runner's options for one CPU decode."""

    name: str
    label: str
    exporter: str
    config: str
    modules: tuple[str, ...]
    extra: str
    config_options: dict[str, Any] = field(default_factory=dict)
    runner_options: Callable[[], dict[str, Any]] = dict
    #: the formats it exports beyond fp32, each with the exporters' quantizer that makes it from the fp32 graphs
    quantizers: dict[str, Callable[[], Any]] = field(default_factory=dict)
    #: said in ``--help`` and on the results page about its int8
    int8_note: str = ""
    #: what building a quantized format needs beyond ``modules`` (loading it needs only the runtime): the
    #: modules, and the extra that installs them
    quantizer_needs: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return ("fp32", *self.quantizers)

    @property
    def description(self) -> str:
        """The engine's one line (``--engine``'s help)."""
        int8 = f"; int8: {self.int8_note}" if self.int8_note else ""
        return (
            f"{self.label}, through transformers.exporters (CPU; data, no trust asked; {', '.join(self.dtypes)}{int8})"
        )


def _onnx_runner_options() -> dict[str, Any]:
    """ONNX Runtime on torch's thread count (it sizes its pool from every core of the machine otherwise)."""
    import onnxruntime
    import torch

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    return {"session_options": options}


def _openvino_runner_options() -> dict[str, Any]:
    """OpenVINO's CPU plugin in float32 (it computes in bf16 where the CPU has it, unless told) on torch's
    thread count."""
    import torch

    return {"config": {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": torch.get_num_threads()}}


def _onnx_int8_quantizer() -> Any:
    """ONNX Runtime's dynamic quantization of the products: int8 weights with a scale per output channel,
    activations quantized as each product runs (one scale per tensor: ONNX Runtime offers no scale per row)."""
    from transformers.exporters import OnnxRuntimeDynamicConfig, OnnxRuntimeQuantizer

    return OnnxRuntimeQuantizer(OnnxRuntimeDynamicConfig(per_channel=True, op_types_to_quantize=["MatMul"]))


def _openvino_int8_quantizer() -> Any:
    """NNCF's data-free int8 weight compression (symmetric, a scale per output channel); OpenVINO's CPU plugin
    then quantizes each product's activations as it runs, per row and group of input channels
    (``DYNAMIC_QUANTIZATION_GROUP_SIZE``), so a line's translation does not depend on its batch."""
    import nncf
    from transformers.exporters import NNCFOpenVINOQuantizer, NNCFWeightCompressionConfig

    return NNCFOpenVINOQuantizer(NNCFWeightCompressionConfig(mode=nncf.CompressWeightsMode.INT8_SYM))


_RUNTIME_RECORDS = (
    Runtime(
        "onnx",
        "ONNX Runtime",
        "OnnxExporter",
        "OnnxConfig",
        ("onnx", "onnxscript", "onnxruntime"),
        "onnx",
        runner_options=_onnx_runner_options,
        quantizers={"int8": _onnx_int8_quantizer},
        int8_note="int8 weights per output channel, activations scaled per tensor (ONNX Runtime's dynamic "
        "quantization has no scale per row), so a line's int8 translation may depend on its batch",
    ),
    Runtime(
        "openvino",
        "OpenVINO",
        "OpenVINOExporter",
        "OpenVINOConfig",
        ("openvino",),
        "openvino",
        # the graphs take and give their caches as tensors (`exported_decoding` keeps them)
        config_options={"stateful": False},
        runner_options=_openvino_runner_options,
        quantizers={"int8": _openvino_int8_quantizer},
        int8_note="int8 weights per output channel (NNCF), activations quantized per row as each product runs",
        quantizer_needs={"int8": (("nncf",), "openvino-int8")},
    ),
)
#: the runtimes by name, as ``--engine`` names them
RUNTIMES: dict[str, Runtime] = {runtime.name: runtime for runtime in _RUNTIME_RECORDS}


def _missing_modules(modules: tuple[str, ...]) -> list[str]:
    """Those of ``modules`` this install lacks: found or not by their spec, none of them imported."""
    return [module for module in modules if importlib.util.find_spec(module) is None]


def runtime_problem(name: str, building: str | None = None) -> str | None:
    """What this install lacks for the runtime ``name``, in one line, or None; ``building``: a dtype to build,
    whose quantizer may need more than the runtime (`Runtime.quantizer_needs`)."""
    import transformers

    runtime = RUNTIMES[name]
    if missing := _missing_modules(runtime.modules):
        return f"the {name} engine needs {', '.join(missing)}, not installed: pip install 'hf-graphtf[{runtime.extra}]'"
    modules, extra = runtime.quantizer_needs.get(building or "", ((), ""))
    if missing := _missing_modules(modules):
        return (
            f"building {name} {building} needs {', '.join(missing)}, not installed: pip install 'hf-graphtf[{extra}]'"
        )
    try:
        from transformers import exporters

        getattr(exporters, runtime.exporter), getattr(exporters, runtime.config)
        importlib.import_module("transformers.exporters.runners")
    except (ImportError, AttributeError):
        return (
            f"the {name} engine needs transformers.exporters' {runtime.exporter} and its runners, which "
            f"transformers {transformers.__version__} lacks (5.23 has them)"
        )
    return None


def runtime_dir(model_dir: str | os.PathLike[str], engine: str, dtype: str) -> Path:
    """Where a model folder keeps its ``engine`` export in ``dtype`` (data: it travels with the folder)."""
    return Path(model_dir) / EXPORT_DIR / f"{engine}-{dtype}"


class _RunnerGraph:
    """A runner of ``ExportedModel`` called as `exported_decoding` calls a graph: positional tensors (and
    lists of them) in the order the graph's forward takes them, a tuple of tensors out."""

    def __init__(self, runner: Any) -> None:
        self._runner = runner
        self._names = list(runner.metadata.kwargs)

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        return tuple(self._runner(**dict(zip(self._names, args))))


def _graph_kwargs(module: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(inspect.signature(module.forward).parameters, args))


def export_runtime(
    model_dir: str | os.PathLike[str],
    dtype: str = "fp32",
    *,
    engine: str,
    output: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    command: str | None = None,
) -> Path:
    """Export the model saved in ``model_dir`` for ``engine`` (`RUNTIMES`) in ``dtype``, into the model
    folder's `runtime_dir` or ``output/<engine>-<dtype>``; returns the folder. ``progress`` gets a line per
    stage (default: standard error). A model that does not export is refused, naming it."""
    from transformers import exporters

    from .export_graphs import GRAPH_LAYOUT
    from .loading import load_eager

    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    runtime = RUNTIMES[engine]
    if dtype not in runtime.dtypes:
        raise ExportError(f"the {engine} engine exports {', '.join(runtime.dtypes)}, not {dtype}")
    if problem := runtime_problem(engine, building=dtype):
        raise ExportError(problem)
    folder = Path(model_dir)
    if not folder.is_dir():
        raise ExportError(f"{model_dir}: export needs a saved model folder (the graphs are built from its files)")
    target = Path(output) / f"{engine}-{dtype}" if output is not None else runtime_dir(folder, engine, dtype)

    def refusal(holder: str) -> str:
        return f"{folder} is being exported for {engine} in {dtype} to {target} by another process ({holder}); wait"

    started = time.perf_counter()
    # one export to a folder at a time: a second would delete the first's building folder
    with hold_folder(target.parent, f".export-{target.name}.lock", refusal):
        # traced in fp32; another format is made from those graphs by the exporters' quantizer
        _, model = load_eager(str(folder), "cpu", "fp32")
        components = _exported_components(runtime, model, dtype, say)
        building = target.parent / f".building-{target.name}"
        shutil.rmtree(building, ignore_errors=True)
        exporters.ExportedModel(
            components, engine, config=model.config, generation_config=model.generation_config
        ).save_pretrained(building)
        manifest = {
            "engine": engine,
            "dtype": dtype,
            "model_digest": model_digest(folder),
            "graph_layout": GRAPH_LAYOUT,
            "build_command": command or f"hf-graphtf export --model {model_dir} --engine {engine} --dtype {dtype}",
            "build_seconds": round(time.perf_counter() - started, 1),
            "built": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        (building / RUNTIME_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        building.rename(target)
    say(f"exported to {target} in {manifest['build_seconds']:.0f} s")
    return target


def _exported_components(runtime: Runtime, model: Any, dtype: str, say: Callable[[str], None]) -> dict[str, Any]:
    """Each graph of ``model`` (`export_graphs.graph_inputs`) through the runtime's exporter, by graph name;
    a model that does not export is refused, naming it and the exporter's first line."""
    import torch
    from transformers import exporters

    from .export_graphs import graph_inputs
    from .packages import model_summary

    summary = model_summary(model)
    exporter = getattr(exporters, runtime.exporter)()
    config_class = getattr(exporters, runtime.config)
    components = {}
    graphs = graph_inputs(model)
    for index, (name, (module, args, shapes)) in enumerate(graphs.items(), 1):
        say(f"exporting {summary} to {runtime.label}: the {name.replace('_', ' ')} graph ({index}/{len(graphs)})")
        try:
            # torch.onnx prints its stages to standard output, which translate and pipes keep for text
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
                quantizer = runtime.quantizers[dtype]() if dtype in runtime.quantizers else None
                config = config_class(dynamic_shapes=shapes, quantizer=quantizer, **runtime.config_options)
                exported = exporter.export(module, _graph_kwargs(module, args), config)
        except Exception as error:  # the exporters' failures are deep; the first line names the cause
            raise ExportError(f"{summary} cannot be exported to {runtime.label}: {named_first_line(error)}") from error
        components[name] = exported.components["model"]
    return components


def _misfit(folder: Path, engine: str, dtype: str, model_dir: str | os.PathLike[str]) -> str | None:
    """Why the export in ``folder`` does not fit the model in ``model_dir`` (None: it fits)."""
    from .export_graphs import GRAPH_LAYOUT

    try:
        manifest = json.loads((folder / RUNTIME_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"its {RUNTIME_MANIFEST} is missing or damaged ({type(error).__name__})"
    if manifest.get("engine") != engine or manifest.get("dtype") != dtype:
        return f"it holds {manifest.get('engine')} {manifest.get('dtype')}, not {engine} {dtype}"
    if manifest.get("graph_layout") != GRAPH_LAYOUT:
        return f"its graphs are of layout {manifest.get('graph_layout')}, this hf_graphtf reads {GRAPH_LAYOUT}"
    if manifest.get("model_digest") != model_digest(model_dir):
        return "the model's weights or configuration changed since it was exported"
    return None


def holds_export(model_dir: str | os.PathLike[str], engine: str, dtype: str) -> bool:
    """Whether ``model_dir`` holds an ``engine`` export in ``dtype`` and the runtime's modules are installed:
    looked up, not imported (importing the exporters' runners costs a second and a half of start-up; whether
    the export fits and loads is `find_runtime`'s to say, once the model has loaded)."""
    held = (runtime_dir(model_dir, engine, dtype) / EXPORTERS_MANIFEST).is_file()
    return held and not _missing_modules(RUNTIMES[engine].modules)


def find_runtime(
    model: Any, model_dir: str | os.PathLike[str], dtype: str, *, engine: str, trust_exported: bool = False
) -> PackageLookup:
    """The decoding of ``model`` with the ``engine`` export its folder holds, where there is one that fits.
    No trust is asked (``trust_exported`` is not read): the folder holds data, not code."""
    from transformers import exporters

    from .exported_decoding import ExportedDecoding

    folder = runtime_dir(model_dir, engine, dtype)
    if not (folder / EXPORTERS_MANIFEST).is_file():
        found = (Path(model_dir) / EXPORT_DIR).is_dir()
        return PackageLookup(None, f"no {engine} {dtype} export in {folder} (hf-graphtf export builds one)", found)
    if problem := runtime_problem(engine):
        return PackageLookup(None, problem, True, held=True)
    if str(model.device) != "cpu":
        return PackageLookup(
            None, f"the {engine} export runs on the CPU, the model is on {model.device}", True, held=True
        )
    if misfit := _misfit(folder, engine, dtype, model_dir):
        return PackageLookup(None, f"the {engine} {dtype} export in {folder} does not fit: {misfit}", True, held=True)
    started = time.perf_counter()
    try:  # a folder from elsewhere may hold anything: what does not load is said, not raised
        exported = exporters.ExportedModel.from_pretrained(
            folder, local_files_only=True, **RUNTIMES[engine].runner_options()
        )
    except Exception as error:
        return PackageLookup(
            None,
            f"the {engine} {dtype} export in {folder} does not load ({named_first_line(error)})",
            True,
            held=True,
        )
    graphs = {name: _RunnerGraph(runner) for name, runner in exported.runners.items()}
    decoding = ExportedDecoding(graphs, description=f"{RUNTIMES[engine].label} {dtype}")
    seconds = time.perf_counter() - started
    clause = f"decoding with {RUNTIMES[engine].label} ({engine} {dtype} export in {folder}, loaded in {seconds:.1f} s)"
    if dtype in RUNTIMES[engine].quantizers:
        clause += f"; {RUNTIMES[engine].int8_note}"
    return PackageLookup(decoding, clause, True)


__all__ = [
    "EXPORTERS_MANIFEST",
    "RUNTIMES",
    "RUNTIME_MANIFEST",
    "Runtime",
    "export_runtime",
    "find_runtime",
    "runtime_dir",
    "runtime_problem",
]
