"""Language codes for tokenizers that have them (NLLB-200, M2M100): set once, checked early, saved with the model.

An NLLB tokenizer marks each side with a language code (``nya_Latn``, ``eng_Latn``): the source starts with
the source language's code, the labels with the target's, and generation must be forced to start with the
target's code (``forced_bos_token_id``). The corpus columns (``src_lang``/``tgt_lang``: ``ny``, ``en``) are
another naming, so the codes are recipe fields of their own. A wrong or missing code would otherwise train
and decode silently in the wrong language, so each is refused before any data is tokenized.
"""

from __future__ import annotations

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..families import FAMILY_OF_MODEL_TYPE
from ..translation_pipeline import has_language_codes, language_code_id
from .arguments import DataArguments


def apply_language_codes(
    tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel, data_args: DataArguments
) -> str | None:
    """Set the source and target codes on the tokenizer and force the target's code in generation.

    Returns a line saying what was set (None when the tokenizer has no language codes). Raises a
    `ValueError` naming the field when a code is missing, unknown, or given to a tokenizer without codes.
    """
    codes = {"src_lang_code": data_args.src_lang_code, "tgt_lang_code": data_args.tgt_lang_code}
    if not has_language_codes(tokenizer):
        given = [field for field, code in codes.items() if code is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} is set, but this tokenizer ({type(tokenizer).__name__}) has no language codes; "
                "leave it out (language codes are for NLLB-200 and M2M100 tokenizers)."
            )
        return None
    missing = [field for field, code in codes.items() if code is None]
    if missing:
        family = FAMILY_OF_MODEL_TYPE.get(model.config.model_type)
        name = family.display_name if family else type(tokenizer).__name__
        raise ValueError(
            f"{' and '.join(missing)} must be set: this {name} tokenizer marks each side with a language code "
            f"(for example src_lang_code: nya_Latn and tgt_lang_code: eng_Latn for Chichewa to English)."
        )
    language_code_id(tokenizer, "src_lang_code", data_args.src_lang_code)  # checked only: the tokenizer places it
    target_id = language_code_id(tokenizer, "tgt_lang_code", data_args.tgt_lang_code)
    tokenizer.src_lang = data_args.src_lang_code
    tokenizer.tgt_lang = data_args.tgt_lang_code
    # saved with the tokenizer, so a reloaded one (translate, the pipeline) marks sources the same way
    tokenizer.init_kwargs.update(src_lang=data_args.src_lang_code, tgt_lang=data_args.tgt_lang_code)
    model.generation_config.forced_bos_token_id = target_id
    return (
        f"language codes: sources start with {data_args.src_lang_code}, targets and generation with "
        f"{data_args.tgt_lang_code} (token {target_id})"
    )


__all__ = ["apply_language_codes", "has_language_codes"]
