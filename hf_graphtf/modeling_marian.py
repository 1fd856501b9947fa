"""Marian with graph-group encoder attention and attention link: wiring only.

The classes subclass Transformers' Marian classes; the computation lives in `attention_link.py`
and `graph_attention.py`. This file and its relative imports are what ``save_pretrained`` copies
next to the weights, so ``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers.models.marian.modeling_marian import (
    MarianAttention,
    MarianDecoder,
    MarianDecoderLayer,
    MarianEncoder,
    MarianEncoderLayer,
    MarianModel,
    MarianMTModel,
    MarianPreTrainedModel,
    MarianSinusoidalPositionalEmbedding,
)

from .configuration import GraphMarianConfig
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

LinkedMarianAttention, LinkedMarianEncoderLayer, LinkedMarianDecoderLayer, GraphMarianEncoderLayer = family_layers(
    "Marian", MarianAttention, MarianEncoderLayer, MarianDecoderLayer, __name__
)


_REMOTE_CODE_CLASSES = ("GraphMarianConfig", "GraphMarianModel", "GraphMarianMTModel")


class GraphMarianPreTrainedModel(GraphPreTrainedMixin, MarianPreTrainedModel):
    config: GraphMarianConfig
    config_class = GraphMarianConfig


def _marian_stack_embeddings(stack: nn.Module, config: GraphMarianConfig, vocab_size: int) -> None:
    """The embedding modules of `MarianEncoder`/`MarianDecoder`, in their order."""
    stack.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
    stack.embed_tokens = nn.Embedding(vocab_size, config.d_model, config.pad_token_id)
    stack.embed_positions = MarianSinusoidalPositionalEmbedding(
        config.max_position_embeddings, config.d_model, config.pad_token_id
    )


class GraphMarianEncoder(GraphEncoderMixin, MarianEncoder):
    """Marian encoder with linked or graph-group layers (the loop is in `GraphEncoderMixin`)."""

    config_class = GraphMarianConfig
    standard_layer_class = MarianEncoderLayer
    graph_layer_class = GraphMarianEncoderLayer
    linked_layer_class = LinkedMarianEncoderLayer
    _can_record_outputs = {
        "hidden_states": MarianEncoderLayer,
        "attentions": OutputRecorder(MarianAttention, index=1, layer_name="self_attn"),
        "graph_gates": OutputRecorder(GraphMarianEncoderLayer, index=1),
    }

    def build_embeddings(self, config: GraphMarianConfig) -> None:
        _marian_stack_embeddings(self, config, config.vocab_size)

    def embed(self, input_ids, inputs_embeds):
        """Token embeddings (scaled), sinusoidal positions and dropout, as `MarianEncoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
        hidden_states = inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphMarianDecoder(GraphDecoderMixin, MarianDecoder):
    """Marian decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    config_class = GraphMarianConfig
    linked_layer_class = LinkedMarianDecoderLayer

    def build_embeddings(self, config: GraphMarianConfig) -> None:
        _marian_stack_embeddings(self, config, config.decoder_vocab_size)

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Scaled token embeddings, positions after the cached ones and dropout, as `MarianDecoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        inputs_embeds = inputs_embeds * self.embed_scale
        batch_size, seq_length = inputs_embeds.shape[:-1]
        position_ids = torch.arange(seq_length, device=inputs_embeds.device) + cache_length
        positions = self.embed_positions((batch_size, seq_length), cache_length, position_ids=position_ids)
        hidden_states = inputs_embeds + positions
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphMarianModel(GraphGatesOutputMixin, GraphPreTrainedMixin, MarianModel):
    """`MarianModel` with the options of [`GraphMarianConfig`]."""

    config: GraphMarianConfig
    config_class = GraphMarianConfig
    gates_output_class = GraphSeq2SeqModelOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphMarianConfig):  # MarianModel.__init__ with the stacks the options ask for
        super().__init__(config)
        if config.share_encoder_decoder_embeddings:
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
            self._tied_weights_keys = {
                "decoder.embed_tokens.weight": "shared.weight",
                "encoder.embed_tokens.weight": "shared.weight",
            }
        else:
            self._tied_weights_keys = None
        graph_encoder = config.graph_attention or config.links_encoder
        self.encoder = (GraphMarianEncoder if graph_encoder else MarianEncoder)(config)
        self.decoder = (GraphMarianDecoder if config.links_decoder else MarianDecoder)(config)
        self.post_init()


class GraphMarianMTModel(GraphGatesOutputMixin, GraphPreTrainedMixin, MarianMTModel):
    """`MarianMTModel` (translation head, `generate()`) with the options of [`GraphMarianConfig`]."""

    config: GraphMarianConfig
    config_class = GraphMarianConfig
    gates_output_class = GraphSeq2SeqLMOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphMarianConfig):  # MarianMTModel.__init__ with a GraphMarianModel
        super().__init__(config)
        self.model = GraphMarianModel(config)
        if config.share_encoder_decoder_embeddings:
            self._tied_weights_keys = {
                "lm_head.weight": "model.shared.weight",
                "model.decoder.embed_tokens.weight": "model.shared.weight",
                "model.encoder.embed_tokens.weight": "model.shared.weight",
            }
        target_vocab_size = config.vocab_size if config.share_encoder_decoder_embeddings else config.decoder_vocab_size
        self.final_logits_bias = nn.Buffer(torch.zeros((1, target_vocab_size)))
        self.lm_head = nn.Linear(config.d_model, target_vocab_size, bias=False)
        self.post_init()


GraphMarianConfig.register_for_auto_class()
GraphMarianModel.register_for_auto_class("AutoModel")
GraphMarianMTModel.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["GraphMarianModel", "GraphMarianMTModel", "GraphMarianPreTrainedModel"]
