"""BART with graph-group encoder attention and attention link: wiring only.

The classes marked "Copied from" are the Marian file's with the family's name changed; a test keeps the
two in step (each subclasses its own family's Transformers classes, so the two cannot share them).

The classes subclass Transformers' BART classes; the computation lives in `attention_link.py`
and `graph_attention.py`. This file and its relative imports are what ``save_pretrained`` copies
next to the weights, so ``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers.models.bart.modeling_bart import (
    BartAttention,
    BartDecoder,
    BartDecoderLayer,
    BartEncoder,
    BartEncoderLayer,
    BartForConditionalGeneration,
    BartLearnedPositionalEmbedding,
    BartModel,
    BartPreTrainedModel,
    BartScaledWordEmbedding,
)

from .configuration import GraphBartConfig
from .modeling_common import (
    GraphDecoderMixin,
    GraphEncoderMixin,
    GraphGatesOutputMixin,
    GraphPreTrainedMixin,
    GraphSeq2SeqLMOutput,
    GraphSeq2SeqModelOutput,
    family_layers,
)
from .transformers_seam import OutputRecorder

LinkedBartAttention, LinkedBartEncoderLayer, LinkedBartDecoderLayer, GraphBartEncoderLayer = family_layers(
    "Bart", BartAttention, BartEncoderLayer, BartDecoderLayer, __name__
)


_REMOTE_CODE_CLASSES = ("GraphBartConfig", "GraphBartModel", "GraphBartForConditionalGeneration")


# Copied from hf_graphtf.modeling_marian.GraphMarianPreTrainedModel with Marian->Bart
class GraphBartPreTrainedModel(GraphPreTrainedMixin, BartPreTrainedModel):
    config: GraphBartConfig
    config_class = GraphBartConfig


class BartStackParts:
    """What `BartEncoder.__init__` and `BartDecoder.__init__` build around the layers: scaled word and learned
    position embeddings, and the embedding LayerNorm after the layers (`StackInitMixin` builds the rest)."""

    def build_embeddings(self, config: GraphBartConfig) -> None:
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_tokens = BartScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.embed_positions = BartLearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)

    def build_norms(self, config: GraphBartConfig) -> None:
        self.layernorm_embedding = nn.LayerNorm(config.d_model)


class GraphBartEncoder(BartStackParts, GraphEncoderMixin, BartEncoder):
    """BART encoder with linked or graph-group layers (the loop is in `GraphEncoderMixin`)."""

    config_class = GraphBartConfig
    standard_layer_class = BartEncoderLayer
    graph_layer_class = GraphBartEncoderLayer
    linked_layer_class = LinkedBartEncoderLayer
    _can_record_outputs = {
        "hidden_states": BartEncoderLayer,
        "attentions": OutputRecorder(BartAttention, index=1, layer_name="self_attn"),
        "graph_gates": OutputRecorder(GraphBartEncoderLayer, index=1),
    }

    def embed(self, input_ids, inputs_embeds):
        """Token and learned position embeddings, LayerNorm and dropout, as `BartEncoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        positions = self.embed_positions(inputs_embeds[:, :, -1]).to(inputs_embeds.device)  # shape only
        hidden_states = self.layernorm_embedding(inputs_embeds + positions)
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphBartDecoder(BartStackParts, GraphDecoderMixin, BartDecoder):
    """BART decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    config_class = GraphBartConfig
    linked_layer_class = LinkedBartDecoderLayer

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Token embeddings, positions after the cached ones, LayerNorm and dropout, as `BartDecoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        seq_length = inputs_embeds.shape[1]
        position_ids = torch.arange(seq_length, device=inputs_embeds.device) + cache_length
        positions = self.embed_positions(input_ids, cache_length, position_ids=position_ids)
        hidden_states = self.layernorm_embedding(inputs_embeds + positions.to(inputs_embeds.device))
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphBartModel(GraphGatesOutputMixin, GraphPreTrainedMixin, BartModel):
    """`BartModel` with the options of [`GraphBartConfig`]."""

    config: GraphBartConfig
    config_class = GraphBartConfig
    gates_output_class = GraphSeq2SeqModelOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphBartConfig):  # BartModel.__init__ with the stacks the options ask for
        super().__init__(config)
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        graph_encoder = config.graph_attention or config.links_encoder
        self.encoder = (GraphBartEncoder if graph_encoder else BartEncoder)(config)
        self.decoder = (GraphBartDecoder if config.links_decoder else BartDecoder)(config)
        self.post_init()


class GraphBartForConditionalGeneration(GraphGatesOutputMixin, GraphPreTrainedMixin, BartForConditionalGeneration):
    """`BartForConditionalGeneration` (translation head, `generate()`) with the options of [`GraphBartConfig`]."""

    config: GraphBartConfig
    config_class = GraphBartConfig
    gates_output_class = GraphSeq2SeqLMOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphBartConfig):  # BartForConditionalGeneration.__init__ with a GraphBartModel
        super().__init__(config)
        self.model = GraphBartModel(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.model.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)
        self.post_init()


GraphBartConfig.register_for_auto_class()
GraphBartModel.register_for_auto_class("AutoModel")
GraphBartForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["GraphBartModel", "GraphBartForConditionalGeneration", "GraphBartPreTrainedModel"]
