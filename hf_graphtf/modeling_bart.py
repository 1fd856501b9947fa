"""BART with graph-group encoder attention and attention link: wiring only.

The classes subclass Transformers' BART classes; the computation lives in `attention_link.py`
and `graph_attention.py`. This file and its relative imports are what ``save_pretrained`` copies
next to the weights, so ``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

from transformers.models.bart.modeling_bart import (
    BartAttention,
    BartDecoder,
    BartDecoderLayer,
    BartEncoder,
    BartEncoderLayer,
    BartForConditionalGeneration,
    BartModel,
    BartPreTrainedModel,
)
from transformers.utils.output_capturing import OutputRecorder

from .attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
from .configuration import GraphBartConfig
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


class LinkedBartAttention(LinkedAttentionMixin, BartAttention):
    """BART attention that adds the previous layer's scores (same parameters)."""


class LinkedBartEncoderLayer(LinkedEncoderLayerMixin, BartEncoderLayer):
    linked_attention_class = LinkedBartAttention


class LinkedBartDecoderLayer(LinkedDecoderLayerMixin, BartDecoderLayer):
    linked_attention_class = LinkedBartAttention


class GraphBartFirstEncoderLayer(GraphInputRecorderMixin, BartEncoderLayer):
    """Standard BART encoder layer 0 that hands its input on to graph layer 1."""


class GraphBartEncoderLayer(GraphEncoderLayerMixin, BartEncoderLayer):
    group_attention_class = BartAttention


_REMOTE_CODE_CLASSES = ("GraphBartConfig", "GraphBartModel", "GraphBartForConditionalGeneration")


class GraphBartPreTrainedModel(GraphPreTrainedMixin, BartPreTrainedModel):
    config: GraphBartConfig
    config_class = GraphBartConfig


class GraphBartEncoder(GraphEncoderMixin, BartEncoder):
    config_class = GraphBartConfig
    first_graph_layer_class = GraphBartFirstEncoderLayer
    graph_layer_class = GraphBartEncoderLayer
    linked_layer_class = LinkedBartEncoderLayer
    _can_record_outputs = {
        "hidden_states": BartEncoderLayer,
        "attentions": OutputRecorder(BartAttention, index=1, layer_name="self_attn"),
        "graph_gates": OutputRecorder(GraphBartEncoderLayer, index=1),
    }


class GraphBartDecoder(GraphDecoderMixin, BartDecoder):
    config_class = GraphBartConfig
    linked_layer_class = LinkedBartDecoderLayer


class GraphBartModel(GraphGatesOutputMixin, GraphStacksMixin, GraphPreTrainedMixin, BartModel):
    """`BartModel` with the options of [`GraphBartConfig`]."""

    config: GraphBartConfig
    config_class = GraphBartConfig
    encoder_class = GraphBartEncoder
    decoder_class = GraphBartDecoder
    gates_output_class = GraphSeq2SeqModelOutput
    remote_code_classes = _REMOTE_CODE_CLASSES


class GraphBartForConditionalGeneration(GraphGatesOutputMixin, GraphPreTrainedMixin, BartForConditionalGeneration):
    """`BartForConditionalGeneration` (translation head, `generate()`) with the options of [`GraphBartConfig`]."""

    config: GraphBartConfig
    config_class = GraphBartConfig
    gates_output_class = GraphSeq2SeqLMOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphBartConfig):
        super().__init__(config)
        self.model = GraphBartModel(config)
        self.post_init()


GraphBartConfig.register_for_auto_class()
GraphBartModel.register_for_auto_class("AutoModel")
GraphBartForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["GraphBartModel", "GraphBartForConditionalGeneration", "GraphBartPreTrainedModel"]
