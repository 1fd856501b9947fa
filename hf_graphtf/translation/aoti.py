"""Exported models on disk: building the AOTInductor packages of a saved model, and finding them again.

``hf-graphtf export --model DIR --dtype bf16`` builds one ``.pt2`` package per graph of `export_graphs` and a
``manifest.json`` saying what they were built from and for, into this user's package store (`package_store`:
``~/.cache/hf_graphtf/exported/``, keyed by the model's digest, the format, torch and the CPU), never into the
model folder; ``--output DIR`` writes them to ``DIR/<dtype>/`` to carry to another machine, where they go in the
model folder's ``exported/``. In a float format the packages hold the compiled code only; the weights stay in the
model's own safetensors and are handed to the graphs when they load, so they are stored once (in the model).
int8 too: its weights are quantized when the model loads in int8 (`int8_linear`), as for eager decoding, and
handed over the same way.

A package is code, so it is opened only where this user built it or trusts whoever did (`package_store`); that is
decided first. It is then used only where it fits what loads it: the same torch, the same CPU instruction set (the
code is compiled for the host it was built on), the same weights and configuration (a digest of the model's
files), and package files whose digests match the manifest. `find_exported` says in one line why one is not
used, and the caller decodes eagerly; a translation never comes from a package that does not fit.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import named_first_line
from ..folder_lock import hold_folder
from . import package_store
from .dtypes import dtype_record
from .packages import (  # noqa: F401  (EXPORT_DIR, MANIFEST, exportable_dtypes: their old home, still read here)
    EXPORT_DIR,
    MANIFEST,
    ExportedPackageProblem,
    ExportError,
    ExportManifest,
    PackageLookup,
    export_dir,
    exportable_dtypes,
    model_digest,
    model_summary,
)

_sha256 = package_store.sha256_of


def store_dir(model_dir: str | os.PathLike[str], dtype: str, digest: str | None = None) -> Path:
    """Where this user's own build of ``model_dir`` (as its files are now: ``digest``, its `model_digest`, where
    known) in ``dtype`` is, for this torch and CPU."""
    import torch

    key = package_store.StoreKey(digest or model_digest(model_dir), dtype, torch.__version__, cpu_instruction_set())
    return key.folder()


def cpu_instruction_set() -> str:
    """The CPU vector instruction set AOTInductor compiles for on this host, as its packages record it
    (``AVX512 AVX512_VNNI``, ``AVX2``).

    Read from the CPU's features, as Inductor's ``cpu_vec_isa.valid_vec_isa_list`` reads them on x86
    (``x86_isa_checker``, over ``supported_vec_isa_list`` best first), without the test compilation
    ``pick_vec_isa`` adds: that runs a compiler and a probe process per instruction set, seconds at every
    load. Elsewhere, and where ``ATEN_CPU_CAPABILITY`` chooses, Inductor's own ``pick_vec_isa`` answers."""
    import platform

    from torch._inductor import cpu_vec_isa

    if platform.machine() in ("x86_64", "AMD64") and not os.environ.get("ATEN_CPU_CAPABILITY"):
        features = set(cpu_vec_isa.x86_isa_checker())
        for isa in cpu_vec_isa.supported_vec_isa_list:
            if set(str(isa).split()) <= features:
                return str(isa).upper()
    return str(cpu_vec_isa.pick_vec_isa()).upper()


#: Inductor's threading for the packages' own kernels: left to itself it writes the build process's thread
#: count into them (none at all when that is 1, as under ``OMP_NUM_THREADS=1``, a fixed one when it is not
#: the CPU count; `codegen.cpp` ``parallel``), so a package would run as its build did, whatever
#: ``--threads`` says. Built for every core with the count read at run time, its kernels run on the threads
#: torch is set to (the packages share torch's OpenMP runtime).
THREADING = {"cpp.threads": max(os.cpu_count() or 1, 2), "cpp.dynamic_threads": True}


def torch_export_problem() -> str | None:
    """What the installed torch lacks for exported packages, or None. Probed, not read from a version: a
    package that takes the loaded model's weights needs AOTInductor's ``package_constants_in_so`` switch and
    ``load_constants(..., user_managed=True)``, and a build in a cache of its own needs Inductor's
    ``fresh_cache`` (all present in torch 2.13, absent in 2.6)."""
    import inspect

    import torch
    from torch._inductor import config

    try:
        from torch._inductor.package.package import AOTICompiledModel
    except ImportError:
        return f"torch {torch.__version__} has no AOTInductor packages"
    from torch._inductor import utils

    takes_weights = "user_managed" in inspect.signature(AOTICompiledModel.load_constants).parameters
    own_cache = hasattr(utils, "fresh_cache")  # `_own_inductor_cache`
    if not (takes_weights and own_cache and hasattr(config.aot_inductor, "package_constants_in_so")):
        return (
            f"exported packages need a newer torch than {torch.__version__} (AOTInductor packages that take the "
            "model's weights when they load)"
        )
    return None


def _check_compiler() -> None:
    """Building compiles C++: refuse early, naming what is needed, where no compiler is on PATH."""
    compiler = os.environ.get("CXX") or next((c for c in ("g++", "c++", "clang++") if shutil.which(c)), None)
    if compiler is None or shutil.which(compiler) is None:
        raise ExportError(
            "exporting compiles the model's graphs to C++ and needs a C++ compiler on PATH (g++ or clang++; "
            "on Debian or Ubuntu: apt install g++), or CXX naming one"
        )


def export_model(
    model_dir: str | os.PathLike[str],
    dtype: str = "fp32",
    *,
    output: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    command: str | None = None,
) -> Path:
    """Build the packages of the model saved in ``model_dir`` in format ``dtype`` (`exportable_dtypes`) and
    return their folder: this user's store (`store_dir`) or, with ``output``, ``output/<dtype>`` (to carry; a
    model folder's ``exported/`` is where `find_exported` looks for carried packages). Packages built before
    are replaced only once the new ones are complete, and a second export to the same folder is refused while
    one runs (`folder_lock`). ``progress`` gets one line per stage (default: standard error)."""
    from .export_graphs import GRAPH_NAMES
    from .loading import load_eager

    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    folder = Path(model_dir)
    if not folder.is_dir():
        raise ExportError(f"{model_dir}: export needs a saved model folder (the packages are built from its files)")
    fmt = dtype_record(dtype)
    if not fmt.exports:
        raise ExportError(f"--dtype {fmt.name} does not export; exported dtypes: {', '.join(exportable_dtypes())}")
    problem = torch_export_problem()
    if problem:
        raise ExportError(problem)
    _check_compiler()
    target = Path(output) / fmt.name if output is not None else store_dir(folder, fmt.name)

    def refusal(holder: str) -> str:
        return f"{folder} is being exported in {fmt.name} to {target} by another process ({holder}); wait for it to end"

    # one export to a folder at a time: a second would delete the first's building folder
    with hold_folder(target.parent, f".export-{target.name}.lock", refusal), warnings.catch_warnings():
        started = time.perf_counter()
        # as translate loads it: int8 with its int8 layers, whose weights are handed over at load as the others'
        _, model = load_eager(str(folder), "cpu", fmt.name)
        summary = model_summary(model)
        say(f"exporting {summary} in {fmt.name}: tracing {len(GRAPH_NAMES)} graphs")
        # torch's own pytree deprecation, raised inside its exporter (torch 2.13), not about the model
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
        # and Inductor's int8 lowering copying its own zero points (mkldnn_lowerings, torch 2.13)
        warnings.filterwarnings("ignore", message=r"To copy construct from a tensor", category=UserWarning)
        built = _build(folder, target, fmt, model, summary, say, command, started)
    if output is not None:
        from ..model_card import note_exported_packages

        note_exported_packages(target)
    return built


def _build(
    folder: Path,
    target: Path,
    fmt: Any,
    model: Any,
    summary: str,
    say: Callable[[str], None],
    command: str | None,
    started: float,
) -> Path:
    """`export_model` after its checks: trace, compile each graph, write the manifest, put ``target`` in place."""
    dtype = fmt.name
    import torch
    import transformers

    from .. import __version__
    from ..machine import cpu_model
    from .export_graphs import GRAPH_LAYOUT, GRAPH_NAMES, EncoderGraph, export_graphs, graph_constants

    try:
        programs = export_graphs(model)
    except Exception as error:  # torch.export's failures are many and deep; the first line names the cause
        raise ExportError(f"{summary} cannot be exported: {named_first_line(error)}") from error
    building = target.parent / f".building-{target.name}"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True, mode=0o700)
    constants = graph_constants(EncoderGraph(model))
    packages: dict[str, str] = {}
    problem = None  # raised once the cache is left: `fresh_cache` keeps its folder when an error crosses it
    with _own_inductor_cache():
        for index, name in enumerate(GRAPH_NAMES, 1):
            say(f"compiling the {name.replace('_', ' ')} graph ({index}/{len(GRAPH_NAMES)}) with AOTInductor")
            path = building / f"{name}.pt2"
            with torch._inductor.config.patch(THREADING):  # the model's weights, handed over at load
                torch._inductor.aoti_compile_and_package(
                    programs[name],
                    package_path=str(path),
                    inductor_configs={"aot_inductor.package_constants_in_so": False},
                )
            # this user built it: recorded before it is first loaded, so that a carried copy of it is known
            packages[name] = package_store.record_built(path)
            try:  # what translate will load, loaded once before it is kept
                _load_package(path, constants)
            except ExportedPackageProblem as error:
                problem = error
                break
    if problem is not None:
        shutil.rmtree(building, ignore_errors=True)
        raise ExportError(f"nothing was kept, as the package AOTInductor built does not load: {problem}")
    manifest = ExportManifest(
        dtype=dtype,
        torch=torch.__version__,
        transformers=transformers.__version__,
        hf_graphtf=__version__,
        cpu_instruction_set=cpu_instruction_set(),
        cpu=cpu_model(),
        model_digest=model_digest(folder),
        packages=packages,
        weights="model",
        graph_layout=GRAPH_LAYOUT,
        build_command=command or f"hf_graphtf.translation.aoti.export_model({str(folder)!r}, {dtype!r})",
        model_path=str(folder.resolve()),
        build_seconds=round(time.perf_counter() - started, 1),
        built=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    manifest.write(building)
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    say(f"exported to {target} in {manifest.build_seconds:.0f} s")
    return target


def load_exported(
    model: Any, model_dir: str | os.PathLike[str], dtype: str, folder: Path, digest: str | None = None
) -> Any:
    """The `ExportedDecoding` of ``model`` (loaded from ``model_dir`` in format ``dtype``) from the packages in
    ``folder``, which the caller has decided may run (`find_exported`); `ExportedPackageProblem` says why they
    do not fit, FileNotFoundError where there are none. ``digest``: the model's `model_digest`, where known."""
    import torch

    from .export_graphs import GRAPH_LAYOUT, GRAPH_NAMES, EncoderGraph, graph_constants
    from .exported_decoding import ExportedDecoding

    manifest = ExportManifest.read(folder)
    problems = [problem] if (problem := torch_export_problem()) else []
    if manifest.dtype != dtype:
        problems.append(f"it holds {manifest.dtype}, not {dtype}")
    if manifest.torch != torch.__version__:
        problems.append(f"it was built for torch {manifest.torch}, this is {torch.__version__}")
    if manifest.cpu_instruction_set != cpu_instruction_set():
        problems.append(
            f"it was built for a CPU with {manifest.cpu_instruction_set}, this one has {cpu_instruction_set()}"
        )
    if str(model.device) != "cpu":
        problems.append(f"its graphs run on the CPU, the model is on {model.device}")
    if not problems and manifest.weights != "model":
        problems.append(
            "it was built by an earlier hf_graphtf whose int8 quantized activations per batch (torchao's PT2E), "
            "not per row as translate does now"
        )
    if not problems and manifest.model_digest != (digest or model_digest(model_dir)):
        problems.append("the model's weights or configuration changed since it was built")
    if not problems and (sorted(manifest.packages) != sorted(GRAPH_NAMES) or manifest.graph_layout != GRAPH_LAYOUT):
        problems.append(
            f"it holds the graphs {', '.join(manifest.packages)} of an earlier hf_graphtf (layout "
            f"{manifest.graph_layout}), not {', '.join(GRAPH_NAMES)} (layout {GRAPH_LAYOUT})"
        )
    for name in GRAPH_NAMES:
        path = folder / f"{name}.pt2"
        if problems:
            break
        if not path.is_file():
            problems.append(f"{path.name} is missing")
        elif _sha256(path) != manifest.packages.get(name):
            problems.append(f"{path.name} is damaged (its digest differs from the manifest's)")
    if problems:
        raise ExportedPackageProblem("; ".join(problems))
    constants = graph_constants(EncoderGraph(model)) if manifest.weights == "model" else {}
    graphs = {name: _load_package(folder / f"{name}.pt2", constants) for name in GRAPH_NAMES}
    return ExportedDecoding(graphs, description=f"exported {dtype}")


def _load_package(path: Path, constants: dict[str, Any]) -> Any:
    """The runner of the AOTInductor package at ``path``, given the model's ``constants`` where it takes
    them; `ExportedPackageProblem` where it does not load (a package whose digest matches its manifest but
    that does not load was broken when it was built, which `export_model` now refuses to keep)."""
    try:
        runner = _aoti_runner(path)
        if constants:
            wanted = runner.get_constant_fqns()
            runner.load_constants({fqn: constants[fqn] for fqn in wanted}, check_full_update=True, user_managed=True)
        return runner
    except Exception as error:
        raise ExportedPackageProblem(
            f"{path.name} does not load ({type(error).__name__}: {error}); build it again with hf-graphtf export"
        ) from None


@contextmanager
def _own_inductor_cache() -> Iterator[None]:
    """A build in an Inductor cache of its own, deleted after it (`torch._inductor.utils.fresh_cache`).
    Inductor's cache is shared by every process of the user, and its kernel files are named by their code:
    two builds of one model at once (two exports, or two test workers) write the same files there, and a
    package zipped while the other build rewrote a file took it empty (a ``kernel_metadata.json`` of 0
    bytes), so that it never loads. A build on its own also reads nothing another torch left there."""
    from torch._inductor.utils import fresh_cache

    with fresh_cache():
        yield


def _aoti_runner(path: Path) -> Any:
    """The runner of the one-model AOTInductor package at ``path``, made as torch's own `load_package` makes it
    where it reads the package as a plain one (`torch._inductor.package.package.load_package`: the
    ``AOTIModelPackageLoader`` of model ``"model"``, wrapped in ``AOTICompiledModel``). Its usual route,
    `torch.export.pt2_archive._package.load_pt2`, first compares this host with the one the package was built
    on through `codecache.get_device_information`, which test-compiles each instruction set: about a second
    for each package at every load, for a check the manifest has made already (`cpu_instruction_set`)."""
    import torch
    from torch._inductor.package.package import AOTICompiledModel

    return AOTICompiledModel(torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, -1))


def _may_open_carried(carried: Path, trust_exported: bool) -> bool:
    """Whether the packages a model folder carries in ``carried`` may be opened: the user trusts them
    (``trust_exported``, ``HF_GRAPHTF_TRUST_EXPORTED``) or their bytes are this user's own build. Decided from
    the flag, the environment and the files' digests, before any package is opened."""
    from .export_graphs import GRAPH_NAMES

    trusted = trust_exported or package_store.trusted_by_environment()
    return trusted or package_store.built_here([carried / f"{name}.pt2" for name in GRAPH_NAMES])


def holds_package(model_dir: str | os.PathLike[str], dtype: str, *, trust_exported: bool = False) -> bool:
    """Whether `find_exported` would open a package of ``model_dir`` in ``dtype``: this user's build for this
    torch and CPU, or one the folder carries that is this user's or trusted. Nothing is opened as code; the
    weights are hashed only where this user has built anything (`packages.model_digest` keeps the digest)."""
    if not Path(model_dir).is_dir():
        return False
    carried = export_dir(model_dir, dtype)
    if (carried / MANIFEST).is_file() and _may_open_carried(carried, trust_exported):
        return True
    if not any(package_store.store_root().glob(f"*/*/{MANIFEST}")):
        return False
    return (store_dir(model_dir, dtype) / MANIFEST).is_file()


def find_exported(
    model: Any, model_dir: str | os.PathLike[str], dtype: str, *, trust_exported: bool = False
) -> PackageLookup:
    """The `ExportedDecoding` for ``model`` where a package may run and fits: this user's own build in the store
    first, else the one the model folder carries, only where its bytes are this user's build or it is trusted
    (``trust_exported``, ``HF_GRAPHTF_TRUST_EXPORTED``). An untrusted package is never opened, not even to
    check that it fits."""

    if not Path(model_dir).is_dir():  # a Hub id: packages are built from a saved folder
        return PackageLookup(None, f"no exported {dtype} package for {model_dir} (it is not a local folder)", False)
    carried = export_dir(model_dir, dtype)
    builds = sorted(package_store.store_root().glob(f"*/*/{MANIFEST}"))
    if not builds and not (carried / MANIFEST).is_file():  # nothing to find: the weights are not hashed
        found = (Path(model_dir) / EXPORT_DIR).is_dir()
        return PackageLookup(None, f"no exported {dtype} package for {model_dir} (hf-graphtf export builds one)", found)
    digest = model_digest(model_dir)
    own = store_dir(model_dir, dtype, digest)
    if (own / MANIFEST).is_file():
        return _load_found(model, model_dir, dtype, own, "you built", digest)
    if (carried / MANIFEST).is_file():
        if not _may_open_carried(carried, trust_exported):
            return PackageLookup(None, package_store.untrusted_line(carried, dtype, str(model_dir)), True, held=True)
        return _load_found(model, model_dir, dtype, carried, "the model folder carries", digest)
    earlier = _earlier_build(model_dir, dtype, digest, builds)
    if earlier is not None:
        return PackageLookup(
            None,
            f"no exported {dtype} package for {model_dir} as its files are now (the one built {earlier} was for "
            f"its earlier weights or configuration; hf-graphtf export --model {model_dir} --dtype {dtype} builds "
            "it again)",
            True,
            held=True,
        )
    others = (Path(model_dir) / EXPORT_DIR).is_dir() or own.parent.is_dir()
    return PackageLookup(None, f"no exported {dtype} package for {model_dir} (hf-graphtf export builds one)", others)


def _earlier_build(model_dir: str | os.PathLike[str], dtype: str, digest: str, builds: list[Path]) -> str | None:
    """When one of this user's ``builds`` (their manifests) is a ``dtype`` build of the folder ``model_dir`` made
    from other files than its ``digest`` now (a model trained on, or edited, since): that build's time; else
    None. It is never used (the store is keyed by the files' digest); the line says why a folder exported
    before decodes eagerly now. A build of these same files for another torch or CPU is not one."""
    path = str(Path(model_dir).resolve())
    for manifest in builds:
        try:
            built = ExportManifest.read(manifest.parent)
        except ExportedPackageProblem:
            continue
        if built.dtype == dtype and built.model_path == path and built.model_digest != digest:
            return built.built
    return None


def _load_found(
    model: Any, model_dir: str | os.PathLike[str], dtype: str, folder: Path, whose: str, digest: str
) -> PackageLookup:
    """`find_exported` for packages in ``folder`` that may run: loaded where they fit, else why not."""
    started = time.perf_counter()
    try:
        decoding = load_exported(model, model_dir, dtype, folder, digest)
    except ExportedPackageProblem as problem:
        return PackageLookup(None, f"the exported {dtype} package in {folder} does not fit: {problem}", True, held=True)
    manifest = ExportManifest.read(folder)
    seconds = time.perf_counter() - started
    clause = f"decoding with the exported {dtype} package {whose} (built {manifest.built}, loaded in {seconds:.1f} s)"
    return PackageLookup(decoding, clause, True)


__all__ = [
    "EXPORT_DIR",
    "MANIFEST",
    "ExportError",
    "ExportManifest",
    "ExportedPackageProblem",
    "PackageLookup",
    "cpu_instruction_set",
    "export_dir",
    "export_model",
    "exportable_dtypes",
    "find_exported",
    "load_exported",
    "model_digest",
    "store_dir",
    "torch_export_problem",
]
