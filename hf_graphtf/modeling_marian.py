"""Marian (the opus-mt models) with graph-group encoder attention and attention link: what differs from the
other families, over the wiring of `modeling_common` (which says how the file travels with a checkpoint).

Marian's stacks keep a plain embedding whose scale the stack applies (the encoder to token ids only, the
decoder to given embeddings too), sinusoidal positions, no norm after the layers; its translation head may
tie the source and target embeddings and carries a logits bias.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers.models.marian import modeling_marian as vanilla

from .attention_link import LinkedAttentionMixin, LinkedDecoderLayerMixin, LinkedEncoderLayerMixin
from .configuration import GraphMarianConfig
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
)
from .transformers_seam import MarianPositionTable


class LinkedMarianAttention(LinkedAttentionMixin, vanilla.MarianAttention):
    """`MarianAttention` that adds the previous layer's scores (`LinkedAttentionMixin`; no new parameters)."""


class LinkedMarianEncoderLayer(LinkedEncoderLayerMixin, vanilla.MarianEncoderLayer):
    """`MarianEncoderLayer` whose self-attention is linked."""

    linked_attention_class = LinkedMarianAttention


class LinkedMarianDecoderLayer(LinkedDecoderLayerMixin, vanilla.MarianDecoderLayer):
    """`MarianDecoderLayer` whose self- and cross-attention are linked."""

    linked_attention_class = LinkedMarianAttention


class GraphMarianEncoderLayer(GraphEncoderLayerMixin, vanilla.MarianEncoderLayer):
    """`MarianEncoderLayer` with graph-group self-attention (`GraphEncoderLayerMixin`; layers 1..N-1)."""

    group_attention_class = vanilla.MarianAttention


#: the layers the stacks build: the package's four and the vanilla ones they extend
MARIAN_LAYERS = FamilyLayers(
    LinkedMarianAttention,
    LinkedMarianEncoderLayer,
    LinkedMarianDecoderLayer,
    GraphMarianEncoderLayer,
    vanilla.MarianAttention,
    vanilla.MarianEncoderLayer,
)


class GraphMarianPreTrainedModel(GraphPreTrainedMixin, vanilla.MarianPreTrainedModel):
    config: GraphMarianConfig
    config_class = GraphMarianConfig


def _marian_stack_embeddings(stack: nn.Module, config: GraphMarianConfig, vocab_size: int) -> None:
    """The embedding modules of `MarianEncoder`/`MarianDecoder`, in their order."""
    stack.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
    stack.embed_tokens = nn.Embedding(vocab_size, config.d_model, config.pad_token_id)
    stack.embed_positions = MarianPositionTable(config.max_position_embeddings, config.d_model, config.pad_token_id)


class GraphMarianEncoder(GraphEncoderMixin, vanilla.MarianEncoder):
    """Marian encoder with linked or graph-group layers (the loop is in `GraphEncoderMixin`)."""

    layer_classes = MARIAN_LAYERS

    def build_embeddings(self, config: GraphMarianConfig) -> None:
        _marian_stack_embeddings(self, config, config.vocab_size)

    def token_embeddings(self, input_ids: torch.LongTensor) -> torch.Tensor:
        return self.embed_tokens(input_ids) * self.embed_scale

    def embed(self, input_ids, inputs_embeds):
        """Sinusoidal positions added, as `MarianEncoder.forward`."""
        return inputs_embeds + self.embed_positions(inputs_embeds.shape[:-1])


class GraphMarianDecoder(GraphDecoderMixin, vanilla.MarianDecoder):
    """Marian decoder with linked layers (the loop is in `GraphDecoderMixin`)."""

    layer_classes = MARIAN_LAYERS

    def build_embeddings(self, config: GraphMarianConfig) -> None:
        _marian_stack_embeddings(self, config, config.decoder_vocab_size)

    def embed(self, input_ids, inputs_embeds, cache_length: int):
        """Scaled (given or not) and with positions after the cached ones, as `MarianDecoder.forward`."""
        batch_size, seq_length = inputs_embeds.shape[:-1]
        position_ids = torch.arange(seq_length, device=inputs_embeds.device) + cache_length
        positions = self.embed_positions((batch_size, seq_length), cache_length, position_ids=position_ids)
        return inputs_embeds * self.embed_scale + positions


class GraphMarianModel(GraphBaseModelMixin, vanilla.MarianModel):
    """`MarianModel` with the options of [`GraphMarianConfig`]."""

    stack_classes = StackClasses(vanilla.MarianEncoder, GraphMarianEncoder, vanilla.MarianDecoder, GraphMarianDecoder)

    def build_shared(self, config: GraphMarianConfig) -> None:  # as MarianModel.__init__
        if config.share_encoder_decoder_embeddings:
            self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
            self._tied_weights_keys = {
                "decoder.embed_tokens.weight": "shared.weight",
                "encoder.embed_tokens.weight": "shared.weight",
            }
        else:
            self._tied_weights_keys = None


class GraphMarianMTModel(GraphTranslationModelMixin, vanilla.MarianMTModel):
    """`MarianMTModel` (translation head, `generate()`) with the options of [`GraphMarianConfig`]."""

    base_model_class = GraphMarianModel

    def build_head(self, config: GraphMarianConfig) -> None:  # as MarianMTModel.__init__
        if config.share_encoder_decoder_embeddings:
            self._tied_weights_keys = {
                "lm_head.weight": "model.shared.weight",
                "model.decoder.embed_tokens.weight": "model.shared.weight",
                "model.encoder.embed_tokens.weight": "model.shared.weight",
            }
        target_vocab_size = config.vocab_size if config.share_encoder_decoder_embeddings else config.decoder_vocab_size
        self.final_logits_bias = nn.Buffer(torch.zeros((1, target_vocab_size)))
        self.lm_head = nn.Linear(config.d_model, target_vocab_size, bias=False)


register_family(GraphMarianConfig, GraphMarianModel, GraphMarianMTModel)

__all__ = ["GraphMarianModel", "GraphMarianMTModel", "GraphMarianPreTrainedModel"]
