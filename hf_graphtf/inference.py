"""Translation with a saved model, apart from training: loading, batched length-sorted decoding, references.

The ``hf-graphtf`` subcommands, the analyses and the training script's test evaluation share these, so
that a sentence is batched, decoded and scored the same way wherever it is translated.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def load_model(
    name: str, device: str | None = None, dtype: str = "fp32", attn_implementation: str | None = None
) -> tuple[Any, Any]:
    """Tokenizer and model (in eval mode, on ``device`` or the best available one) from a directory or Hub id."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hf_graphtf  # noqa: F401  (registers graph_marian / graph_bart with the Auto classes)

    from .model_files import check_model_source

    check_model_source(name)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(name)
    model = AutoModelForSeq2SeqLM.from_pretrained(
        name, dtype=getattr(torch, DTYPES[dtype]), attn_implementation=attn_implementation
    )
    return tokenizer, model.to(device).eval()


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
) -> list[str]:
    """Translate ``texts`` in batches; blank lines stay blank. Unset options use the model's generation config."""
    import torch
    from tqdm.auto import tqdm

    generate_kwargs: dict[str, Any] = {}
    if num_beams is not None:
        generate_kwargs["num_beams"] = num_beams
    if max_new_tokens is not None:
        # As a max_length: a saved model's generation config carries max_length, and max_new_tokens beside
        # it makes Transformers warn once per batch. Decoding starts from one decoder token, so the two
        # are the same limit for these encoder-decoders.
        if model.config.is_encoder_decoder:
            generate_kwargs["max_length"] = max_new_tokens + 1
        else:
            generate_kwargs["max_new_tokens"] = max_new_tokens
    outputs = [""] * len(texts)
    wanted = [i for i, text in enumerate(texts) if text.strip()]
    with tqdm(total=len(wanted), unit="sentence", desc="Translating", disable=not progress, file=sys.stderr) as bar:
        for batch in length_sorted_batches([texts[i] for i in wanted], batch_size):
            indices = [wanted[j] for j in batch]
            inputs = tokenizer(
                [texts[i] for i in indices],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=model.config.max_position_embeddings,
            ).to(model.device)
            with torch.inference_mode():
                generated = model.generate(**inputs, **generate_kwargs)
            for i, text in zip(indices, decode_token_ids(tokenizer, generated.cpu())):
                outputs[i] = text
            bar.update(len(indices))
    return outputs


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


__all__ = ["DTYPES", "decode_token_ids", "length_sorted_batches", "load_model", "reference_lists", "translate_texts"]
