"""Marian with graph-group encoder attention and attention link: wiring only.

The classes subclass Transformers' Marian classes; the computation lives in `attention_link.py`
and `graph_attention.py`. This file and its relative imports are what ``save_pretrained`` copies
next to the weights, so ``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoder,
    MarianDecoderLayer,
    MarianEncoder,
    MarianEncoderLayer,
    MarianModel,
    MarianMTModel,
    MarianPreTrainedModel,
)
from transformers.utils.output_capturing import OutputRecorder

from .attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
from .configuration import GraphMarianConfig
from .graph_attention import GraphEncoderLayerMixin, GraphInputRecorderMixin
from .modeling_common import (
    GraphDecoderMixin,
    GraphEncoderMixin,
    GraphGatesOutputMixin,
    GraphPreTrainedMixin,
    GraphSeq2SeqLMOutput,
    GraphSeq2SeqModelOutput,
    GraphStacksMixin,
)


class LinkedMarianAttention(LinkedAttentionMixin, MarianAttention):
    """Marian attention that adds the previous layer's scores (same parameters)."""


class LinkedMarianEncoderLayer(LinkedEncoderLayerMixin, MarianEncoderLayer):
    linked_attention_class = LinkedMarianAttention


class LinkedMarianDecoderLayer(LinkedDecoderLayerMixin, MarianDecoderLayer):
    linked_attention_class = LinkedMarianAttention


class GraphMarianFirstEncoderLayer(GraphInputRecorderMixin, MarianEncoderLayer):
    """Standard Marian encoder layer 0 that hands its input on to graph layer 1."""


class GraphMarianEncoderLayer(GraphEncoderLayerMixin, MarianEncoderLayer):
    group_attention_class = MarianAttention


_REMOTE_CODE_CLASSES = ("GraphMarianConfig", "GraphMarianModel", "GraphMarianMTModel")


class GraphMarianPreTrainedModel(GraphPreTrainedMixin, MarianPreTrainedModel):
    config: GraphMarianConfig
    config_class = GraphMarianConfig


class GraphMarianEncoder(GraphEncoderMixin, MarianEncoder):
    config_class = GraphMarianConfig
    first_graph_layer_class = GraphMarianFirstEncoderLayer
    graph_layer_class = GraphMarianEncoderLayer
    linked_layer_class = LinkedMarianEncoderLayer
    _can_record_outputs = {
        "hidden_states": MarianEncoderLayer,
        "attentions": OutputRecorder(MarianAttention, index=1, layer_name="self_attn"),
        "graph_gates": OutputRecorder(GraphMarianEncoderLayer, index=1),
    }


class GraphMarianDecoder(GraphDecoderMixin, MarianDecoder):
    config_class = GraphMarianConfig
    linked_layer_class = LinkedMarianDecoderLayer


class GraphMarianModel(GraphGatesOutputMixin, GraphStacksMixin, GraphPreTrainedMixin, MarianModel):
    """`MarianModel` with the options of [`GraphMarianConfig`]."""

    config: GraphMarianConfig
    config_class = GraphMarianConfig
    encoder_class = GraphMarianEncoder
    decoder_class = GraphMarianDecoder
    gates_output_class = GraphSeq2SeqModelOutput
    remote_code_classes = _REMOTE_CODE_CLASSES


class GraphMarianMTModel(GraphGatesOutputMixin, GraphPreTrainedMixin, MarianMTModel):
    """`MarianMTModel` (translation head, `generate()`) with the options of [`GraphMarianConfig`]."""

    config: GraphMarianConfig
    config_class = GraphMarianConfig
    gates_output_class = GraphSeq2SeqLMOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphMarianConfig):
        super().__init__(config)
        self.model = GraphMarianModel(config)
        self.post_init()


GraphMarianConfig.register_for_auto_class()
GraphMarianModel.register_for_auto_class("AutoModel")
GraphMarianMTModel.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["GraphMarianModel", "GraphMarianMTModel", "GraphMarianPreTrainedModel"]
