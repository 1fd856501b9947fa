"""The model families the options apply to, registered once: Marian, BART and M2M100 (NLLB-200).

Each entry holds everything a family differs in: its classes here and the vanilla ones they extend, its
display name, how a fresh model's special tokens are set (decoder start, BOS), whether generation starts
with a target-language token (M2M100/NLLB), and, read from its config class, where its layers put
LayerNorm. The package's `__init__` registers the Auto classes from this table; the training arguments,
the model builder, fine-tuning, the model card, the benchmarks, `hf-graphtf check` and the tests read it.
A new family is one entry here and a thin modeling module (docs/internals.md, "Adding a family").
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import (
    BartForConditionalGeneration,
    M2M100ForConditionalGeneration,
    MarianMTModel,
    PretrainedConfig,
    PreTrainedModel,
)

from .configuration import GraphBartConfig, GraphM2M100Config, GraphMarianConfig
from .modeling_bart import GraphBartForConditionalGeneration, GraphBartModel
from .modeling_m2m_100 import GraphM2M100ForConditionalGeneration, GraphM2M100Model
from .modeling_marian import GraphMarianModel, GraphMarianMTModel


@dataclass(frozen=True)
class ModelFamily:
    """One encoder-decoder family: its classes here, the vanilla classes it extends, and its conventions."""

    name: str
    #: how pages (model cards, docs) name the architecture
    display_name: str
    config_class: type[PretrainedConfig]
    base_model_class: type[PreTrainedModel]
    seq2seq_class: type[PreTrainedModel]
    #: the Transformers class that the options-off model equals, weight for weight and logit for logit
    vanilla_seq2seq_class: type[PreTrainedModel]
    #: the token a fresh model's decoder starts from: "pad" (Marian) or "eos" (BART, M2M100)
    decoder_start: str
    #: whether the family's tokenizers put a BOS token on sequences (BART does; Marian, NLLB do not)
    uses_bos: bool
    #: whether generation must start with the target language's code (M2M100/NLLB: ``forced_bos_token_id``)
    target_language_token: bool = False

    @property
    def model_type(self) -> str:
        return self.config_class.model_type

    @property
    def vanilla_model_type(self) -> str:
        return self.config_class.vanilla_model_type

    @property
    def vanilla_config_class(self) -> type[PretrainedConfig]:
        return self.vanilla_seq2seq_class.config_class

    @property
    def layer_norm_position(self) -> str:
        """ "post" or "pre", as the config class declares it (the layers read it from there)."""
        return self.config_class.layer_norm_position

    @property
    def supports_graph_attention(self) -> bool:
        """Graph-group attention is defined for post-LN encoders only."""
        return self.layer_norm_position == "post"

    def special_token_ids(self, *, pad: int, eos: int, bos: int | None) -> dict[str, int | None]:
        """The special-token fields of a fresh config, by this family's conventions."""
        return {
            "pad_token_id": pad,
            "eos_token_id": eos,
            "bos_token_id": bos if self.uses_bos else None,
            "decoder_start_token_id": pad if self.decoder_start == "pad" else eos,
        }


FAMILIES: dict[str, ModelFamily] = {
    family.name: family
    for family in (
        ModelFamily(
            "marian",
            "Marian (Transformer)",
            GraphMarianConfig,
            GraphMarianModel,
            GraphMarianMTModel,
            MarianMTModel,
            decoder_start="pad",
            uses_bos=False,
        ),
        ModelFamily(
            "bart",
            "BART-architecture",
            GraphBartConfig,
            GraphBartModel,
            GraphBartForConditionalGeneration,
            BartForConditionalGeneration,
            decoder_start="eos",
            uses_bos=True,
        ),
        ModelFamily(
            "m2m_100",
            "M2M100 / NLLB-200",
            GraphM2M100Config,
            GraphM2M100Model,
            GraphM2M100ForConditionalGeneration,
            M2M100ForConditionalGeneration,
            decoder_start="eos",
            uses_bos=False,
            target_language_token=True,
        ),
    )
}

#: a checkpoint's ``model_type`` (ours or the vanilla one) -> its family
FAMILY_OF_MODEL_TYPE: dict[str, ModelFamily] = {
    model_type: family for family in FAMILIES.values() for model_type in (family.model_type, family.vanilla_model_type)
}

__all__ = ["FAMILIES", "FAMILY_OF_MODEL_TYPE", "ModelFamily"]
