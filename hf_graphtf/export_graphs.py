"""The three graphs an exported model is made of, as modules `torch.export` traces.

A `generate` call runs the encoder once, then a first decoder step (it makes the cross-attention's keys
and values from the encoder's output), then the later steps (they read those and the growing self-attention
cache). Each graph runs the model's own modules, so every family and option exports as it decodes eagerly:
nothing of the method is written again here. The caches go in and out as flat lists of tensors, one key and
one value tensor per layer, and are made into Transformers' cache inside the graph (`transformers_seam`'s
`filled_decoder_cache`).

Batch rows, source length and cache length stay variable (`dynamic_shapes`), so one build serves every
batch and sentence length; the first step takes exactly one decoder token, as `generate` starts.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .transformers_seam import cache_kwargs, cache_tensors, filled_decoder_cache, output_cache

#: the graphs of an exported model, in the order a `generate` call runs them
GRAPH_NAMES = ("encoder", "first_step", "later_step")


def _decoder_step(model: nn.Module, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor, cache: Any) -> Any:
    """One decoder step of ``model`` over ``cache`` (the call both decoder graphs make): its logits and cache."""
    out = model(
        encoder_outputs=(hidden,),
        attention_mask=mask,
        decoder_input_ids=tokens,
        use_cache=True,
        **cache_kwargs(cache),
    )
    return out.logits, output_cache(out)


class EncoderGraph(nn.Module):
    """The encoder: source tokens and their mask to the encoder's last hidden states."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class FirstStepGraph(nn.Module):
    """The first decoder step: the start token's logits, the self-attention cache it begins, and the
    cross-attention's keys and values, made here once per `generate` call."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, decoder_input_ids: torch.Tensor, encoder_hidden_states: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        logits, cache = _decoder_step(
            self.model, decoder_input_ids, encoder_hidden_states, attention_mask, filled_decoder_cache([], None)
        )
        return (logits, *cache_tensors(cache.self_attention_cache), *cache_tensors(cache.cross_attention_cache))


class LaterStepGraph(nn.Module):
    """A later decoder step: one new token per row against the cache, to its logits and the grown
    self-attention cache (the cross-attention's tensors are read, never written)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        decoder_input_ids: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor,
        self_kv: list[torch.Tensor],
        cross_kv: list[torch.Tensor],
    ) -> tuple[torch.Tensor, ...]:
        cache = filled_decoder_cache(self_kv, cross_kv)
        logits, cache = _decoder_step(self.model, decoder_input_ids, encoder_hidden_states, attention_mask, cache)
        return (logits, *cache_tensors(cache.self_attention_cache))


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

    The examples avoid sizes 0 and 1 in the dimensions that vary (torch.export would fix those), and the
    ranges reach the model's longest source and target."""
    from torch.export import Dim

    config = model.config
    longest = int(getattr(config, "max_position_embeddings", 1024) or 1024)
    rows = Dim("rows", min=1, max=65536)
    source = Dim("source", min=1, max=longest)
    target = Dim("target", min=1, max=longest)
    input_ids, attention_mask = _example_source(model, 4, 7)
    start = torch.full((4, 1), config.decoder_start_token_id, dtype=torch.long)
    encoder, first, later = EncoderGraph(model), FirstStepGraph(model), LaterStepGraph(model)
    with torch.no_grad():
        hidden = encoder(input_ids, attention_mask)
        outputs = first(start, hidden, attention_mask)
        # one step more, so that the later step's example cache holds two positions (not a fixed 1)
        layers = (len(outputs) - 1) // 4
        self_kv, cross_kv = list(outputs[1 : 1 + 2 * layers]), list(outputs[1 + 2 * layers :])
        self_kv = list(later(start, hidden, attention_mask, self_kv, cross_kv)[1:])
    source_shape = {0: rows, 1: source}
    return {
        "encoder": (encoder, (input_ids, attention_mask), {"input_ids": source_shape, "attention_mask": source_shape}),
        "first_step": (
            first,
            (start, hidden, attention_mask),
            {"decoder_input_ids": {0: rows}, "encoder_hidden_states": source_shape, "attention_mask": source_shape},
        ),
        "later_step": (
            later,
            (start, hidden, attention_mask, self_kv, cross_kv),
            {
                "decoder_input_ids": {0: rows},
                "encoder_hidden_states": source_shape,
                "attention_mask": source_shape,
                "self_kv": [{0: rows, 2: target}] * len(self_kv),
                "cross_kv": [{0: rows, 2: source}] * len(cross_kv),
            },
        ),
    }


def export_graphs(model: nn.Module, quantize: Any = None) -> dict[str, Any]:
    """``model``'s three graphs as `torch.export.ExportedProgram`s, by `GRAPH_NAMES`.

    Traced non-strictly (Python runs as it does eagerly, so the caches and the model's own forward trace as
    they are); the programs run as they are (``.module()``) or go to AOTInductor. ``quantize(module, args)``
    (a format's `quantize_graph`) rewrites each traced graph, which is then traced again."""
    programs = {}
    with torch.no_grad():
        for name, (module, args, shapes) in graph_inputs(model).items():
            programs[name] = torch.export.export(module, args, dynamic_shapes=shapes, strict=False)
            if quantize is not None:
                quantized = quantize(programs[name].module(), args)
                programs[name] = torch.export.export(quantized, args, dynamic_shapes=shapes, strict=False)
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
    "GRAPH_NAMES",
    "EncoderGraph",
    "FirstStepGraph",
    "LaterStepGraph",
    "export_graphs",
    "graph_constants",
    "graph_inputs",
]
