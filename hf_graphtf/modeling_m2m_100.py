"""M2M100 (the architecture of NLLB-200) with attention link: wiring only.

The classes subclass Transformers' M2M100 classes; the computation lives in `attention_link.py`. M2M100's
layers are pre-LN with a final LayerNorm after each stack: the layer blocks read the position from the
config (`GraphM2M100Config.layer_norm_position`), and the stacks apply the final norm in `final_norm`.
Graph-group attention is defined for post-LN encoders only, so the config refuses it and no graph layer
exists here.

This file and its relative imports are what ``save_pretrained`` copies next to the weights, so
``trust_remote_code=True`` loads a checkpoint without this package.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers.models.m2m_100.modeling_m2m_100 import (
    M2M100Attention,
    M2M100Decoder,
    M2M100DecoderLayer,
    M2M100Encoder,
    M2M100EncoderLayer,
    M2M100ForConditionalGeneration,
    M2M100Model,
    M2M100PreTrainedModel,
    M2M100ScaledWordEmbedding,
    M2M100SinusoidalPositionalEmbedding,
    shift_tokens_right,
)

from .configuration import GraphM2M100Config
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

LinkedM2M100Attention, LinkedM2M100EncoderLayer, LinkedM2M100DecoderLayer, _ = family_layers(
    "M2M100", M2M100Attention, M2M100EncoderLayer, M2M100DecoderLayer, __name__, graph=False
)


_REMOTE_CODE_CLASSES = ("GraphM2M100Config", "GraphM2M100Model", "GraphM2M100ForConditionalGeneration")


# Copied from hf_graphtf.modeling_marian.GraphMarianPreTrainedModel with Marian->M2M100
class GraphM2M100PreTrainedModel(GraphPreTrainedMixin, M2M100PreTrainedModel):
    config: GraphM2M100Config
    config_class = GraphM2M100Config


class M2M100StackParts:
    """What `M2M100Encoder.__init__` and `M2M100Decoder.__init__` build around the layers: scaled word and
    padding-aware sinusoidal position embeddings, and the pre-LN stack's final LayerNorm (`StackInitMixin`
    builds the rest)."""

    def build_embeddings(self, config: GraphM2M100Config) -> None:
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_tokens = M2M100ScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.embed_positions = M2M100SinusoidalPositionalEmbedding(
            config.max_position_embeddings, config.d_model, config.pad_token_id
        )

    def build_norms(self, config: GraphM2M100Config) -> None:
        self.layer_norm = nn.LayerNorm(config.d_model)

    def final_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(hidden_states)


class GraphM2M100Encoder(M2M100StackParts, GraphEncoderMixin, M2M100Encoder):
    """M2M100 encoder with linked layers (the loop is in `GraphEncoderMixin`)."""

    config_class = GraphM2M100Config
    standard_layer_class = M2M100EncoderLayer
    linked_layer_class = LinkedM2M100EncoderLayer
    _can_record_outputs = {
        "hidden_states": M2M100EncoderLayer,
        "attentions": OutputRecorder(M2M100Attention, index=1, layer_name="self_attn"),
    }

    def embed(self, input_ids, inputs_embeds):
        """Scaled token embeddings, padding-aware sinusoidal positions and dropout, as `M2M100Encoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds + self.embed_positions(input_ids, inputs_embeds).to(inputs_embeds.device)
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphM2M100Decoder(M2M100StackParts, GraphDecoderMixin, M2M100Decoder):
    """M2M100 decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    config_class = GraphM2M100Config
    linked_layer_class = LinkedM2M100DecoderLayer

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Scaled token embeddings, positions after the cached ones and dropout, as `M2M100Decoder.forward`."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        positions = self.embed_positions(input_ids, inputs_embeds, cache_length).to(inputs_embeds.device)
        hidden_states = inputs_embeds + positions
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training), inputs_embeds


class GraphM2M100Model(GraphGatesOutputMixin, GraphPreTrainedMixin, M2M100Model):
    """`M2M100Model` with the options of [`GraphM2M100Config`]."""

    config: GraphM2M100Config
    config_class = GraphM2M100Config
    gates_output_class = GraphSeq2SeqModelOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphM2M100Config):  # M2M100Model.__init__ with the stacks the options ask for
        super().__init__(config)
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.shared = M2M100ScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.encoder = (GraphM2M100Encoder if config.links_encoder else M2M100Encoder)(config)
        self.decoder = (GraphM2M100Decoder if config.links_decoder else M2M100Decoder)(config)
        self.post_init()


class GraphM2M100ForConditionalGeneration(GraphGatesOutputMixin, GraphPreTrainedMixin, M2M100ForConditionalGeneration):
    """`M2M100ForConditionalGeneration` (NLLB-200; translation head, `generate()`) with the options of
    [`GraphM2M100Config`]."""

    config: GraphM2M100Config
    config_class = GraphM2M100Config
    gates_output_class = GraphSeq2SeqLMOutput
    remote_code_classes = _REMOTE_CODE_CLASSES

    def __init__(self, config: GraphM2M100Config):  # M2M100ForConditionalGeneration.__init__ with a GraphM2M100Model
        super().__init__(config)
        self.model = GraphM2M100Model(config)
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)
        self.post_init()

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The decoder inputs for `labels`, as the forward pass makes them; Marian and BART have this method and
        vanilla M2M100 does not. `DataCollatorForSeq2Seq` calls it, and a trainer that pops the labels to smooth
        them (label_smoothing_factor) needs it: the model then never sees the labels to shift."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)


GraphM2M100Config.register_for_auto_class()
GraphM2M100Model.register_for_auto_class("AutoModel")
GraphM2M100ForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = ["GraphM2M100ForConditionalGeneration", "GraphM2M100Model", "GraphM2M100PreTrainedModel"]
