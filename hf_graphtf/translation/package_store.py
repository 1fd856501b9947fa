"""Where exported packages live, and which of them may run.

An AOTInductor package (`exported_models`) is a zip holding a compiled shared object: loading it runs that
object's code. A model folder is data (a download, a Hub clone, a colleague's share), and everything a manifest
in it says was written by whoever wrote the folder. So a package runs only where this user built it, or where
the user says they trust whoever did, and that is decided before any byte of the package is loaded:

- ``hf-graphtf export`` builds into this user's store (``$HF_GRAPHTF_CACHE``, default ``~/.cache/hf_graphtf``,
  folder ``exported/``), one folder per model digest, format, torch and CPU instruction set, as Inductor keeps
  its own cache. Nothing native is written into the model folder, so nothing native leaves with it.
- Every package this user builds, there or with ``export --output DIR`` (packages to carry to other machines),
  is recorded in the store by its sha256 (``exported/built/``). A package in a model folder's ``exported/``
  runs where its bytes are ones this user built, or with ``--trust-exported`` (``trust_exported=True``,
  ``HF_GRAPHTF_TRUST_EXPORTED=1``); otherwise it is never opened, and the one line says how to trust it.

Formats that are data (safetensors; ONNX and OpenVINO IR) need none of this.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

#: the environment variable naming the store's root (default ``~/.cache/hf_graphtf``)
CACHE_ENV = "HF_GRAPHTF_CACHE"
#: the environment variable that trusts every exported package a model folder carries (``1``)
TRUST_ENV = "HF_GRAPHTF_TRUST_EXPORTED"
#: the flag of ``translate`` and ``evaluate`` that does the same for one command
TRUST_FLAG = "--trust-exported"
_TRUE = ("1", "true", "yes", "on")


def store_root() -> Path:
    """The folder of this user's exported packages and build record: ``$HF_GRAPHTF_CACHE/exported`` or
    ``$XDG_CACHE_HOME/hf_graphtf/exported`` (``~/.cache`` by default)."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hf_graphtf"
    return Path(root).expanduser() / "exported"


def trusted_by_environment() -> bool:
    """Whether ``HF_GRAPHTF_TRUST_EXPORTED`` trusts every carried package."""
    return os.environ.get(TRUST_ENV, "").strip().lower() in _TRUE


def sha256_of(path: Path) -> str:
    """The sha256 of a file, read as bytes (hashing a package opens it as data, never as code)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoreKey:
    """What a package in the store was built from and for: the model's files (`aoti.model_digest`),
    the format, torch and the CPU instruction set. A changed model has another digest, so the packages of
    its earlier weights are never found for it."""

    model_digest: str
    dtype: str
    torch: str
    cpu_instruction_set: str

    def folder(self) -> Path:
        """``<store>/<model digest>/<dtype>-torch<version>-<isa>``: names a user can read and delete by."""
        isa = re.sub(r"[^A-Za-z0-9]+", "_", self.cpu_instruction_set).strip("_").lower() or "cpu"
        torch = re.sub(r"[^A-Za-z0-9.+]+", "_", self.torch)
        return store_root() / self.model_digest[:32] / f"{self.dtype}-torch{torch}-{isa}"


def _record_folder() -> Path:
    return store_root() / "built"


def record_built(package: Path) -> str:
    """Record ``package`` as built by this user (one empty file named by its sha256: two exports at once each
    add their own, and none rewrites another's); returns the digest."""
    digest = sha256_of(package)
    folder = _record_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (folder / digest).touch()
    return digest


def built_here(packages: list[Path]) -> bool:
    """Whether every one of ``packages`` is a file whose bytes this user built (`record_built`)."""
    folder = _record_folder()
    return bool(packages) and all(path.is_file() and (folder / sha256_of(path)).is_file() for path in packages)


def untrusted_line(folder: Path, dtype: str, model_dir: str) -> str:
    """The clause for a carried package that is not opened: where it is, why, and how to use it."""
    return (
        f"the exported {dtype} package in {folder} was not built by you on this machine, so it was not opened "
        f"(a package is native code, and loading it runs it): pass {TRUST_FLAG} (trust_exported=True, or "
        f"{TRUST_ENV}=1) if you trust whoever built it, or build your own with "
        f"hf-graphtf export --model {model_dir} --dtype {dtype}"
    )


__all__ = [
    "CACHE_ENV",
    "TRUST_ENV",
    "TRUST_FLAG",
    "StoreKey",
    "built_here",
    "record_built",
    "sha256_of",
    "store_root",
    "trusted_by_environment",
    "untrusted_line",
]
