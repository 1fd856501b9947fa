"""M2M100 (the architecture of NLLB-200) with attention link: what differs from the other families, over the
wiring of `modeling_common` (which says how the file travels with a checkpoint).

M2M100's layers are pre-LN with a final LayerNorm after each stack: the layer blocks read the position from
the config (`GraphM2M100Config.layer_norm_position`), and the stacks apply the final norm in `final_norm`.
Graph-group attention is defined for post-LN encoders only, so the config refuses it and no graph layer
exists here.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.m2m_100 import modeling_m2m_100 as vanilla

from .attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
from .configuration import GraphM2M100Config
from .modeling_common import (
    FamilyLayers,
    GraphBaseModelMixin,
    GraphDecoderMixin,
    GraphEncoderMixin,
    GraphPreTrainedMixin,
    GraphTranslationModelMixin,
    StackClasses,
    register_family,
    scaled_word_embedding,
)


# Copied from hf_graphtf.modeling_marian.LinkedMarianAttention with Marian->M2M100
class LinkedM2M100Attention(LinkedAttentionMixin, vanilla.M2M100Attention):
    """`M2M100Attention` that adds the previous layer's scores (`LinkedAttentionMixin`; no new parameters)."""


# Copied from hf_graphtf.modeling_marian.LinkedMarianEncoderLayer with Marian->M2M100
class LinkedM2M100EncoderLayer(LinkedEncoderLayerMixin, vanilla.M2M100EncoderLayer):
    """`M2M100EncoderLayer` whose self-attention is linked."""

    linked_attention_class = LinkedM2M100Attention


# Copied from hf_graphtf.modeling_marian.LinkedMarianDecoderLayer with Marian->M2M100
class LinkedM2M100DecoderLayer(LinkedDecoderLayerMixin, vanilla.M2M100DecoderLayer):
    """`M2M100DecoderLayer` whose self- and cross-attention are linked."""

    linked_attention_class = LinkedM2M100Attention


#: the layers the stacks build: the package's three (no graph layer: pre-LN) and the vanilla ones they extend
M2M100_LAYERS = FamilyLayers(
    LinkedM2M100Attention,
    LinkedM2M100EncoderLayer,
    LinkedM2M100DecoderLayer,
    None,
    vanilla.M2M100Attention,
    vanilla.M2M100EncoderLayer,
)


# Copied from hf_graphtf.modeling_marian.GraphMarianPreTrainedModel with Marian->M2M100
class GraphM2M100PreTrainedModel(GraphPreTrainedMixin, vanilla.M2M100PreTrainedModel):
    config: GraphM2M100Config
    config_class = GraphM2M100Config


class M2M100StackParts:
    """What `M2M100Encoder.__init__` and `M2M100Decoder.__init__` build around the layers: scaled word and
    padding-aware sinusoidal position embeddings, and the pre-LN stack's final LayerNorm (`StackInitMixin`
    builds the rest)."""

    def build_embeddings(self, config: GraphM2M100Config) -> None:
        self.embed_tokens = scaled_word_embedding(vanilla.M2M100ScaledWordEmbedding, config)
        self.embed_positions = vanilla.M2M100SinusoidalPositionalEmbedding(
            config.max_position_embeddings, config.d_model, config.pad_token_id
        )

    def build_norms(self, config: GraphM2M100Config) -> None:
        self.layer_norm = nn.LayerNorm(config.d_model)

    def final_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(hidden_states)


class GraphM2M100Encoder(M2M100StackParts, GraphEncoderMixin, vanilla.M2M100Encoder):
    """M2M100 encoder with linked layers (the loop is in `GraphEncoderMixin`)."""

    layer_classes = M2M100_LAYERS

    def embed(self, input_ids, inputs_embeds):
        """Padding-aware sinusoidal positions added, as `M2M100Encoder.forward`."""
        return inputs_embeds + self.embed_positions(input_ids, inputs_embeds).to(inputs_embeds.device)


class GraphM2M100Decoder(M2M100StackParts, GraphDecoderMixin, vanilla.M2M100Decoder):
    """M2M100 decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    layer_classes = M2M100_LAYERS

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Positions after the cached ones added, as `M2M100Decoder.forward`."""
        return inputs_embeds + self.embed_positions(input_ids, inputs_embeds, cache_length).to(inputs_embeds.device)


class GraphM2M100Model(GraphBaseModelMixin, vanilla.M2M100Model):
    """`M2M100Model` with the options of [`GraphM2M100Config`]."""

    stack_classes = StackClasses(vanilla.M2M100Encoder, GraphM2M100Encoder, vanilla.M2M100Decoder, GraphM2M100Decoder)

    def build_shared(self, config: GraphM2M100Config) -> None:  # as M2M100Model.__init__
        self.shared = scaled_word_embedding(vanilla.M2M100ScaledWordEmbedding, config)


class GraphM2M100ForConditionalGeneration(GraphTranslationModelMixin, vanilla.M2M100ForConditionalGeneration):
    """`M2M100ForConditionalGeneration` (NLLB-200; translation head, `generate()`) with the options of
    [`GraphM2M100Config`]."""

    base_model_class = GraphM2M100Model

    def build_head(self, config: GraphM2M100Config) -> None:  # as M2M100ForConditionalGeneration.__init__
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """The decoder inputs for `labels`, as the forward pass makes them; Marian and BART have this method and
        vanilla M2M100 does not. `DataCollatorForSeq2Seq` calls it, and a trainer that pops the labels to smooth
        them (label_smoothing_factor) needs it: the model then never sees the labels to shift."""
        return vanilla.shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)


register_family(GraphM2M100Config, GraphM2M100Model, GraphM2M100ForConditionalGeneration)

__all__ = ["GraphM2M100ForConditionalGeneration", "GraphM2M100Model", "GraphM2M100PreTrainedModel"]
