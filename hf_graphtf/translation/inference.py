"""Translation with a saved model, apart from training: loading, batched length-sorted decoding, references.

The ``hf-graphtf`` subcommands, the analyses and the training script's test evaluation share these, so
that a sentence is batched, decoded and scored the same way wherever it is translated.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UserError
from ..transformers_seam import measuring_lengths, new_token_limit
from ..translation_pipeline import (
    DEFAULT_MAX_NEW_TOKENS,
    can_decode_longer,
    end_token_ids,
    has_language_codes,
    language_code_id,
    most_new_tokens,
    names_no_target_language,
    reached_limit,
)
from .dtype_choice import (
    DecodingSetup,
)
from .dtypes import DTYPE_RECORDS, LiveMapping, float_dtype_names
from .loading import DeviceError, default_device, load_eager  # noqa: F401  (DeviceError: its old home)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

#: the float formats and their torch names: a view of the registered formats that load and run as they are
#: (`translation_formats`; int8 quantizes after loading)
DTYPES = LiveMapping(lambda: {name: DTYPE_RECORDS[name].torch_dtype for name in float_dtype_names()})

#: where a sentence ends: after ., !, ?, ;, the ellipsis or CJK full stops, before white space
_SENTENCE_END = re.compile(r"(?<=[.!?;\u2026\u3002\uff01\uff1f])\s+")


class TranslationInputWarning(UserWarning):
    """Something about some lines that changes what their translations hold (input the model cannot read whole
    or does not know, a translation cut at the length limit); the CLI prints these."""


class LongInputWarning(TranslationInputWarning):
    """Some lines were longer than the model reads and were translated in pieces (nothing was dropped).

    ``lines`` holds their 1-based numbers; ``mid_sentence`` those of them where a single sentence was
    itself too long and had to be cut between words (its pieces are translated without each other's
    context)."""

    def __init__(self, message: str, lines: list[int], mid_sentence: list[int]):
        super().__init__(message)
        self.lines = lines
        self.mid_sentence = mid_sentence


class UnknownTextWarning(TranslationInputWarning):
    """Some lines hold text the model's vocabulary lacks (characters never seen in its training data: a
    currency sign, an emoji, another script). The tokenizer maps it to its unknown token, so the model never
    sees it, and it is most likely missing from the translation.

    ``lines`` maps each such line's 1-based number to the pieces of it that became the unknown token."""

    def __init__(self, message: str, lines: dict[int, list[str]]):
        super().__init__(message)
        self.lines = lines


class CutTranslationWarning(TranslationInputWarning):
    """Some translations ran to the length limit and may be cut short: a model ends a translation with its
    end-of-sentence token, and these had none before the limit (Marian's generation config forces one at the
    limit itself, so a translation that ends there is counted too).

    ``lines`` holds their 1-based numbers; ``limit`` is the limit in new tokens."""

    def __init__(self, message: str, lines: list[int], limit: int):
        super().__init__(message)
        self.lines = lines
        self.limit = limit


class TranslationLengthError(UserError, ValueError):
    """A length limit past the decoder's positions: decoding would fail at that position, after translating
    every line up to it (an index error in the position table, or the exported graphs' shape check)."""


class TranslationLanguageError(UserError, ValueError):
    """A language code that does not fit the tokenizer, or a tokenizer that marks languages with codes (NLLB-200,
    M2M100) with no target language named: the model would translate into whichever language it picks."""


def use_language_codes(
    tokenizer: Any, model: Any, src_lang_code: str | None = None, tgt_lang_code: str | None = None
) -> None:
    """Mark each source with ``src_lang_code`` and start each translation with ``tgt_lang_code`` (the model's
    ``forced_bos_token_id``), as a model fine-tuned with the recipe's codes saves them; None leaves the saved
    one. For translating with a base NLLB-200 or M2M100 checkpoint, which names no target language."""
    codes = {"src_lang_code": src_lang_code, "tgt_lang_code": tgt_lang_code}
    given = [field for field, code in codes.items() if code is not None]
    if not given:
        return
    if not has_language_codes(tokenizer):
        raise TranslationLanguageError(
            f"{' and '.join(given)} given, but this tokenizer ({type(tokenizer).__name__}) has no language codes; "
            "leave it out (language codes are for NLLB-200 and M2M100 tokenizers)"
        )
    try:
        ids = {field: language_code_id(tokenizer, field, code) for field, code in codes.items() if code is not None}
    except ValueError as error:
        raise TranslationLanguageError(str(error)) from None
    if src_lang_code is not None:
        tokenizer.src_lang = src_lang_code
    if tgt_lang_code is not None:
        model.generation_config.forced_bos_token_id = ids["tgt_lang_code"]


def _check_target_language(tokenizer: Any, model: Any) -> None:
    if names_no_target_language(tokenizer, model, {}):
        raise TranslationLanguageError(
            f"this {type(tokenizer).__name__} marks languages with codes, and the model's generation config names "
            "no language to translate into (forced_bos_token_id), so the model would pick one: name it with "
            "--tgt-lang-code (and the source's with --src-lang-code), e.g. --src-lang-code spa_Latn --tgt-lang-code "
            "eng_Latn (in Python, use_language_codes)"
        )


def translation_length(model: Any, max_new_tokens: int | None) -> tuple[dict[str, int], int]:
    """The `generate` arguments that bound a translation's length, and that bound in new tokens (the decoder's
    start token not counted): ``max_new_tokens`` where given, else the model's generation config's
    ``max_new_tokens`` or ``max_length``, else `DEFAULT_MAX_NEW_TOKENS`; a bound past the decoder's positions
    raises `TranslationLengthError`."""
    config = model.generation_config
    most = most_new_tokens(model)
    if max_new_tokens is None and (config.max_new_tokens is not None or config.max_length is not None):
        setting = "max_new_tokens" if config.max_new_tokens is not None else "max_length"
        named = f"the generation config's {setting} {getattr(config, setting)}"
        kwargs = {}
    else:
        if max_new_tokens is None:
            max_new_tokens = DEFAULT_MAX_NEW_TOKENS if most is None else min(DEFAULT_MAX_NEW_TOKENS, most)
        named = f"max_new_tokens {max_new_tokens}"
        # As a max_length, unless the generation config sets max_new_tokens, which generate() would take over it:
        # a saved model's generation config carries max_length, and max_new_tokens beside it makes Transformers
        # warn once per batch. Decoding starts from one decoder token, so the two are the same limit here.
        if config.max_new_tokens is not None:
            kwargs = {"max_new_tokens": max_new_tokens}
        else:
            kwargs = {"max_length": max_new_tokens + 1}
    bound = new_token_limit(model, kwargs)
    if most is not None and bound > most:
        raise TranslationLengthError(
            f"{named} is more than this model's decoder reads ({most + 1} positions, max_position_embeddings): "
            f"at most {most} new tokens; set --max-new-tokens {most} or less"
        )
    return kwargs, bound


def unknown_text(tokenizer: Any, text: str) -> list[str]:
    """The pieces of ``text`` the tokenizer maps to its unknown token, each once, in order of appearance.

    A fast tokenizer names them by its offsets; a slow one (opus-mt's `MarianTokenizer`) character by
    character, once the whole line has shown an unknown token."""
    unknown_id = tokenizer.unk_token_id
    if unknown_id is None:
        return []
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        pieces = [text[a:b] for i, (a, b) in zip(encoded["input_ids"], encoded["offset_mapping"]) if i == unknown_id]
        return list(dict.fromkeys(piece.strip() or piece for piece in pieces))
    if unknown_id not in tokenizer(text, add_special_tokens=False)["input_ids"]:
        return []
    return [
        char
        for char in dict.fromkeys(text)
        if not char.isspace() and unknown_id in tokenizer(char, add_special_tokens=False)["input_ids"]
    ]


def _numbers(lines: list[int]) -> str:
    shown = ", ".join(str(n) for n in lines[:20])
    return shown + (f" and {len(lines) - 20} more" if len(lines) > 20 else "")


def _unknown_text_message(lines: dict[int, list[str]], unknown_token: str) -> str:
    named = "; ".join(
        f"line {number}: {', '.join(repr(piece) for piece in pieces[:5])}{' ...' if len(pieces) > 5 else ''}"
        for number, pieces in list(lines.items())[:20]
    )
    more = f"; and {len(lines) - 20} more line(s)" if len(lines) > 20 else ""
    return (
        f"{len(lines)} line(s) hold text the model's vocabulary lacks: it reaches the model as {unknown_token} "
        f"and is most likely missing from the translation ({named}{more})"
    )


def _pack(units: list[str], fits: Callable[[str], bool]) -> list[str]:
    """Consecutive ``units`` joined by spaces into as few pieces as fit."""
    pieces: list[str] = []
    for unit in units:
        if pieces and fits(f"{pieces[-1]} {unit}"):
            pieces[-1] = f"{pieces[-1]} {unit}"
        else:
            pieces.append(unit)
    return pieces


def _split_words(sentence: str, fits: Callable[[str], bool]) -> list[str]:
    """A sentence too long for the model, cut between words (a word too long alone, between characters)."""
    units: list[str] = []
    for word in sentence.split():
        while not fits(word) and len(word) > 1:
            cut = len(word) // 2
            while cut > 1 and not fits(word[:cut]):
                cut //= 2
            units.append(word[:cut])
            word = word[cut:]
        units.append(word)
    return _pack(units, fits)


def split_to_fit(text: str, fits: Callable[[str], bool]) -> tuple[list[str], bool]:
    """``text`` as pieces that each ``fits`` the model: whole sentences packed together where possible; a
    sentence too long alone is cut between words. Returns the pieces and whether a sentence was cut."""
    if fits(text):
        return [text], False
    units, cut = [], False
    for sentence in _SENTENCE_END.split(text.strip()):
        if fits(sentence):
            units.append(sentence)
        else:
            units.extend(_split_words(sentence, fits))
            cut = True
    return _pack(units, fits), cut


def source_token_limit(tokenizer: Any, model: Any) -> int:
    """The most source tokens (special ones included) the model reads: its position table's size, or the
    tokenizer's own limit where that is smaller."""
    limit = int(model.config.max_position_embeddings)
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < limit:
        limit = tokenizer_limit
    return limit


def load_model(
    name: str,
    device: str | None = None,
    dtype: str | DecodingSetup = "fp32",
    attn_implementation: str | None = None,
    compile: str = "off",
    engine: str = "auto",
    trust_exported: bool = False,
) -> tuple[Any, Any]:
    """Tokenizer and model (in eval mode, on ``device`` or the best available one) from a directory or Hub id.

    ``dtype`` is one of `dtype_choice.TRANSLATION_DTYPES` (or an alias, ``bfloat16``): ``auto`` picks
    bf16 where the device computes it natively and fp32 elsewhere, ``int8`` quantizes the linear layers
    (CPU); or a `DecodingSetup` the caller resolved already (the CLI, which says its choice). ``compile``
    (``auto``, ``on``, ``off``) compiles decoding with a static cache (`dtype_choice.compile_decoding`);
    ``auto`` only where it measured faster. ``engine`` (`engines.engine_choices`) chooses between the
    exported packages of a local model folder (``hf-graphtf export``) and eager decoding: ``auto`` takes a
    package that fits, where decoding is not compiled. A package is native code: one this user built
    (`package_store`) runs; one the folder carries from elsewhere only with ``trust_exported`` (or
    ``HF_GRAPHTF_TRUST_EXPORTED=1``), and is never opened otherwise. The model's ``decoding_setup`` records
    what it was loaded in, which engine decodes, and why; ``exported_decoding`` holds the package's graphs (or
    None)."""
    from .engine_choice import resolve_setup
    from .engines import engine_choices
    from .packages import ExportError

    if engine not in engine_choices():
        raise ValueError(f"engine must be one of {', '.join(engine_choices())}; got {engine!r}")
    device = default_device(device)
    if not isinstance(dtype, DecodingSetup):  # auto: the dtype of the model's best package, where it has one
        dtype = resolve_setup(dtype, device, name, engine=engine, trust_exported=trust_exported, compile=compile)
    tokenizer, model = load_eager(name, device, dtype, attn_implementation, compile)
    mode = model.decoding_setup
    compiled = mode.compiled
    if engine not in ("auto", "eager") and compiled:
        raise ExportError(f"engine {engine!r} decodes with an exported package; it does not compile as well")
    if compiled:
        engine = "eager"
    if engine != "eager":
        mode = _find_package(model, name, mode, engine, device, trust_exported)
    model.decoding_setup = model.translation_mode = mode  # translation_mode: its old name, for one release
    return tokenizer, model


def _find_package(
    model: Any, name: str, mode: DecodingSetup, engine: str, device: str, trust_exported: bool
) -> DecodingSetup:
    """`load_model`'s package for ``engine`` (a registered engine, or ``auto``/``exported``: the best engine for
    this host whose package may run and fits, `engine_choice.engine_order`): set as ``model.exported_decoding``,
    and ``mode`` with what the line says.
    ``exported`` and a named engine refuse to decode eagerly instead; ``auto`` says why where a package was
    there but not used."""
    from .engine_choice import Host, engine_order
    from .engines import CHOOSERS, TRANSLATION_ENGINES
    from .packages import ExportError

    if engine in CHOOSERS:  # the model's packages' engines best first, or every engine in the host's order
        names = list(mode.engines) or engine_order(Host.read(), list(TRANSLATION_ENGINES))
    else:
        names = [engine]
    engines = [TRANSLATION_ENGINES[name] for name in names]
    takes = [candidate for candidate in engines if candidate.find and candidate.takes(mode.dtype, device)]
    if not takes:
        if engine != "auto":
            raise ExportError(f"engine {engine!r} asked for, but --dtype {mode.dtype} on {device} does not export")
        return mode
    said = []
    for candidate in takes:
        lookup = candidate.find(model, name, mode.dtype, trust_exported=trust_exported)
        if lookup.decoding is not None:
            model.exported_decoding = lookup.decoding
            # a package passed over on the way (there, but not fitting or not loading) is said, never silent
            passed = "".join(f"; passed over: {earlier.clause}" for earlier in said if earlier.held)
            note = lookup.clause + passed
            return replace(mode, reason=f"{mode.reason}; {note}", engine_note=note)
        said.append(lookup)
    clause = "; ".join(lookup.clause for lookup in said)
    if engine != "auto":
        raise ExportError(f"engine {engine!r} asked for, but {clause}")
    if any(lookup.found for lookup in said):  # packages there but none used: said, never silent
        note = f"eager decoding, as {clause}"
        return replace(mode, reason=f"{mode.reason}; {note}", engine_note=note)
    return mode


def length_sorted_batches(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Indices of ``texts`` in batches of similar length, longest first, so little time goes to padding."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def translate_texts(
    tokenizer: Any,
    model: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    progress: bool = True,
    first_line: int = 1,
) -> list[str]:
    """Translate ``texts`` in batches; blank lines stay blank. Unset options use the model's generation config;
    where that sets no length either, a translation may have `DEFAULT_MAX_NEW_TOKENS` tokens.

    Nothing is truncated: a line longer than the model reads (`source_token_limit`) is translated in pieces,
    split at sentence boundaries (between words only where one sentence is too long alone), and the
    pieces' translations are joined with a space. Such lines are reported in one `LongInputWarning`
    naming them, lines holding text the vocabulary lacks in one `UnknownTextWarning` naming that text, and
    lines whose translation ran to the length limit in one `CutTranslationWarning`; the CLI prints them. The
    warnings number ``texts[0]`` as ``first_line`` (a chunk of a longer file)."""
    _check_target_language(tokenizer, model)  # before decoding, as a bad limit below
    generate_kwargs, length_limit = translation_length(model, max_new_tokens)
    if num_beams is not None:
        generate_kwargs["num_beams"] = num_beams
    limit = source_token_limit(tokenizer, model)

    def fits(text: str) -> bool:
        return len(tokenizer(text)["input_ids"]) <= limit

    pieces: list[str] = []
    owners: list[int] = []  # the line each piece belongs to
    split_lines, cut_lines = [], []
    unknown_lines: dict[int, list[str]] = {}
    for index, text in enumerate(texts):
        if not text.strip():
            continue
        with measuring_lengths(tokenizer):  # a line too long is said once below, as translated in pieces
            unknown = unknown_text(tokenizer, text)
            parts, cut = split_to_fit(text, fits)
        if unknown:
            unknown_lines[index + first_line] = unknown
        if len(parts) > 1:
            split_lines.append(index + first_line)
            if cut:
                cut_lines.append(index + first_line)
        pieces += parts
        owners += [index] * len(parts)
    translated, reached = _translate_pieces(
        tokenizer, model, pieces, batch_size, generate_kwargs, progress, limit=limit, length_limit=length_limit
    )
    outputs = [""] * len(texts)
    for index, translation in zip(owners, translated):
        outputs[index] = f"{outputs[index]} {translation}" if outputs[index] else translation
    cut_translations = sorted({owners[piece] + first_line for piece, at_limit in enumerate(reached) if at_limit})
    if split_lines:
        message = _long_lines_message(split_lines, cut_lines, limit)
        warnings.warn(LongInputWarning(message, split_lines, cut_lines), stacklevel=2)
    if unknown_lines:
        message = _unknown_text_message(unknown_lines, tokenizer.unk_token)
        warnings.warn(UnknownTextWarning(message, unknown_lines), stacklevel=2)
    if cut_translations:
        message = _cut_translations_message(cut_translations, length_limit, can_decode_longer(model, length_limit))
        warnings.warn(CutTranslationWarning(message, cut_translations, length_limit), stacklevel=2)
    return outputs


def _long_lines_message(split_lines: list[int], cut_lines: list[int], limit: int) -> str:
    message = (
        f"{len(split_lines)} line(s) longer than the model reads ({limit} tokens) were translated in pieces split "
        f"at sentence boundaries and joined: line {_numbers(split_lines)}"
    )
    if cut_lines:
        message += f"; in line {_numbers(cut_lines)} a sentence was itself too long and was cut between words"
    return message


def _cut_translations_message(lines: list[int], limit: int, can_go_longer: bool) -> str:
    remedy = (
        "where they are, a larger max_new_tokens (--max-new-tokens) lets them end"
        if can_go_longer
        else "the model's decoder reads no more"
    )
    return (
        f"{len(lines)} translation(s) ran to the length limit of {limit} tokens and may be cut short: "
        f"line {_numbers(lines)}; {remedy}"
    )


def _translate_pieces(
    tokenizer: Any,
    model: Any,
    texts: Sequence[str],
    batch_size: int,
    generate_kwargs: dict[str, Any],
    progress: bool,
    *,
    limit: int,
    length_limit: int,
) -> tuple[list[str], list[bool]]:
    """Translate texts that each fit the model (``limit`` source tokens), in length-sorted batches; returns the
    translations and whether each ran to ``length_limit`` new tokens (`reached_limit`)."""
    import torch
    from tqdm.auto import tqdm

    eos_token_ids = end_token_ids(model, generate_kwargs)
    outputs = [""] * len(texts)
    reached = [False] * len(texts)
    with tqdm(total=len(texts), unit="sentence", desc="Translating", disable=not progress, file=sys.stderr) as bar:
        for indices in length_sorted_batches(texts, batch_size):
            inputs = tokenizer([texts[i] for i in indices], return_tensors="pt", padding=True).to(model.device)
            if inputs["input_ids"].shape[1] > limit:  # `split_to_fit` made every piece fit
                raise RuntimeError(f"a piece of {inputs['input_ids'].shape[1]} tokens reached the model")
            decoding = getattr(model, "exported_decoding", None)
            with torch.inference_mode():
                if decoding is not None:
                    generated = decoding.generate(model, **inputs, **generate_kwargs)
                else:
                    generated = model.generate(**inputs, **generate_kwargs)
            generated = generated.cpu()
            for i, text in zip(indices, decode_token_ids(tokenizer, generated)):
                outputs[i] = text
            for i, at_limit in zip(indices, reached_limit(generated, eos_token_ids, length_limit)):
                reached[i] = at_limit
            bar.update(len(indices))
    return outputs, reached


def decode_token_ids(tokenizer: PreTrainedTokenizerBase, token_ids: Any) -> list[str]:
    """Decode generated ids or labels to text.

    Labels are padded with -100 and the Trainer pads predictions of different batches with -100 too;
    -100 is no token id, so it is mapped to the pad token (dropped by ``skip_special_tokens``) first.
    """
    ids = np.asarray(token_ids)
    ids = np.where(ids < 0, tokenizer.pad_token_id, ids)
    return [text.strip() for text in tokenizer.batch_decode(ids.tolist(), skip_special_tokens=True)]


def reference_lists(split: Dataset, tgt_lang: str) -> tuple[list[list[str]], list[list[str]] | None]:
    """Single references (the target side) and, when the corpus has a ``references`` column, all of them.

    The target side comes first in each multi-reference list and is not repeated if the column also
    holds it (the Bible corpus lists WEB, which is the target side, and KJV).
    """
    targets = [pair[tgt_lang] for pair in split["translation"]]
    single = [[target] for target in targets]
    if "references" not in split.column_names:
        return single, None
    multi = []
    for target, extra in zip(targets, split["references"]):
        others = (extra or {}).get(tgt_lang) or []
        multi.append([target] + [ref for ref in others if ref != target])
    return single, multi


__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "DTYPES",
    "CutTranslationWarning",
    "LongInputWarning",
    "TranslationInputWarning",
    "TranslationLanguageError",
    "TranslationLengthError",
    "UnknownTextWarning",
    "decode_token_ids",
    "DeviceError",
    "default_device",
    "length_sorted_batches",
    "load_model",
    "most_new_tokens",
    "reached_limit",
    "reference_lists",
    "source_token_limit",
    "split_to_fit",
    "translate_texts",
    "translation_length",
    "unknown_text",
    "use_language_codes",
]
