"""The model families the options apply to, registered once: Marian and BART.

Each family names its config and model classes and the vanilla model type whose checkpoints load into
them. The package's `__init__` registers the Auto classes from this table, the training arguments take
their ``model_family`` choices from it, the model builder its config class, and fine-tuning the family
of a checkpoint's ``model_type``. A third family is one entry here (and its flat modeling module).
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import BartForConditionalGeneration, MarianMTModel, PretrainedConfig, PreTrainedModel

from .configuration import GraphBartConfig, GraphMarianConfig
from .modeling_bart import GraphBartForConditionalGeneration, GraphBartModel
from .modeling_marian import GraphMarianModel, GraphMarianMTModel


@dataclass(frozen=True)
class ModelFamily:
    """One encoder-decoder family: its classes here and the vanilla classes it extends."""

    name: str
    config_class: type[PretrainedConfig]
    base_model_class: type[PreTrainedModel]
    seq2seq_class: type[PreTrainedModel]
    #: the Transformers class that the options-off model equals, weight for weight and logit for logit
    vanilla_seq2seq_class: type[PreTrainedModel]

    @property
    def model_type(self) -> str:
        return self.config_class.model_type

    @property
    def vanilla_model_type(self) -> str:
        return self.config_class.vanilla_model_type


FAMILIES: dict[str, ModelFamily] = {
    family.name: family
    for family in (
        ModelFamily("marian", GraphMarianConfig, GraphMarianModel, GraphMarianMTModel, MarianMTModel),
        ModelFamily(
            "bart", GraphBartConfig, GraphBartModel, GraphBartForConditionalGeneration, BartForConditionalGeneration
        ),
    )
}

#: a checkpoint's ``model_type`` (ours or the vanilla one) -> its family
FAMILY_OF_MODEL_TYPE: dict[str, ModelFamily] = {
    model_type: family for family in FAMILIES.values() for model_type in (family.model_type, family.vanilla_model_type)
}

__all__ = ["FAMILIES", "FAMILY_OF_MODEL_TYPE", "ModelFamily"]
