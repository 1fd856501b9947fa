"""Load user parallel corpora into ``datasets`` objects with a ``translation`` column.

Every loader returns rows shaped like the Hugging Face translation datasets,
``{"translation": {src_lang: ..., tgt_lang: ...}}``, so training code handles one format.  Local
files are read here rather than through ``datasets.load_dataset("json", ...)`` so that bad
input fails with the file name and line number instead of a parser trace or, worse, a silently
misaligned corpus.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import datasets

from ..errors import UserError
from .bible_pairs import BIBLE_BUILDERS, build_corpus_command
from .fingerprints import META_FILE, fingerprint_mismatch, read_meta
from .text_files import TextEncodingError, read_text_lines

__all__ = [
    "HUB_CORPORA",
    "CorpusError",
    "CorpusFileNotFound",
    "load_parallel_corpus",
    "read_jsonl_pairs",
    "read_text_pairs",
    "read_tsv_pairs",
]

Rows = dict[str, list[Any]]

# Short names for Hub corpora used in the literature: name -> (Hub id, config, language pair).
HUB_CORPORA: dict[str, tuple[str, str | None, tuple[str, str]]] = {
    "iwslt14-de-en": ("bbaaaa/iwslt14-de-en", "de-en", ("de", "en")),
    "iwslt2017-de-en": ("IWSLT/iwslt2017", "iwslt2017-de-en", ("de", "en")),
    "wmt14-en-de": ("wmt/wmt14", "de-en", ("en", "de")),
}
# Hub datasets whose config names the language pair, e.g. iwslt2017 -> "iwslt2017-de-en".
_PAIR_CONFIG_TEMPLATES = {"iwslt2017": "iwslt2017-{src}-{tgt}", "IWSLT/iwslt2017": "iwslt2017-{src}-{tgt}"}
_SPLIT_ALIASES = {"valid": ("validation", "dev"), "validation": ("valid", "dev"), "dev": ("valid", "validation")}
_LANG_CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)?$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?$")


class CorpusError(UserError, ValueError):
    """A parallel corpus that cannot be used as given; the message names the file and line."""


class CorpusFileNotFound(CorpusError, FileNotFoundError):
    """A corpus file that does not exist."""


def _read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file (BOM dropped) without line terminators; a final newline adds no line."""
    try:
        return read_text_lines(path)
    except FileNotFoundError:
        raise CorpusFileNotFound(f"{path}: no such file") from None
    except TextEncodingError as error:
        raise CorpusError(str(error)) from None


def read_text_pairs(prefix: str | os.PathLike[str], *, src_lang: str, tgt_lang: str) -> Rows:
    """Read ``{prefix}.{src_lang}`` and ``{prefix}.{tgt_lang}``, one sentence per line, aligned by line."""
    paths = {lang: Path(f"{os.fspath(prefix)}.{lang}") for lang in (src_lang, tgt_lang)}
    missing = [str(path) for path in paths.values() if not path.is_file()]
    if missing:
        raise CorpusFileNotFound(f"missing parallel text file(s): {', '.join(missing)}")
    lines = {lang: _read_lines(path) for lang, path in paths.items()}
    if len(lines[src_lang]) != len(lines[tgt_lang]):
        raise CorpusError(
            f"misaligned parallel files: {paths[src_lang]} has {len(lines[src_lang])} lines but "
            f"{paths[tgt_lang]} has {len(lines[tgt_lang])} lines"
        )
    for lang, path in paths.items():
        for number, line in enumerate(lines[lang], start=1):
            if not line.strip():
                raise CorpusError(f"{path}, line {number}: empty line (every line must hold a sentence)")
    pairs = [{src_lang: src, tgt_lang: tgt} for src, tgt in zip(lines[src_lang], lines[tgt_lang])]
    return {"translation": pairs}


def read_tsv_pairs(path: str | os.PathLike[str], *, src_lang: str, tgt_lang: str) -> Rows:
    """Read ``source<TAB>target`` lines; an optional header row may name the two languages.

    Without a header the first column is ``src_lang``.  A header such as ``en<TAB>de`` puts the
    columns in its own order; one naming other languages is an error rather than a guess.
    """
    path = Path(path)
    lines = _read_lines(path)
    order = (src_lang, tgt_lang)
    start = 0
    if lines:
        header = [field.strip() for field in lines[0].split("\t")]
        if len(header) == 2 and set(header) == {src_lang, tgt_lang}:
            order = (header[0], header[1])
            start = 1
        elif (
            len(header) == 2
            and all(_LANG_CODE.match(field) for field in header)
            and ({src_lang, tgt_lang} & set(header))
        ):
            # "fr<TAB>en" when asked for de-en: a header for another pair, not a sentence pair.
            raise CorpusError(
                f"{path}, line 1: header names languages {header[0]!r} and {header[1]!r}, "
                f"expected {src_lang!r} and {tgt_lang!r}"
            )
    pairs = []
    for number, line in enumerate(lines[start:], start=start + 1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise CorpusError(
                f"{path}, line {number}: expected 2 tab-separated columns ({order[0]}, {order[1]}), got {len(fields)}"
            )
        for lang, field in zip(order, fields):
            if not field.strip():
                raise CorpusError(f"{path}, line {number}: empty {lang} column")
        pairs.append({src_lang: fields[order.index(src_lang)], tgt_lang: fields[order.index(tgt_lang)]})
    return {"translation": pairs}


_JSON_ARRAY_HINT = (
    '; expected JSON Lines: one object per line, {"translation": {"<src>": ..., "<tgt>": ...}}, '
    "not one JSON array of them"
)
_JSON_KINDS = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _json_kind(value: Any) -> str:
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def _check_extra_columns(record: dict[str, Any], first_seen: dict[str, tuple[str, int]], path: Path, number: int):
    """Columns besides ``translation`` hold one kind of value on every line (``datasets`` needs one
    type per column), and ``references`` maps languages to lists of strings."""
    for column, value in record.items():
        if column == "translation" or value is None:
            continue
        kind = _json_kind(value)
        earlier = first_seen.setdefault(column, (kind, number))
        if earlier[0] != kind:
            raise CorpusError(
                f"{path}, line {number}: {column!r} is {kind} here but {earlier[0]} on line {earlier[1]}; "
                "a column holds one kind of value on every line"
            )
    references = record.get("references")
    if references is not None and not (
        isinstance(references, dict)
        and all(
            isinstance(texts, list) and all(isinstance(text, str) for text in texts) for texts in references.values()
        )
    ):
        raise CorpusError(
            f"{path}, line {number}: 'references' must be an object of language -> list of sentences, "
            f'e.g. {{"en": ["...", "..."]}}'
        )


def read_jsonl_pairs(path: str | os.PathLike[str], *, src_lang: str, tgt_lang: str) -> Rows:
    """Read JSON lines with a ``translation`` object holding both languages.

    Other top-level fields (``id``, ``references``) are kept when every line has them.
    """
    path = Path(path)
    records = []
    first_seen: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            raise CorpusError(f"{path}, line {number}: empty line")
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            hint = _JSON_ARRAY_HINT if number == 1 and line.lstrip().startswith("[") else ""
            raise CorpusError(f"{path}, line {number}: invalid JSON ({error.msg}){hint}") from None
        if isinstance(record, list):
            raise CorpusError(f"{path}, line {number}: a JSON array{_JSON_ARRAY_HINT}")
        if not isinstance(record, dict) or "translation" not in record:
            raise CorpusError(f"{path}, line {number}: no 'translation' column")
        translation = record["translation"]
        if not isinstance(translation, dict):
            raise CorpusError(f"{path}, line {number}: 'translation' must be an object of language -> text")
        missing = [lang for lang in (src_lang, tgt_lang) if lang not in translation]
        if missing:
            raise CorpusError(
                f"{path}, line {number}: 'translation' lacks language key(s) {missing} (has {sorted(translation)})"
            )
        for lang in (src_lang, tgt_lang):
            if not isinstance(translation[lang], str) or not translation[lang].strip():
                raise CorpusError(f"{path}, line {number}: empty or non-text {lang} translation")
        record["translation"] = {src_lang: translation[src_lang], tgt_lang: translation[tgt_lang]}
        _check_extra_columns(record, first_seen, path, number)
        records.append(record)
    shared = set.intersection(*(set(record) for record in records)) if records else {"translation"}
    columns = [column for column in records[0] if column in shared] if records else ["translation"]
    return {column: [record[column] for record in records] for column in columns}


def _translation_features(src_lang: str, tgt_lang: str, rows: Rows) -> datasets.Features | None:
    """Declare ``translation`` as a Translation feature when the other columns infer cleanly."""
    if set(rows) != {"translation"}:
        return None
    return datasets.Features({"translation": datasets.Translation(languages=[src_lang, tgt_lang])})


def _to_dataset(rows: Rows, *, src_lang: str, tgt_lang: str, source: Path) -> datasets.Dataset:
    if not rows["translation"]:
        raise CorpusError(f"{source}: no sentence pairs")
    return datasets.Dataset.from_dict(rows, features=_translation_features(src_lang, tgt_lang, rows))


def _read_local(path: Path, *, src_lang: str, tgt_lang: str) -> Rows:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return read_jsonl_pairs(path, src_lang=src_lang, tgt_lang=tgt_lang)
    if suffix in (".tsv", ".tab"):
        return read_tsv_pairs(path, src_lang=src_lang, tgt_lang=tgt_lang)
    raise CorpusError(f"{path}: unknown corpus format (expected .jsonl, .tsv or a {{prefix}}.{{lang}} pair)")


def _directory_splits(directory: Path, *, src_lang: str, tgt_lang: str) -> dict[str, Path | str | list[Path | str]]:
    """Split name -> file (JSONL/TSV) or text-pair prefix found in ``directory`` (a list when several)."""
    candidates: dict[str, list[Path | str]] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix.lower() in (".jsonl", ".tsv") and path.is_file():
            candidates.setdefault(path.stem, []).append(path)
    for path in sorted(directory.glob(f"*.{src_lang}")):
        stem = path.name[: -len(src_lang) - 1]
        if (directory / f"{stem}.{tgt_lang}").is_file():
            candidates.setdefault(stem, []).append(str(directory / stem))
    return {stem: found[0] if len(found) == 1 else found for stem, found in candidates.items()}


def _unambiguous(name: str, location: Path | str | list[Path | str], src_lang: str, tgt_lang: str) -> Path | str:
    """The one file (or text-pair prefix) of a split, or an error naming all of them."""
    if not isinstance(location, list):
        return location
    shown = ", ".join(
        str(found) if isinstance(found, Path) else f"{found}.{src_lang} + {found}.{tgt_lang}" for found in location
    )
    raise CorpusError(f"split {name!r} is given by more than one file ({shown}): keep one, so that none is ignored")


def _recorded_fingerprints(directory: Path) -> dict[str, dict[str, Any]]:
    """File name -> fingerprint recorded by ``build-corpus`` in the folder's meta.json (empty if none)."""
    if not (directory / META_FILE).is_file():
        return {}
    try:
        files = read_meta(directory).get("files")
    except ValueError as error:
        raise CorpusError(str(error)) from None
    return files if isinstance(files, dict) else {}


def _load_directory(
    directory: Path, *, src_lang: str, tgt_lang: str, split: str | None
) -> datasets.Dataset | datasets.DatasetDict:
    found = _directory_splits(directory, src_lang=src_lang, tgt_lang=tgt_lang)
    if not found:
        raise CorpusFileNotFound(
            f"{directory}: no corpus files (expected {{split}}.jsonl, {{split}}.tsv or "
            f"{{split}}.{src_lang} + {{split}}.{tgt_lang})"
        )
    if split is not None:
        wanted = next((name for name in (split, *_SPLIT_ALIASES.get(split, ())) if name in found), None)
        if wanted is None:
            raise CorpusError(f"{directory}: no split {split!r} (available: {sorted(found)})")
        found = {wanted: found[wanted]}
    recorded = _recorded_fingerprints(directory)
    loaded = {}
    for name, location in found.items():
        location = _unambiguous(name, location, src_lang, tgt_lang)
        if isinstance(location, Path) and location.name in recorded:
            mismatch = fingerprint_mismatch(location, recorded[location.name])
            if mismatch:
                raise CorpusError(
                    f"{mismatch}: the file was changed or cut short after the corpus was built; rebuild it "
                    f"(hf-graphtf build-corpus --output-dir {directory}) or remove {directory / META_FILE}"
                )
        if isinstance(location, Path):
            rows = _read_local(location, src_lang=src_lang, tgt_lang=tgt_lang)
        else:
            rows = read_text_pairs(location, src_lang=src_lang, tgt_lang=tgt_lang)
        loaded[name] = _to_dataset(rows, src_lang=src_lang, tgt_lang=tgt_lang, source=Path(str(location)))
    if split is not None:
        return next(iter(loaded.values()))
    return datasets.DatasetDict(loaded)


def _normalize_hub(
    data: datasets.Dataset, *, src_lang: str, tgt_lang: str, columns: Mapping[str, str] | None, name: str
) -> datasets.Dataset:
    """Reduce a Hub dataset to ``{"translation": {src_lang, tgt_lang}}`` rows."""
    features = datasets.Features({"translation": datasets.Translation(languages=[src_lang, tgt_lang])})
    if columns is not None:
        missing = [column for column in columns.values() if column not in data.column_names]
        if missing or set(columns) != {src_lang, tgt_lang}:
            raise CorpusError(
                f"{name}: columns={dict(columns)} must map {src_lang!r} and {tgt_lang!r} to existing "
                f"columns (dataset has {data.column_names})"
            )

        def from_columns(row: dict[str, Any]) -> dict[str, Any]:
            return {"translation": {lang: row[column] for lang, column in columns.items()}}

        return data.map(from_columns, remove_columns=data.column_names, features=features)
    if "translation" not in data.column_names:
        raise CorpusError(
            f"{name}: no 'translation' column (columns: {data.column_names}); pass columns="
            f"{{{src_lang!r}: ..., {tgt_lang!r}: ...}} to name the text columns"
        )
    feature = data.features["translation"]
    if hasattr(feature, "languages"):  # a datasets.Translation feature
        available = list(feature.languages)
    elif isinstance(feature, dict):  # a plain struct of language -> text
        available = list(feature)
    else:
        raise CorpusError(
            f"{name}: the 'translation' column holds {feature}, not language -> text pairs; pass "
            f"columns={{{src_lang!r}: ..., {tgt_lang!r}: ...}} to name the text columns"
        )
    missing = [lang for lang in (src_lang, tgt_lang) if lang not in available]
    if missing:
        raise CorpusError(f"{name}: 'translation' has languages {available}, not {missing}")

    def select(row: dict[str, Any]) -> dict[str, Any]:
        return {"translation": {src_lang: row["translation"][src_lang], tgt_lang: row["translation"][tgt_lang]}}

    return data.map(select, remove_columns=data.column_names, features=features)


def _load_hub(
    name: str,
    *,
    src_lang: str,
    tgt_lang: str,
    split: str | None,
    config: str | None,
    columns: Mapping[str, str] | None,
) -> datasets.Dataset | datasets.DatasetDict:
    """Load a Hub dataset (needs network access) and normalize its translation column."""
    hub_id = name
    if name in HUB_CORPORA:
        hub_id, known_config, pair = HUB_CORPORA[name]
        if set(pair) != {src_lang, tgt_lang}:
            raise CorpusError(f"{name} is a {pair[0]}-{pair[1]} corpus, not {src_lang}-{tgt_lang}")
        config = config or known_config
    elif config is None and name in _PAIR_CONFIG_TEMPLATES:
        config = _PAIR_CONFIG_TEMPLATES[name].format(src=src_lang, tgt=tgt_lang)
    loaded = datasets.load_dataset(hub_id, config, split=split)
    if isinstance(loaded, datasets.DatasetDict):
        return datasets.DatasetDict(
            {
                split_name: _normalize_hub(part, src_lang=src_lang, tgt_lang=tgt_lang, columns=columns, name=name)
                for split_name, part in loaded.items()
            }
        )
    return _normalize_hub(loaded, src_lang=src_lang, tgt_lang=tgt_lang, columns=columns, name=name)


#: a source written like this is a Hub dataset id, whatever folders exist here (huggingface_hub's URL form)
HUB_PREFIX = "hf://datasets/"
#: names that go to the Hub as they are: the short names and the Hub ids they stand for
_KNOWN_HUB_NAMES = {*HUB_CORPORA, *(hub_id for hub_id, _, _ in HUB_CORPORA.values()), *_PAIR_CONFIG_TEMPLATES}


def _looks_local(source: str) -> bool:
    """Whether a ``source`` that exists nowhere was meant as a local path rather than a Hub name.

    ``data/bible-es-en`` could be either; a path whose first folder is not here counts as local too,
    because a forgotten ``build-corpus`` (or a run started outside the repository) is far more likely
    than a Hub id, and sending it to the Hub costs half a minute of retries and a traceback that never
    says the folder is missing. A Hub id of that shape is written ``hf://datasets/owner/name``; short
    names (``wmt14``, ``iwslt14-de-en``) go to the Hub as they are.
    """
    path = Path(source).expanduser()
    if source.startswith((".", "/", "~")) or path.suffix.lower() in (".jsonl", ".json", ".tsv", ".txt"):
        return True
    if len(path.parts) > 1:
        return True
    return not _HUB_ID.match(source)


def _missing_local_source(path: Path, src_lang: str, tgt_lang: str, root: Path | None = None) -> CorpusFileNotFound:
    """The one-line error for a local corpus that is not there, with what builds it."""
    where = path if path.is_absolute() else (root or Path.cwd()) / path
    if path.suffix:
        return CorpusFileNotFound(f"{path}: no such file ({where}).")
    build = build_corpus_command(path, src_lang, tgt_lang)
    bible = (
        f"For the Bible corpus run `{build}` (from the folder the path is relative to, the repository root for "
        "the recipes)"
        if build
        else f"The Bible corpus is built only for {', '.join(BIBLE_BUILDERS)}, not {src_lang}-{tgt_lang}"
    )
    return CorpusFileNotFound(
        f"{path}: no such corpus folder ({where}), and no text files {path}.{src_lang} / {path}.{tgt_lang}. "
        f"{bible}; for a Hub dataset of that name write {HUB_PREFIX}{path.as_posix()}."
    )


def load_parallel_corpus(
    source: str | os.PathLike[str],
    *,
    src_lang: str,
    tgt_lang: str,
    split: str | None = None,
    config: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> datasets.Dataset | datasets.DatasetDict:
    """Load a parallel corpus as rows with ``translation = {src_lang: ..., tgt_lang: ...}``.

    ``source`` may be:

    * a directory of splits: ``{split}.jsonl`` (the Bible corpus format), ``{split}.tsv``, or
      ``{split}.{src_lang}`` + ``{split}.{tgt_lang}`` text files;
    * a ``.jsonl`` file with a ``translation`` column, or a ``.tsv`` file;
    * a prefix ``corpus/train`` naming ``corpus/train.de`` and ``corpus/train.en``;
    * a Hub dataset: a short name from :data:`HUB_CORPORA` (``"iwslt14-de-en"``,
      ``"iwslt2017-de-en"``, ``"wmt14-en-de"``), ``"iwslt2017"`` (config derived from the
      language pair), a one-part id (``"wmt14"``), or any id as ``hf://datasets/owner/name``, with an
      optional ``config``; ``columns`` maps each language to a text column for datasets without a
      ``translation`` column. A two-part path that exists nowhere is a missing local folder.

    Multi-split sources give a ``DatasetDict``, or one ``Dataset`` when ``split`` is named
    ("valid" and "validation" are interchangeable); single files give a ``Dataset``.  Problems
    raise :class:`CorpusError` naming the file and line.
    """
    if src_lang == tgt_lang:
        raise CorpusError(f"src_lang and tgt_lang are both {src_lang!r}")
    text = os.fspath(source)
    path = Path(text).expanduser()
    if path.is_dir():
        return _load_directory(path, src_lang=src_lang, tgt_lang=tgt_lang, split=split)
    if path.is_file():
        rows = _read_local(path, src_lang=src_lang, tgt_lang=tgt_lang)
        return _to_dataset(rows, src_lang=src_lang, tgt_lang=tgt_lang, source=path)
    if _has_text_files(path, src_lang, tgt_lang):
        rows = read_text_pairs(path, src_lang=src_lang, tgt_lang=tgt_lang)
        return _to_dataset(rows, src_lang=src_lang, tgt_lang=tgt_lang, source=path)
    if missing := missing_local_corpus(text, src_lang=src_lang, tgt_lang=tgt_lang):
        raise missing
    if text.startswith(HUB_PREFIX):
        text = text[len(HUB_PREFIX) :]
    return _load_hub(text, src_lang=src_lang, tgt_lang=tgt_lang, split=split, config=config, columns=columns)


def _has_text_files(prefix: Path, src_lang: str, tgt_lang: str) -> bool:
    return any(Path(f"{prefix}.{lang}").is_file() for lang in (src_lang, tgt_lang))


def missing_local_corpus(
    source: str | os.PathLike[str], *, src_lang: str, tgt_lang: str, root: str | os.PathLike[str] | None = None
) -> CorpusFileNotFound | None:
    """The error :func:`load_parallel_corpus` would raise for ``source`` because it names a local
    corpus that is not there (with the command that builds the Bible corpus), or None.

    Nothing is read and the Hub is not asked, so a caller that starts long jobs (the experiment runner
    launching training processes) can refuse a missing corpus before any of them starts, with the
    same message the training script would give from inside one. ``root`` is the folder a relative
    path is opened from (default: the current one), for a caller whose jobs run elsewhere.
    """
    text = os.fspath(source)
    base = Path(root) if root is not None else None
    path = Path(text).expanduser()
    located = path if base is None or path.is_absolute() else base / path
    if located.exists() or _has_text_files(located, src_lang, tgt_lang) or text.startswith(HUB_PREFIX):
        return None
    if text in _KNOWN_HUB_NAMES or not _looks_local(text):
        return None
    return _missing_local_source(path, src_lang, tgt_lang, base)
