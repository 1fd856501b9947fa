"""The two graphs an exported model is made of, as modules `torch.export` traces.

A `generate` call runs the encoder once (it also makes the cross-attention's keys and values, which depend on
the source alone), then a decoder step per new token (it reads those and the growing self-attention cache; the
first step is one with an empty cache). Each graph runs the model's own modules, so every family and option
exports as it decodes eagerly: nothing of the method is written again here. The caches go in and out as flat
lists of tensors, one key and one value tensor per layer, and are made into Transformers' cache inside the
graph (`transformers_seam`'s `filled_decoder_cache`). Each weight is in one graph only, so a package that
carries its weights (int8) stores them once; the tokens come in as their embeddings, looked up from the
loaded model, so the embedding table is in none.

Batch rows, source length and cache length stay variable (`dynamic_shapes`), so one build serves every
batch and sentence length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..transformers_seam import (
    cache_kwargs,
    cache_tensors,
    filled_decoder_cache,
    output_cache,
    stack_token_embeddings,
)

#: the graphs of an exported model, in the order a `generate` call runs them
GRAPH_NAMES = ("encoder", "decoder_step")
#: what the graphs take and give; a package of another layout is refused at load (`exported_models`):
#: 2 the encoder and one decoder step; 3 the step reorders the self-attention cache itself (``beam_idx``);
#: 4 both take embeddings, not token ids
GRAPH_LAYOUT = 4


def _decoder_step(
    model: nn.Module, tokens: dict[str, torch.Tensor], hidden: torch.Tensor, mask: torch.Tensor, cache: Any
) -> Any:
    """One decoder step of ``model`` over ``cache`` (the call both graphs make: the encoder graph for the
    cross-attention cache it fills, the decoder-step graph for its logits and self-attention cache);
    ``tokens`` holds ``decoder_input_ids`` or ``decoder_inputs_embeds``."""
    out = model(encoder_outputs=(hidden,), attention_mask=mask, use_cache=True, **tokens, **cache_kwargs(cache))
    return out.logits, output_cache(out)


def token_embedders(model: nn.Module) -> tuple[Callable[[torch.Tensor], torch.Tensor], ...]:
    """What the graphs take for token ids, as two callables: the source's embeddings for the encoder graph and
    the target's for the decoder step, each the embeddings that stack would look up itself. The graphs take
    embeddings, not ids, so that the embedding table (fp32 in an int8 package, and shared by the encoder and
    the decoder) is in no package: the loaded model holds it, once. The stacks are read now, so the
    callables keep working while `generate` is handed a stand-in encoder."""
    encoder, decoder = model.get_encoder(), model.get_decoder()
    return functools.partial(stack_token_embeddings, encoder), functools.partial(stack_token_embeddings, decoder)


class EncoderGraph(nn.Module):
    """The encoder, and the cross-attention's keys and values it gives each decoder layer: the source's
    embeddings (`token_embedders`) and mask to the encoder's last hidden states and the flat
    cross-attention cache, once per sentence.

    The cross cache is made by the model's own first decoder step (so a linked model stores it as it does
    eagerly, keys joined with the carried ones where its mode does that), of which only the cache is
    returned: what leads to the step's logits and self-attention is dead code the compiler drops, so the
    decoder's other weights are not in this graph."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hidden = self.model.get_encoder()(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
        start = attention_mask.new_full((attention_mask.shape[0], 1), self.model.config.decoder_start_token_id)
        start = {"decoder_input_ids": start}  # dead code, as the step's logits: no embedding table is kept
        _, cache = _decoder_step(self.model, start, hidden, attention_mask, filled_decoder_cache([], None))
        return (hidden, *cache_tensors(cache.cross_attention_cache))


class DecoderStepGraph(nn.Module):
    """A decoder step: one new token per row against the caches, to its logits and the grown
    self-attention cache (the cross-attention's tensors are read, never written). The first step is one
    with an empty self-attention cache, so every decoder weight is in this graph alone.

    The new tokens come in as their embeddings (`token_embedders`); the output layer, tied to the embedding
    table in every family, is the one use of that table here, so an int8 package holds it in int8 alone.

    ``beam_idx`` names, for each row, the row of the given self-attention cache it continues (beam search's
    reorder; ``arange`` where there is none): the graph gathers the cache by it as it appends the new
    position, one pass over the cache where a reorder before the step and the append in it would make two."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        decoder_inputs_embeds: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor,
        beam_idx: torch.Tensor,
        self_kv: list[torch.Tensor],
        cross_kv: list[torch.Tensor],
    ) -> tuple[torch.Tensor, ...]:
        cache = filled_decoder_cache([tensor.index_select(0, beam_idx) for tensor in self_kv], cross_kv)
        tokens = {"decoder_inputs_embeds": decoder_inputs_embeds}
        logits, cache = _decoder_step(self.model, tokens, encoder_hidden_states, attention_mask, cache)
        return (logits, *cache_tensors(cache.self_attention_cache))


def empty_self_cache(cross_kv: list[torch.Tensor], rows: int) -> list[torch.Tensor]:
    """The self-attention cache a decoder step starts from: per layer a key and a value tensor with no
    positions, ``rows`` rows, and the heads and head size of that layer's cross-attention values (the
    decoder's self- and cross-attention have the same heads in every family; the values, unlike the keys,
    are never joined with carried ones)."""
    empty = []
    for values in cross_kv[1::2]:
        shape = (rows, values.shape[1], 0, values.shape[3])
        empty += [values.new_empty(shape), values.new_empty(shape)]
    return empty


def _example_source(model: nn.Module, rows: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Source tokens of ordinary ids (clear of the special ones) and a mask with one padded row, as a batch
    of unequal sentences has."""
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(min(10, vocab - 1), vocab, (rows, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length // 2 :] = 0
    return input_ids, attention_mask


def graph_inputs(model: nn.Module) -> dict[str, tuple[nn.Module, tuple[Any, ...], dict[str, Any]]]:
    """Each graph's module, example inputs and dynamic shapes, from one eager run of ``model``.

    The examples avoid sizes 0 and 1 in the dimensions that vary (torch.export would fix those; the step's
    example cache holds two positions), the ranges reach the model's longest source and target, and the
    self-attention cache may be empty (the first step)."""
    from torch.export import Dim

    config = model.config
    longest = int(getattr(config, "max_position_embeddings", 1024) or 1024)
    rows = Dim("rows", min=1, max=65536)
    source_length = Dim("source", min=1, max=longest)
    past = Dim("past", min=0, max=longest)
    input_ids, attention_mask = _example_source(model, 4, 7)
    start = torch.full((4, 1), config.decoder_start_token_id, dtype=torch.long)
    beam_idx = torch.tensor([1, 0, 3, 2])
    encoder, step = EncoderGraph(model), DecoderStepGraph(model)
    with torch.no_grad():
        embed_source, embed_target = token_embedders(model)
        source, start = embed_source(input_ids), embed_target(start)
        hidden, *cross_kv = encoder(source, attention_mask)
        self_kv = empty_self_cache(cross_kv, rows=4)
        for _ in range(2):
            self_kv = list(step(start, hidden, attention_mask, beam_idx, self_kv, cross_kv)[1:])
    source_shape = {0: rows, 1: source_length}
    return {
        "encoder": (encoder, (source, attention_mask), {"inputs_embeds": source_shape, "attention_mask": source_shape}),
        "decoder_step": (
            step,
            (start, hidden, attention_mask, beam_idx, self_kv, cross_kv),
            {
                "decoder_inputs_embeds": {0: rows},
                "encoder_hidden_states": source_shape,
                "attention_mask": source_shape,
                "beam_idx": {0: rows},
                "self_kv": [{0: rows, 2: past}] * len(self_kv),
                "cross_kv": [{0: rows, 2: source_length}] * len(cross_kv),
            },
        ),
    }


def export_graphs(model: nn.Module) -> dict[str, Any]:
    """``model``'s graphs as `torch.export.ExportedProgram`s, by `GRAPH_NAMES`.

    Traced non-strictly (Python runs as it does eagerly, so the caches and the model's own forward trace as
    they are); the programs run as they are (``.module()``) or go to AOTInductor. An int8 model is traced with
    its int8 layers (`int8_linear`), whose weights are buffers like any other."""
    programs = {}
    with torch.no_grad():
        for name, (module, args, shapes) in graph_inputs(model).items():
            programs[name] = torch.export.export(module, args, dynamic_shapes=shapes, strict=False)
    return programs


def graph_constants(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer of ``module`` under each name it has (a tied weight under both), as an
    AOTInductor package built without its weights asks for them."""
    constants: dict[str, torch.Tensor] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for name, tensor in (*sub.named_parameters(recurse=False), *sub.named_buffers(recurse=False)):
            constants.setdefault(f"{prefix}.{name}" if prefix else name, tensor)
    return constants


__all__ = [
    "GRAPH_LAYOUT",
    "GRAPH_NAMES",
    "DecoderStepGraph",
    "EncoderGraph",
    "empty_self_cache",
    "export_graphs",
    "graph_constants",
    "graph_inputs",
    "token_embedders",
]
