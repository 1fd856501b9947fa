"""Checks on a saved model folder before Transformers reads it, so that a mistake gets a plain message.

Without them a folder that does not exist reaches the Hub client ("Repo id must be in the form ...",
23 frames deep), an empty folder makes `AutoTokenizer` ask for sentencepiece, and a weights file cut
short by a crash or a full disk fails inside safetensors with no file name. `check_model_source`
names the folder and what is wrong with it; `weights_problem` reads only each safetensors header,
so the check costs microseconds, not a pass over the weights.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILE = "pytorch_model.bin"
PICKLE_INDEX = "pytorch_model.bin.index.json"
#: folders the FSDP (sharded state dict) and DeepSpeed engines write instead of whole-model files
ENGINE_WEIGHT_PREFIXES = ("pytorch_model_fsdp", "global_step")


class ModelFolderError(UserError, ValueError):
    """A model folder that cannot be loaded as given; the message names the folder or file."""


def safetensors_problem(path: str | os.PathLike[str]) -> str | None:
    """What is wrong with a safetensors file (cut short, damaged header), or None."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            return f"{path}: damaged weights file ({size} bytes, not even a safetensors header)"
        (header_length,) = struct.unpack("<Q", prefix)
        if 8 + header_length > size:
            return f"{path}: damaged weights file (cut short: {size} bytes, its header alone needs {8 + header_length})"
        try:
            header = json.loads(handle.read(header_length))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return f"{path}: damaged weights file (unreadable safetensors header)"
    if not isinstance(header, dict):
        return f"{path}: damaged weights file (unreadable safetensors header)"
    ends = [
        info["data_offsets"][1] for name, info in header.items() if name != "__metadata__" and isinstance(info, dict)
    ]
    needed = 8 + header_length + max(ends, default=0)
    if size < needed:
        return f"{path}: damaged weights file (cut short: {size} of {needed} bytes)"
    return None


def _index_problem(index_path: Path) -> str | None:
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as error:
        return f"{index_path}: unreadable weights index ({error})"
    for shard in sorted(set(weight_map.values())):
        shard_path = index_path.parent / shard
        if not shard_path.is_file():
            return f"{shard_path}: missing (listed in {index_path.name})"
        if shard.endswith(".safetensors"):
            problem = safetensors_problem(shard_path)
            if problem:
                return problem
    return None


def weights_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why the model weights in ``folder`` cannot be loaded (missing, cut short), or None."""
    folder = Path(folder)
    if (folder / SAFETENSORS_INDEX).is_file():
        return _index_problem(folder / SAFETENSORS_INDEX)
    if (folder / SAFETENSORS_FILE).is_file():
        return safetensors_problem(folder / SAFETENSORS_FILE)
    if (folder / PICKLE_INDEX).is_file():
        return _index_problem(folder / PICKLE_INDEX)
    if (folder / PICKLE_FILE).is_file():
        return None
    if any(path.name.startswith(ENGINE_WEIGHT_PREFIXES) for path in folder.iterdir()):
        return None
    return f"{folder}: no model weights ({SAFETENSORS_FILE} or {PICKLE_FILE})"


def _looks_local(name: str) -> bool:
    """Whether a name that exists nowhere was meant as a folder rather than a Hub id (``user/model``)."""
    path = Path(name).expanduser()
    if name.startswith((".", "/", "~")) or len(path.parts) > 2 or os.sep != "/" and os.sep in name:
        return True
    return len(path.parts) == 2 and path.parent.is_dir()  # outputs/quickstart where outputs/ exists


#: how long the Hub gets to answer before a Hub id is refused (huggingface_hub itself retries for about 45 s)
HUB_PROBE_SECONDS = 4.0
#: how long one probe's answer holds: a command checks its model twice (the CLI, then `load_model`; the training
#: script its config, then its weights), and each would otherwise wait for the Hub again
_PROBE_HOLDS_SECONDS = 60.0
_probed: dict[tuple[str, int], tuple[float, bool]] = {}
#: the Hub ids whose cached copy was said to be used, so that the line comes once a process
_said_cached: set[str] = set()


def check_hub_reachable(name: str) -> None:
    """Refuse the Hub id ``name`` in one line, within seconds, when the Hub cannot be reached and the id is not
    in the local Hugging Face cache: huggingface_hub would print retry lines for most of a minute before its
    own error, which does not say that ``HF_HUB_OFFLINE=1`` makes it answer at once. A cached id loads as
    before (after huggingface_hub's own wait, which ``HF_HUB_OFFLINE=1`` skips: said in one line). Nothing is
    probed under ``HF_HUB_OFFLINE``."""
    import sys
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    proxied = any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "ALL_PROXY"))
    if constants.HF_HUB_OFFLINE or proxied:  # through a proxy, a direct connection says nothing
        return
    endpoint = urlparse(constants.ENDPOINT)
    if _hub_answers(endpoint.hostname or "", endpoint.port or (443 if endpoint.scheme == "https" else 80)):
        return
    cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    where = f"the Hugging Face Hub ({constants.ENDPOINT}) cannot be reached from this machine"
    if cached:
        if name in _said_cached:
            return
        _said_cached.add(name)
        print(
            f"hf-graphtf: {name}: {where}; using its copy in your Hugging Face cache (HF_HUB_OFFLINE=1 skips the "
            "wait for the Hub)",
            file=sys.stderr,
            flush=True,
        )
        return
    raise ModelFolderError(
        f"{name}: not a folder here, and {where}, and it is not in your Hugging Face cache; download it where "
        "the Hub is reachable (or copy its folder here and give the folder), then set HF_HUB_OFFLINE=1 to load "
        "it from the cache without asking the Hub"
    )


def _hub_answers(host: str, port: int) -> bool:
    """`_reachable`, asked once per `_PROBE_HOLDS_SECONDS`."""
    import time

    now = time.monotonic()
    asked = _probed.get((host, port))
    if asked is None or now - asked[0] > _PROBE_HOLDS_SECONDS:
        asked = _probed[(host, port)] = (now, _reachable(host, port))
    return asked[1]


def _reachable(host: str, port: int) -> bool:
    """Whether a TCP connection to ``host:port`` opens within `HUB_PROBE_SECONDS` (name lookup included, which
    a socket timeout does not bound: it runs in a thread of its own)."""
    import socket
    import threading

    answer: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=HUB_PROBE_SECONDS).close()
            answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(HUB_PROBE_SECONDS)
    return bool(answer and answer[0])


#: files of which a saved tokenizer has at least one (fast: tokenizer.json; sentencepiece, BPE or WordPiece
#: vocabularies; the config every `save_pretrained` writes)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "source.spm",
    "sentencepiece.bpe.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
)


def check_model_source(name: str | os.PathLike[str], *, weights: bool = True, tokenizer: bool = False) -> None:
    """Raise `ModelFolderError` when ``name`` is a local model folder that cannot be loaded.

    Hub ids pass through unchanged (Transformers downloads or finds them in its cache). With
    ``weights=False`` only the folder's existence and contents are checked (for loading a tokenizer). With
    ``tokenizer``, a folder without tokenizer files is refused too, by name: Transformers' own error for it
    says "You need to have sentencepiece or tiktoken installed", which sends a user to reinstall what is there.
    """
    text = os.fspath(name)
    path = Path(text).expanduser()
    if not path.exists():
        if _looks_local(text):
            raise ModelFolderError(f"{text}: no such model folder")
        check_hub_reachable(text)
        return
    if not path.is_dir():
        raise ModelFolderError(
            f"{text}: a file, not a model folder (expected config.json, weights and tokenizer files)"
        )
    contents = sorted(entry.name for entry in path.iterdir())
    if not contents:
        raise ModelFolderError(f"{text}: the folder is empty (expected a saved model: config.json, weights, tokenizer)")
    if not weights:
        return  # a tokenizer folder needs no config.json
    if "config.json" not in contents:
        shown = ", ".join(contents[:8]) + (", ..." if len(contents) > 8 else "")
        raise ModelFolderError(f"{text}: no config.json, so not a saved model folder (it holds {shown})")
    problem = weights_problem(path)
    if problem:
        raise ModelFolderError(problem)
    if tokenizer and not set(TOKENIZER_FILES) & set(contents):
        raise ModelFolderError(
            f"{text}: no tokenizer files (none of {', '.join(TOKENIZER_FILES[:2])}, ...), so its text cannot be "
            "read or written; save the tokenizer into the folder (tokenizer.save_pretrained(folder)) or copy its "
            "files there from the folder it was trained in"
        )


@contextmanager
def named_source(name: str | os.PathLike[str]) -> Iterator[None]:
    """Loading from ``name`` inside: a name that is no folder here goes to the Hub, and when the Hub cannot give
    it (no such id, no network, offline) Transformers raises an `OSError` chained several deep. That becomes
    one `ModelFolderError` naming both readings: often the name was a mistyped folder (``quickstart`` for
    ``outputs/quickstart``), which `check_model_source` cannot tell from a Hub id."""
    try:
        yield
    except OSError as error:
        text = os.fspath(name)
        if Path(text).expanduser().exists():
            raise
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ModelFolderError(f"{text}: no folder of that name here, and as a Hub id: {reason}") from error


__all__ = ["ModelFolderError", "check_model_source", "named_source", "safetensors_problem", "weights_problem"]
