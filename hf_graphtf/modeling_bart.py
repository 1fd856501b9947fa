"""BART with graph-group encoder attention and attention link: what differs from the other families, over
the wiring of `modeling_common` (which says how the file travels with a checkpoint).

BART's stacks have a scaling embedding module, learned positions and a LayerNorm on the embeddings. A class
marked "Copied from" is the Marian file's with the family's name changed; a test keeps the two in step.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.bart import modeling_bart as vanilla

from .attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
from .configuration import GraphBartConfig
from .graph_attention import GraphEncoderLayerMixin
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


# Copied from hf_graphtf.modeling_marian.LinkedMarianAttention with Marian->Bart
class LinkedBartAttention(LinkedAttentionMixin, vanilla.BartAttention):
    """`BartAttention` that adds the previous layer's scores (`LinkedAttentionMixin`; no new parameters)."""


# Copied from hf_graphtf.modeling_marian.LinkedMarianEncoderLayer with Marian->Bart
class LinkedBartEncoderLayer(LinkedEncoderLayerMixin, vanilla.BartEncoderLayer):
    """`BartEncoderLayer` whose self-attention is linked."""

    linked_attention_class = LinkedBartAttention


# Copied from hf_graphtf.modeling_marian.LinkedMarianDecoderLayer with Marian->Bart
class LinkedBartDecoderLayer(LinkedDecoderLayerMixin, vanilla.BartDecoderLayer):
    """`BartDecoderLayer` whose self- and cross-attention are linked."""

    linked_attention_class = LinkedBartAttention


# Copied from hf_graphtf.modeling_marian.GraphMarianEncoderLayer with Marian->Bart
class GraphBartEncoderLayer(GraphEncoderLayerMixin, vanilla.BartEncoderLayer):
    """`BartEncoderLayer` with graph-group self-attention (`GraphEncoderLayerMixin`; layers 1..N-1)."""

    group_attention_class = vanilla.BartAttention


#: the layers the stacks build: the package's four and the vanilla ones they extend
BART_LAYERS = FamilyLayers(
    LinkedBartAttention,
    LinkedBartEncoderLayer,
    LinkedBartDecoderLayer,
    GraphBartEncoderLayer,
    vanilla.BartAttention,
    vanilla.BartEncoderLayer,
)


# Copied from hf_graphtf.modeling_marian.GraphMarianPreTrainedModel with Marian->Bart
class GraphBartPreTrainedModel(GraphPreTrainedMixin, vanilla.BartPreTrainedModel):
    config: GraphBartConfig
    config_class = GraphBartConfig


class BartStackParts:
    """What `BartEncoder.__init__` and `BartDecoder.__init__` build around the layers: scaled word and learned
    position embeddings, and the embedding LayerNorm after the layers (`StackInitMixin` builds the rest)."""

    def build_embeddings(self, config: GraphBartConfig) -> None:
        self.embed_tokens = scaled_word_embedding(vanilla.BartScaledWordEmbedding, config)
        self.embed_positions = vanilla.BartLearnedPositionalEmbedding(config.max_position_embeddings, config.d_model)

    def build_norms(self, config: GraphBartConfig) -> None:
        self.layernorm_embedding = nn.LayerNorm(config.d_model)


class GraphBartEncoder(BartStackParts, GraphEncoderMixin, vanilla.BartEncoder):
    """BART encoder with linked or graph-group layers (the loop is in `GraphEncoderMixin`)."""

    layer_classes = BART_LAYERS

    def embed(self, input_ids, inputs_embeds):
        """Learned position embeddings added and LayerNorm, as `BartEncoder.forward`."""
        positions = self.embed_positions(inputs_embeds[:, :, -1]).to(inputs_embeds.device)  # shape only
        return self.layernorm_embedding(inputs_embeds + positions)


class GraphBartDecoder(BartStackParts, GraphDecoderMixin, vanilla.BartDecoder):
    """BART decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    layer_classes = BART_LAYERS

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Positions after the cached ones added and LayerNorm, as `BartDecoder.forward`."""
        position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + cache_length
        positions = self.embed_positions(input_ids, cache_length, position_ids=position_ids)
        return self.layernorm_embedding(inputs_embeds + positions.to(inputs_embeds.device))


class GraphBartModel(GraphBaseModelMixin, vanilla.BartModel):
    """`BartModel` with the options of [`GraphBartConfig`]."""

    stack_classes = StackClasses(vanilla.BartEncoder, GraphBartEncoder, vanilla.BartDecoder, GraphBartDecoder)

    def build_shared(self, config: GraphBartConfig) -> None:  # as BartModel.__init__
        self.shared = scaled_word_embedding(vanilla.BartScaledWordEmbedding, config)


class GraphBartForConditionalGeneration(GraphTranslationModelMixin, vanilla.BartForConditionalGeneration):
    """`BartForConditionalGeneration` (translation head, `generate()`) with the options of [`GraphBartConfig`]."""

    base_model_class = GraphBartModel

    def build_head(self, config: GraphBartConfig) -> None:  # as BartForConditionalGeneration.__init__
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.model.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)


register_family(GraphBartConfig, GraphBartModel, GraphBartForConditionalGeneration)

__all__ = ["GraphBartModel", "GraphBartForConditionalGeneration", "GraphBartPreTrainedModel"]
