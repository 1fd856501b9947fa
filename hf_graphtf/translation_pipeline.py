"""A translation pipeline for encoder-decoder models, without touching Transformers' task tables.

Transformers 5 removed its translation pipeline (and refuses the task name). This one is used two
ways, neither of which changes what ``pipeline()`` does for other models:

* directly, with the package: ``TranslationPipeline(model=model, tokenizer=tokenizer)``;
* from a saved checkpoint, with or without the package: every checkpoint carries this file and a
  ``custom_pipelines`` entry in its config, so ``pipeline("translation", model=folder_or_hub_id,
  trust_remote_code=True)`` loads it as remote code.

This module travels with saved checkpoints: it imports only Transformers (through the seam).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from transformers import GenerationConfig, Pipeline

from .transformers_seam import generate_setting, new_token_limit, pipeline_generate_kwargs

#: the task name a checkpoint's ``custom_pipelines`` entry declares
TASK = "translation"

#: the most new tokens a translation may have where neither the call nor the model's generation config sets a
#: length: Transformers' model-agnostic default (20) would cut most sentences short. The pipeline's default
#: and `inference.translate_texts`'s (the CLI's); defined here, as this module travels with checkpoints.
DEFAULT_MAX_NEW_TOKENS = 256


class TruncatedInputWarning(UserWarning):
    """An input was longer than the tokenizer's limit and was cut: the rest of it is not translated."""


class TruncatedTranslationWarning(UserWarning):
    """A translation ran to the length limit and may be cut short: it had no end-of-sentence token before the
    limit (Marian's generation config forces one at the limit itself, so a translation that ends there counts
    too). The pipeline's counterpart of `inference.CutTranslationWarning`, one per translation.

    ``limit`` is the limit in new tokens."""

    def __init__(self, message: str, limit: int):
        super().__init__(message)
        self.limit = limit


def has_language_codes(tokenizer: Any) -> bool:
    """Whether the tokenizer marks sequences with language codes (NLLB's and M2M100's do): their classes
    switch the codes through a ``src_lang`` property. (This package's joint tokenizer only records its
    corpus columns under that name, in its init kwargs.)"""
    return isinstance(getattr(type(tokenizer), "src_lang", None), property)


def language_code_id(tokenizer: Any, field: str, code: str) -> int:
    """The token id of language code ``code``; a `ValueError` naming ``field`` where the tokenizer has no such
    code (a misspelt code would otherwise be read as unknown text, or its pieces)."""
    token_id = tokenizer.convert_tokens_to_ids(code)
    if token_id is None or token_id == tokenizer.unk_token_id:
        known = [token for token in getattr(tokenizer, "extra_special_tokens", None) or [] if "_" in str(token)]
        examples = ", ".join(map(str, known[:6])) + (", ..." if len(known) > 6 else "")
        raise ValueError(
            f"{field}={code!r} is not a language code of this tokenizer ({type(tokenizer).__name__})"
            + (f"; it has {len(known)}, e.g. {examples}." if known else ".")
        )
    return token_id


def most_new_tokens(model: Any) -> int | None:
    """The most new tokens the model's decoder reads: its positions less the start token's (None for a model
    without a position table)."""
    positions = getattr(model.config, "max_position_embeddings", None)
    return None if positions is None else int(positions) - 1


def can_decode_longer(model: Any, limit: int) -> bool:
    """Whether the model's decoder reads past a length limit of ``limit`` new tokens: the remedy a cut-translation
    warning names (a larger limit, or none left)."""
    most = most_new_tokens(model)
    return most is None or limit < most


def names_no_target_language(tokenizer: Any, model: Any, generate_kwargs: dict[str, Any]) -> bool:
    """Whether `model.generate(**generate_kwargs)` would pick the target language itself: the tokenizer marks
    languages with codes (NLLB-200, M2M100) and neither the call nor the model's generation config forces the
    target's code (``forced_bos_token_id``), as a base NLLB-200 checkpoint's does not."""
    return has_language_codes(tokenizer) and generate_setting(model, generate_kwargs, "forced_bos_token_id") is None


def end_token_ids(model: Any, generate_kwargs: dict[str, Any]) -> set[int]:
    """The end-of-sentence token ids `model.generate(**generate_kwargs)` stops a translation at."""
    eos = generate_setting(model, generate_kwargs, "eos_token_id")
    if eos is None:
        eos = model.config.eos_token_id
    return set(eos) if isinstance(eos, (list, tuple)) else {eos}


def reached_limit(generated: Any, eos_token_ids: set[int], limit: int) -> list[bool]:
    """Whether each row of ``generated`` (the decoder's start token first) ran to ``limit`` new tokens, that is
    held no end-of-sentence token before its last allowed position."""
    new_tokens = generated[:, 1:].tolist()
    return [
        next((position + 1 for position, token in enumerate(row) if token in eos_token_ids), len(row)) >= limit
        for row in new_tokens
    ]


class CacheTurnedOnWarning(UserWarning):
    """A model whose config says ``use_cache: false`` decodes with its cache anyway (said once per model)."""


def decode_with_cache(model: Any) -> str:
    """Turn the KV cache back on for decoding where ``model``'s config turned it off, and say so ("" where it
    was on). Folders saved by training runs before 2026-12 carry ``"use_cache": false`` (the Trainer's setting,
    `transformers_seam.saved_with_use_cache`): decoding without the cache gives the same translations several
    times slower, which a user who asked for nothing would never choose."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "use_cache", True) is not False:
        return ""
    config.use_cache = True
    generation = getattr(model, "generation_config", None)
    if generation is not None and getattr(generation, "use_cache", True) is False:
        generation.use_cache = True
    return (
        "the model's config.json says use_cache: false (saved so by a training run); decoding with the cache, "
        "which translates the same, faster (save the model again, or set use_cache true there, to keep it)"
    )


class TranslationPipeline(Pipeline):
    """Batched source text -> ``[{"translation_text": ...}]`` with any `generate()` arguments."""

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _pipeline_calls_generate = True
    _default_generation_config = GenerationConfig(max_new_tokens=DEFAULT_MAX_NEW_TOKENS, num_beams=4)

    def __init__(self, model: Any, *args: Any, **kwargs: Any):
        note = decode_with_cache(model)
        if note:
            warnings.warn(note[0].upper() + note[1:] + ".", CacheTurnedOnWarning, stacklevel=2)
        most = most_new_tokens(model)
        if most is not None and most < DEFAULT_MAX_NEW_TOKENS:  # the default within the decoder's positions
            self._default_generation_config = GenerationConfig(max_new_tokens=most, num_beams=4)
        super().__init__(model, *args, **kwargs)

    def _sanitize_parameters(
        self,
        truncation: bool | None = None,
        max_length: int | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
        **generate_kwargs,
    ):
        """``src_lang``/``tgt_lang`` are language codes (``spa_Latn``, ``eng_Latn``), as Transformers 4's
        translation pipeline took them for NLLB and M2M100; checked here, so a wrong one fails before decoding.
        They travel with the preprocessed input, as the call's generate arguments replace those given at init."""
        preprocess = {}
        if truncation is not None:
            preprocess["truncation"] = truncation
        if max_length is not None:
            preprocess["max_length"] = max_length
        preprocess.update(self._language_codes(src_lang, tgt_lang))
        return preprocess, {"generate_kwargs": generate_kwargs}, {}

    def _language_codes(self, src_lang: str | None, tgt_lang: str | None) -> dict[str, str]:
        """The language codes given, checked against the tokenizer: a `ValueError` for a tokenizer without codes
        or a code it lacks."""
        given = {"src_lang": src_lang, "tgt_lang": tgt_lang}
        codes = {field: code for field, code in given.items() if code is not None}
        for field, code in codes.items():
            if not has_language_codes(self.tokenizer):
                raise ValueError(
                    f"{field}={code!r} names a language code, and this tokenizer ({type(self.tokenizer).__name__}) "
                    "has none; leave it out (language codes are for NLLB-200 and M2M100 tokenizers)"
                )
            language_code_id(self.tokenizer, field, code)
        return codes

    def preprocess(
        self,
        text: str,
        truncation: bool = True,
        max_length: int | None = None,
        src_lang: str | None = None,
        tgt_lang: str | None = None,
    ) -> dict[str, Any]:
        if not isinstance(text, str):
            raise ValueError(f"The translation pipeline takes strings; got {type(text).__name__}.")
        with self._source_language(src_lang):
            encoded = self.tokenizer(text, truncation=truncation, max_length=max_length, return_tensors="pt")
            length = len(self.tokenizer(text, verbose=False)["input_ids"]) if truncation else 0
        kept = encoded["input_ids"].shape[-1]
        if length > kept:  # as Transformers 4's pipeline did, but not silently: the cut text is not translated
            message = (
                f"translation pipeline: an input of {length} tokens was cut to the first {kept}, and the rest of "
                "it is not translated; split it, or use hf_graphtf's translate_texts (or `hf-graphtf translate`), "
                "which translates long lines in pieces"
            )
            warnings.warn(TruncatedInputWarning(message), stacklevel=2)
        if tgt_lang is not None:  # a tensor of one, so that batching stacks it with the input's
            target = language_code_id(self.tokenizer, "tgt_lang", tgt_lang)
            encoded["forced_bos_token_id"] = encoded["input_ids"].new_tensor([target])
        # a blank item of a dataset or generator (lists are looked through before this) is decoded with the rest
        # of its batch, and its translation dropped in postprocess
        encoded["blank"] = encoded["input_ids"].new_tensor([not text.strip()])
        return encoded

    @contextmanager
    def _source_language(self, src_lang: str | None) -> Iterator[None]:
        """The tokenizer marking sources with ``src_lang``'s code for the block (its own code after it)."""
        if src_lang is None:
            yield
            return
        before, self.tokenizer.src_lang = self.tokenizer.src_lang, src_lang
        try:
            yield
        finally:
            self.tokenizer.src_lang = before

    def _forward(self, model_inputs: dict[str, Any], generate_kwargs: dict[str, Any]) -> dict[str, Any]:
        generate_kwargs = pipeline_generate_kwargs(self, generate_kwargs)
        blank = model_inputs.pop("blank")
        target = model_inputs.pop("forced_bos_token_id", None)
        if target is not None:  # the call's tgt_lang, over the generation config's target
            generate_kwargs = _with_setting(generate_kwargs, "forced_bos_token_id", int(target[0]))
        elif names_no_target_language(self.tokenizer, self.model, generate_kwargs):
            raise ValueError(
                f"translation pipeline: this {type(self.tokenizer).__name__} marks languages with codes, and neither "
                "the call nor the model's generation config (forced_bos_token_id) names the language to translate "
                "into, so the model would pick one; pass tgt_lang (and src_lang), e.g. tgt_lang='eng_Latn'"
            )
        limit, most = new_token_limit(self.model, generate_kwargs), most_new_tokens(self.model)
        if most is not None and limit > most:  # else decoding fails there, with an index error
            raise ValueError(
                f"translation pipeline: a length limit of {limit} new tokens is more than this model's decoder reads "
                f"({most + 1} positions, max_position_embeddings); pass max_new_tokens={most} or less"
            )
        output_ids = self.model.generate(**model_inputs, **generate_kwargs)
        reached = output_ids.new_tensor(reached_limit(output_ids, end_token_ids(self.model, generate_kwargs), limit))
        # one entry per input, holding its translations (num_return_sequences of them), so that the pipeline's
        # batching hands each input its own: generate() returns them input after input
        inputs = model_inputs["input_ids"].shape[0]
        return {
            "output_ids": output_ids.reshape(inputs, -1, output_ids.shape[-1]),
            "reached_limit": reached.bool().reshape(inputs, -1),
            "length_limit": reached.new_full(reached.shape, limit).reshape(inputs, -1),
            "blank": blank.bool(),
        }

    def postprocess(self, model_outputs: dict[str, Any]) -> list[dict[str, str]]:
        """The translations of one input (a batch of one: the pipeline's, or its batching's); a blank input's are
        blank, as in `inference.translate_texts`."""
        if model_outputs["blank"][0]:
            return [{"translation_text": ""}] * model_outputs["output_ids"].shape[1]
        texts = self.tokenizer.batch_decode(model_outputs["output_ids"][0], skip_special_tokens=True)
        for text, reached, limit in zip(texts, model_outputs["reached_limit"][0], model_outputs["length_limit"][0]):
            if reached:
                self._warn_cut(text.strip(), int(limit))
        return [{"translation_text": text.strip()} for text in texts]

    def _warn_cut(self, text: str, limit: int) -> None:
        remedy = (
            "a larger max_new_tokens lets it end"
            if can_decode_longer(self.model, limit)
            else "the model's decoder reads no more"
        )
        opening = text if len(text) <= 40 else text[:40] + "..."
        message = (
            f"translation pipeline: a translation ran to the length limit of {limit} new tokens and may be cut "
            f"short ({opening!r}); {remedy}"
        )
        warnings.warn(TruncatedTranslationWarning(message, limit), stacklevel=3)

    def __call__(self, inputs: str | list[str] | Iterable[str], **kwargs):
        """As `Pipeline.__call__`, but a blank input stays blank, as in `inference.translate_texts` (a model given
        nothing to translate still writes something), and an empty list gives an empty list. A list's blank
        inputs are not decoded at all; a dataset's or generator's are, and their translations dropped."""
        blank = [{"translation_text": ""}] * int(kwargs.get("num_return_sequences") or 1)
        if isinstance(inputs, str) and not inputs.strip():
            self._language_codes(kwargs.get("src_lang"), kwargs.get("tgt_lang"))  # a bad code fails all the same
            return blank
        if isinstance(inputs, str):
            return super().__call__(inputs, **kwargs)
        if isinstance(inputs, list):
            filled = [text for text in inputs if not (isinstance(text, str) and not text.strip())]
            if not filled:
                self._language_codes(kwargs.get("src_lang"), kwargs.get("tgt_lang"))
            translated = iter(super().__call__(filled, **kwargs) if filled else [])
            result = [blank if isinstance(text, str) and not text.strip() else next(translated) for text in inputs]
        else:  # a dataset or generator: its iterator, each item a list of translations, as Transformers 4's
            return super().__call__(inputs, **kwargs)
        # one dict per input sentence, as the Transformers 4 pipeline returned for a list
        return [r[0] if isinstance(r, list) and len(r) == 1 else r for r in result]


def _with_setting(generate_kwargs: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    """``generate_kwargs`` with generation parameter ``name`` set to ``value``: in the ``generation_config`` they
    pass, if any, as generate() deprecates one beside generation arguments."""
    config = generate_kwargs.get("generation_config")
    if config is None:
        return {**generate_kwargs, name: value}
    config = copy.deepcopy(config)
    setattr(config, name, value)
    return {**generate_kwargs, "generation_config": config}


def custom_pipelines_entry() -> dict[str, dict[str, Any]]:
    """The ``config.custom_pipelines`` value that makes ``pipeline(TASK, trust_remote_code=True)`` find
    this class in a saved checkpoint (the format `Pipeline.save_pretrained` writes)."""
    return {
        TASK: {
            "impl": f"{__name__.rsplit('.', 1)[-1]}.{TranslationPipeline.__name__}",
            "pt": ["AutoModelForSeq2SeqLM"],
            "tf": [],
            "type": "text",
        }
    }
