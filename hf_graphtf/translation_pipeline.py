"""`pipeline("translation")` for encoder-decoder models.

Transformers 5 removed its translation pipeline (and refuses the task name). Translation with a
seq2seq model is what this package is for, so importing `hf_graphtf` registers this pipeline
under the task name ``"translation"`` when the installed Transformers lacks one: the call users
know keeps working, for our models and for vanilla Marian/BART alike.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoModelForSeq2SeqLM, GenerationConfig, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY, REMOVED_TASKS

TASK = "translation"


class TranslationPipeline(Pipeline):
    """Batched source text -> ``[{"translation_text": ...}]`` with any `generate()` arguments."""

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _pipeline_calls_generate = True
    _default_generation_config = GenerationConfig(max_new_tokens=256, num_beams=4)

    def _sanitize_parameters(self, truncation: bool | None = None, max_length: int | None = None, **generate_kwargs):
        preprocess = {}
        if truncation is not None:
            preprocess["truncation"] = truncation
        if max_length is not None:
            preprocess["max_length"] = max_length
        return preprocess, {"generate_kwargs": generate_kwargs}, {}

    def preprocess(self, text: str, truncation: bool = True, max_length: int | None = None) -> dict[str, Any]:
        if not isinstance(text, str):
            raise ValueError(f"The translation pipeline takes strings; got {type(text).__name__}.")
        return self.tokenizer(text, truncation=truncation, max_length=max_length, return_tensors="pt")

    def _forward(self, model_inputs: dict[str, Any], generate_kwargs: dict[str, Any]) -> dict[str, Any]:
        generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        return {"output_ids": self.model.generate(**model_inputs, **generate_kwargs)}

    def postprocess(self, model_outputs: dict[str, Any]) -> list[dict[str, str]]:
        texts = self.tokenizer.batch_decode(model_outputs["output_ids"], skip_special_tokens=True)
        return [{"translation_text": text.strip()} for text in texts]

    def __call__(self, inputs: str | list[str], **kwargs):
        result = super().__call__(inputs, **kwargs)
        if isinstance(inputs, str):
            return result
        # one dict per input sentence, as the Transformers 4 pipeline returned
        return [r[0] if isinstance(r, list) and len(r) == 1 else r for r in result]


def register_translation_pipeline() -> None:
    """Register the task unless the installed Transformers provides its own."""
    if TASK in PIPELINE_REGISTRY.get_supported_tasks() and TASK not in REMOVED_TASKS:
        return
    REMOVED_TASKS.pop(TASK, None)
    PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM)
