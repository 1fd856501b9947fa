"""What the engines' exported folders share: where a model folder keeps them, what they record, how a model's
files are digested, and the errors and lookups the engines report.

The AOTInductor packages (`aoti`) and the runtime exports (`runtimes`) both read these, and the model card
(`model_card`) lists a folder's exports from them, so they sit here, below all three, rather than in one of
them: the wing's imports then run one way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import package_store
from .dtypes import DTYPE_RECORDS

#: the folder inside a model folder that holds the exported packages it carries, one sub-folder per format
EXPORT_DIR = "exported"
MANIFEST = "manifest.json"
#: the model's files a package depends on: its configuration and its weights
_MODEL_FILE_PATTERNS = ("config.json", "*.safetensors")


class ExportError(UserError, RuntimeError):
    """A model that cannot be exported as asked (its type or options, the format, a missing compiler)."""


class ExportedPackageProblem(Exception):
    """An exported package that does not fit the model, torch or CPU loading it; the message says why."""


def exportable_dtypes() -> tuple[str, ...]:
    """The translation formats a model exports in (`TranslationDtype.exports`)."""
    return tuple(name for name, fmt in DTYPE_RECORDS.items() if fmt.exports)


def export_dir(model_dir: str | os.PathLike[str], dtype: str) -> Path:
    """Where packages that ``model_dir`` carries in format ``dtype`` are (``export --output DIR/exported``, or
    copied there from another machine): used only where trusted (`package_store`)."""
    return Path(model_dir) / EXPORT_DIR / dtype


_sha256 = package_store.sha256_of


def model_digest(model_dir: str | os.PathLike[str]) -> str:
    """One digest of the files a package depends on (`_MODEL_FILE_PATTERNS`), by name and content.

    Kept per process for files whose size and modification time have not changed: choosing an engine and
    loading its package both ask, and a model's weights are hundreds of megabytes."""
    folder = Path(model_dir)
    files = sorted({path for pattern in _MODEL_FILE_PATTERNS for path in folder.glob(pattern)})
    stamps = tuple((path.name, path.stat().st_size, path.stat().st_mtime_ns) for path in files)
    return _digest_of(str(folder.resolve()), stamps)


@functools.lru_cache(maxsize=64)
def _digest_of(folder: str, stamps: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for name, _size, _mtime in stamps:
        digest.update(name.encode())
        digest.update(_sha256(Path(folder) / name).encode())
    return digest.hexdigest()


@dataclass
class ExportManifest:
    """What a set of packages was built from and for (``manifest.json``)."""

    dtype: str
    torch: str
    transformers: str
    hf_graphtf: str
    cpu_instruction_set: str
    cpu: str
    model_digest: str
    packages: dict[str, str] = field(default_factory=dict)  # graph name -> sha256 of its .pt2
    #: where the graphs' weights are: "model" (handed over from the loaded model); "package" was int8's before
    #: its activations were scaled per row (torchao's PT2E weights, frozen in): such packages are refused
    weights: str = "model"
    #: what the graphs take and give (`export_graphs.GRAPH_LAYOUT`; 0: from before layouts were recorded)
    graph_layout: int = 0
    build_command: str = ""
    #: the model folder it was built from (absolute), so that a folder whose files changed since is told so
    model_path: str = ""
    build_seconds: float = 0.0
    built: str = ""  # UTC, ISO 8601

    @classmethod
    def read(cls, folder: Path) -> ExportManifest:
        try:
            return cls(**json.loads((folder / MANIFEST).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise
        except (OSError, ValueError, TypeError) as error:
            raise ExportedPackageProblem(f"{folder / MANIFEST} is damaged ({error})") from None

    def write(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class PackageLookup:
    """What an engine's lookup (`aoti.find_exported`, `runtimes.find_runtime`) found: the decoding (None where
    no package is used), the clause saying so or why not, and whether there was a package for the model at all
    (where there was none, eager decoding is not worth a line); ``held``: the engine had a package of the model in
    this dtype that was not used (not fitting, not loading, not trusted), which `auto` says even where another
    engine then decodes."""

    decoding: Any
    clause: str
    found: bool
    held: bool = False


def model_summary(model: Any) -> str:
    """The model's type and its options that differ from vanilla, named as the variants name them."""
    from ..configuration import GRAPH_OPTION_DEFAULTS
    from ..variants import normalized, variant_named

    config = model.config
    options = normalized({name: getattr(config, name) for name in GRAPH_OPTION_DEFAULTS if hasattr(config, name)})
    if not options:
        return config.model_type
    named = variant_named(options)
    described = ", ".join(f"{name}={value}" for name, value in options.items())
    return f"{config.model_type} ({named.name + ': ' if named else ''}{described})"
