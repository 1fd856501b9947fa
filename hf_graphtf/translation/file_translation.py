"""Translating a file so that an interrupted run resumes where it stopped and never leaves a file that looks
finished.

A file of a million lines takes hours, and a run is killed for many reasons (a closed laptop, a pre-empted
job, a full disk). So the translations go to ``FILE.partial`` chunk by chunk, each chunk flushed to disk,
beside ``FILE.partial.json``: a record of the job (a hash of the input, its line count, the model, the
search options and the number format). ``FILE`` appears, by a rename, only once whole. Run the same job
again and it resumes after the last whole line the partial file holds; a partial file of another job is
refused, naming what differs, rather than mixed in.

`translate_file` is the call for a library user with a loaded model; ``hf-graphtf translate --output``
runs the same `FileTranslation`, with its own per-chunk reporting of long and unknown input.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError

#: batches translated between two appends to the ``.partial`` file: an interrupted run loses at most this
#: many batches' work
CHUNK_BATCHES = 50


class PartialOutputError(UserError, ValueError):
    """A ``.partial`` file left by another job, or without its record: deleting it is the user's call."""


class FileTranslation:
    """One job: ``texts`` translated into ``output``, resumable. `resume` checks or starts the partial
    file before any model loads (a refusal is said first); `run` translates what is missing."""

    def __init__(
        self,
        texts: Sequence[str],
        output: str | os.PathLike[str],
        *,
        model: str,
        beam_size: int | None,
        max_new_tokens: int | None,
        dtype: str,
        batch_size: int,
        language_codes: dict[str, str | None] | None = None,
    ) -> None:
        self.texts = list(texts)
        self.output = Path(output)
        self.partial = self.output.with_name(self.output.name + ".partial")
        self.record = self.output.with_name(self.output.name + ".partial.json")
        self.batch_size = batch_size
        #: what identifies the job: a partial file whose record differs in any of these is refused (the keys
        #: are those of the records earlier releases wrote, so their partial files still resume)
        self.job: dict[str, Any] = {
            "input_sha256": hashlib.sha256("\n".join(self.texts).encode("utf-8")).hexdigest(),
            "lines": len(self.texts),
            "model": model,
            "beam_size": beam_size,
            "max_new_tokens": max_new_tokens,
            "dtype": dtype,
        }
        # only where given: a job without them keeps the record earlier releases wrote
        self.job.update({field: code for field, code in (language_codes or {}).items() if code is not None})
        self.done = 0

    def resume(self) -> int:
        """Start the job, or take up the one the partial file holds; returns the lines translated before.
        A line the interruption cut short is dropped, to be translated again. A partial file that holds no
        whole line (a job that stopped before its first chunk) has nothing to lose, so the job starts over
        whatever it was."""
        held = self.partial.read_bytes() if self.partial.exists() else b""
        whole = held.rfind(b"\n") + 1
        if whole == 0:
            self.output.parent.mkdir(parents=True, exist_ok=True)
            self.record.write_text(json.dumps(self.job), encoding="utf-8")
            self.partial.write_bytes(b"")
            self.done = 0
            return 0
        if not self.record.exists():
            raise PartialOutputError(
                f"{self.partial} is left from a translation, without {self.record.name}: delete it to start over"
            )
        recorded = json.loads(self.record.read_text(encoding="utf-8"))
        differing = [name for name in self.job if recorded.get(name) != self.job[name]]
        if differing:
            raise PartialOutputError(
                f"{self.partial} holds part of another translation (it differs in {', '.join(differing)}): "
                f"delete it and {self.record.name} to start over"
            )
        if whole < len(held):
            with open(self.partial, "r+b") as handle:
                handle.truncate(whole)
        self.done = held[:whole].count(b"\n")
        return self.done

    def discard_if_empty(self) -> None:
        """Remove the partial file and its record where the partial file holds nothing: called when the job
        fails before its first chunk (a model that does not load, a refused option), so that no file is left
        that looks like a translation under way."""
        if self.partial.exists() and self.partial.stat().st_size == 0:
            self.partial.unlink()
            self.record.unlink(missing_ok=True)

    def run(self, translate: Callable[[Sequence[str], int], list[str]]) -> Path:
        """Translate the lines not yet done, ``translate(chunk, first_line)`` a chunk at a time (lines
        numbered from 1), each chunk appended and synced before the next; then rename the partial file to
        the output and drop the record. Returns the output's path."""
        chunk = CHUNK_BATCHES * self.batch_size
        try:
            with open(self.partial, "a", encoding="utf-8") as handle:
                for start in range(self.done, len(self.texts), chunk):
                    translations = translate(self.texts[start : start + chunk], start + 1)
                    handle.writelines(text + "\n" for text in translations)
                    handle.flush()
                    os.fsync(handle.fileno())
        except BaseException:
            self.discard_if_empty()
            raise
        os.replace(self.partial, self.output)
        self.record.unlink()
        return self.output


def translate_file(
    tokenizer: Any,
    model: Any,
    texts: Sequence[str],
    output: str | os.PathLike[str],
    *,
    batch_size: int = 32,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    progress: bool = False,
    src_lang_code: str | None = None,
    tgt_lang_code: str | None = None,
) -> int:
    """Translate ``texts`` into the file ``output``, one line each, resuming an interrupted run of the same
    job (`FileTranslation`); returns how many lines an earlier run had translated. The job is identified
    by the model's ``name_or_path`` and number format (`inference.load_model` sets it; otherwise its torch
    dtype) and the language codes given (NLLB-200, M2M100: `inference.use_language_codes`, as `translate
    --src-lang-code/--tgt-lang-code`), so a partial file of another model, format or language is refused.
    Long and unknown input is reported as `translate_texts` reports it, by warnings."""
    from .dtypes import aliases
    from .inference import translate_texts, use_language_codes

    use_language_codes(tokenizer, model, src_lang_code, tgt_lang_code)

    mode = getattr(model, "decoding_setup", None)
    # in the package's spelling (fp32, as `hf-graphtf translate` records it), so either may resume the other's job
    torch_name = str(model.dtype).removeprefix("torch.")
    dtype = mode.dtype if mode is not None else aliases().get(torch_name, torch_name)
    job = FileTranslation(
        texts,
        output,
        model=str(model.name_or_path),
        beam_size=num_beams,
        max_new_tokens=max_new_tokens,
        dtype=dtype,
        batch_size=batch_size,
        language_codes={"src_lang_code": src_lang_code, "tgt_lang_code": tgt_lang_code},
    )
    done = job.resume()
    job.run(
        lambda chunk, first_line: translate_texts(
            tokenizer,
            model,
            chunk,
            batch_size=batch_size,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            progress=progress,
            first_line=first_line,
        )
    )
    return done


__all__ = ["CHUNK_BATCHES", "FileTranslation", "PartialOutputError", "translate_file"]
