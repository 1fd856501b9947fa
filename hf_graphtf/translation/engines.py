"""What decodes a translation (``--engine``), one record each.

An engine says how its packages are built and found, which formats and devices it takes, and whether loading
a package runs code, which decides whether a package built elsewhere needs the user's trust (`package_store`):
an AOTInductor package is a compiled shared object, so it does. Everything that offers or reads an engine
reads the record: the CLI's ``--engine`` choices of ``translate``, ``evaluate`` and ``export``, and
`inference.load_model`. So an engine is one registration (docs/internals.md, "Adding an engine"), at the end of
this module.

Two words are not engines: ``auto`` (the default) takes the best engine for this host with a package that may
run and fits (`engine_choice`: by the CPU's flags and vendor), else decodes eagerly, and ``exported`` does the
same but refuses to fall back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dtypes import DTYPE_RECORDS

#: the ``--engine`` words that choose among the engines rather than name one
CHOOSERS = ("auto", "exported")


@dataclass(frozen=True)
class TranslationEngine:
    """One engine.

    ``build(model_dir, dtype, output=..., progress=..., command=...)`` builds its packages and returns their
    folder; ``find(model, model_dir, dtype, trust_exported=...)`` returns a `packages.PackageLookup`
    (the decoding, or None and why not); ``holds(model_dir, dtype, trust_exported)`` says, without loading
    anything, whether the model has a package in ``dtype`` that may run here (`engine_choice` picks the dtype
    from these). All None: the model's own forward (eager), which needs nothing built.
    ``dtypes`` are the ``--dtype`` names it builds and decodes (empty: every format); ``devices`` the device
    types it runs on (empty: any). ``runs_code``: loading a package runs native code, so one built elsewhere
    runs only where trusted."""

    name: str
    description: str
    runs_code: bool = False
    dtypes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    build: Callable[..., Path] | None = None
    find: Callable[..., Any] | None = None
    holds: Callable[[str, str, bool], bool] | None = None

    @property
    def exports(self) -> bool:
        return self.build is not None

    def takes(self, dtype: str, device: str) -> bool:
        """Whether it decodes format ``dtype`` on ``device``."""
        in_format = not self.dtypes or dtype in self.dtypes
        return in_format and (not self.devices or str(device).split(":")[0] in self.devices)


TRANSLATION_ENGINES: dict[str, TranslationEngine] = {}


def register_engine(engine: TranslationEngine) -> TranslationEngine:
    """Add ``engine``; a name taken already (or one of `CHOOSERS`) is refused."""
    if engine.name in TRANSLATION_ENGINES or engine.name in CHOOSERS:
        raise ValueError(f"an engine named {engine.name!r} is registered already")
    TRANSLATION_ENGINES[engine.name] = engine
    return engine


def engine_choices() -> tuple[str, ...]:
    """What ``--engine`` takes: the choosers, then every registered engine."""
    return (*CHOOSERS, *TRANSLATION_ENGINES)


def exporting_engines() -> tuple[str, ...]:
    """The engines ``hf-graphtf export`` builds for."""
    return tuple(name for name, engine in TRANSLATION_ENGINES.items() if engine.exports)


def engine_help() -> str:
    """``--engine``'s help: the choosers and each engine's one line."""
    engines = "; ".join(f"{engine.name}: {engine.description}" for engine in TRANSLATION_ENGINES.values())
    return (
        "auto (default): the first engine with a package (hf-graphtf export) that may run and fits, else eager; "
        f"exported: the same, or an error; {engines}"
    )


def _aoti_build(*args: Any, **kwargs: Any) -> Path:
    from .aoti import export_model

    return export_model(*args, **kwargs)


def _aoti_holds(model_dir: str, dtype: str, trust_exported: bool) -> bool:
    from .aoti import holds_package

    return holds_package(model_dir, dtype, trust_exported=trust_exported)


def _aoti_find(*args: Any, **kwargs: Any) -> Any:
    from .aoti import find_exported

    return find_exported(*args, **kwargs)


register_engine(TranslationEngine("eager", "the model's own forward in PyTorch, never a package"))
register_engine(
    TranslationEngine(
        "aoti",
        "AOTInductor packages (CPU; native code: another's runs only with --trust-exported)",
        runs_code=True,
        dtypes=tuple(name for name, fmt in DTYPE_RECORDS.items() if fmt.exports),
        devices=("cpu",),
        build=_aoti_build,
        find=_aoti_find,
        holds=_aoti_holds,
    )
)


def _runtime_engine(name: str) -> TranslationEngine:
    """The record of a runtime reached through ``transformers.exporters`` (`translation.runtimes.RUNTIMES`, which
    says its formats and its line): its exports are data (ONNX, OpenVINO IR), so loading one runs no code and
    needs no trust."""
    from .runtimes import RUNTIMES

    def build(*args: Any, **kwargs: Any) -> Path:
        from .runtimes import export_runtime

        return export_runtime(*args, engine=name, **kwargs)

    def find(*args: Any, **kwargs: Any) -> Any:
        from .runtimes import find_runtime

        return find_runtime(*args, engine=name, **kwargs)

    def holds(model_dir: str, dtype: str, trust_exported: bool) -> bool:
        from .runtimes import holds_export

        return holds_export(model_dir, name, dtype)

    runtime = RUNTIMES[name]
    return TranslationEngine(
        name, runtime.description, dtypes=runtime.dtypes, devices=("cpu",), build=build, find=find, holds=holds
    )


register_engine(_runtime_engine("onnx"))
register_engine(_runtime_engine("openvino"))

__all__ = [
    "CHOOSERS",
    "TRANSLATION_ENGINES",
    "TranslationEngine",
    "engine_choices",
    "engine_help",
    "exporting_engines",
    "register_engine",
]
