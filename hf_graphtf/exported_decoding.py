"""Decoding with exported graphs inside Transformers' own `generate`.

`generate` keeps doing all of the search (greedy or beam, its logits processors, the length penalty, EOS and
finished hypotheses, min and max new tokens, the model's generation config), so an exported model decodes
exactly as the eager one decides, and only the model's forward runs elsewhere: the encoder and the decoder
step of `export_graphs`, compiled ahead of time. Five things differ from eager decoding, none changing a
result:

- the cross-attention's keys and values, made by the encoder graph once per sentence, stay out of
  `generate`'s cache, so its beam search never reorders them: the beams of one sentence share them, row for
  row the same;
- beam search's reorder of the self-attention cache is not done when `generate` asks, but handed to the
  next decoder step, which gathers the cache as it appends to it (several reorders in a row compose; one
  still pending when `generate` returns is done then, so the cache it returns is the eager one);
- the first decoder step runs once per sentence, not once per beam: `generate` hands it every sentence
  repeated ``num_beams`` times, and the step's outputs are repeated instead (where the rows are the same);
- the tokens are looked up in the model's own embedding table here, and the graphs take their embeddings
  (`export_graphs.token_embedders`), so that no package stores that table;
- every tensor handed to a graph is made contiguous, and of the type it was traced with, first, because a
  compiled graph assumes the strides and types it was built with and does not check them.

A call that asks for something the graphs do not give (attention weights, hidden states, a decoder prefix,
no cache, assisted decoding) runs eagerly instead, with an `ExportedFallbackWarning` saying which option.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from .export_graphs import empty_self_cache, token_embedders
from .transformers_seam import (
    Cache,
    beam_reorders_to,
    cache_kwargs,
    cache_tensors,
    set_cache_tensors,
    take_cache,
)

#: `generate` arguments the exported graphs do not serve, and what each asks for
UNSERVED_OPTIONS = {
    "decoder_input_ids": "a decoder prefix",
    "decoder_inputs_embeds": "decoder embeddings",
    "inputs_embeds": "input embeddings",
    "output_attentions": "attention weights",
    "output_hidden_states": "hidden states",
    "assistant_model": "assisted decoding",
    "prompt_lookup_num_tokens": "prompt-lookup decoding",
    "cache_implementation": "another cache",
    "past_key_values": "a cache passed in",
    "cache": "a cache passed in",
}


class ExportedFallbackWarning(UserWarning):
    """A `generate` call ran eagerly because it asked for something the exported graphs do not give."""


class _ExportedEncoder(nn.Module):
    """What `generate` gets from ``get_encoder()``: the exported encoder behind the encoder's call, fed the
    source's embeddings by ``embed``. Its cross-attention cache goes to ``keep`` (one row per sentence), the
    hidden states to `generate`."""

    def __init__(
        self,
        run: Callable[..., Any],
        embed: Callable[[torch.Tensor], torch.Tensor],
        keep: Callable[[list[torch.Tensor]], None],
    ) -> None:
        super().__init__()
        self._run = run
        self._embed = embed
        self._keep = keep

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
        from transformers.modeling_outputs import BaseModelOutput

        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden, *cross_kv = self._run(self._embed(input_ids).contiguous(), attention_mask.contiguous())
        self._keep([tensor.contiguous() for tensor in cross_kv])
        return BaseModelOutput(last_hidden_state=hidden)


class ExportedDecoding:
    """The graphs of an exported model, each a callable taking and giving tensors (an AOTInductor package's
    runner, or an ``ExportedProgram``'s module), by `export_graphs.GRAPH_NAMES`.

    `generate` runs ``model.generate`` with them; nothing of ``model`` changes outside the call."""

    def __init__(self, graphs: dict[str, Callable[..., Any]], description: str = "exported") -> None:
        self.graphs = graphs
        self.description = description
        self._cross_kv: list[torch.Tensor] = []
        self._embed_targets: Callable[[torch.Tensor], torch.Tensor] | None = None
        #: the reorder of the self-attention cache the next step does (None: none asked since the last step)
        self._pending_order: torch.Tensor | None = None
        self._cache: Any = None

    def unserved(self, model: nn.Module, kwargs: dict[str, Any]) -> list[str]:
        """What of a `generate` call's options the graphs do not give (empty: they serve it)."""
        asked = [f"{name} ({what})" for name, what in UNSERVED_OPTIONS.items() if kwargs.get(name) not in (None, False)]
        config = kwargs.get("generation_config") or model.generation_config
        if kwargs.get("use_cache", config.use_cache) is False:
            asked.append("use_cache=False (no cache)")
        for name in ("output_attentions", "output_hidden_states"):
            if getattr(config, name, False) and name not in kwargs:
                asked.append(f"{name} in the generation config")
        return asked

    def generate(self, model: nn.Module, **kwargs: Any) -> Any:
        """``model.generate(**kwargs)`` with the model's forward run by the graphs; eagerly, saying why,
        where the call asks for an option they do not give."""
        unserved = self.unserved(model, kwargs)
        if unserved:
            warnings.warn(
                ExportedFallbackWarning(
                    f"decoding eagerly, not with the {self.description} graphs: they do not give " + ", ".join(unserved)
                ),
                stacklevel=2,
            )
            return model.generate(**kwargs)
        with self._bound(model):
            return model.generate(**kwargs)

    @contextmanager
    def _bound(self, model: nn.Module) -> Iterator[None]:
        """``model``'s encoder and forward served by the graphs for the length of one call (instance
        attributes, removed after; the forward keeps its signature, which `generate` reads)."""
        embed_source, self._embed_targets = token_embedders(model)
        encoder = _ExportedEncoder(
            self.graphs["encoder"], embed=embed_source, keep=functools.partial(setattr, self, "_cross_kv")
        )
        eager_forward = model.forward

        @functools.wraps(eager_forward)
        def forward(*args: Any, **kwargs: Any) -> Any:
            return self._forward(*args, **kwargs)

        # `generate` reads the forward's signature at every step; worked out once, not through the wrapper
        forward.__signature__ = inspect.signature(eager_forward)

        model.get_encoder = lambda *args, **kwargs: encoder
        model.forward = forward
        self._cross_kv, self._pending_order, self._cache = [], None, None
        try:
            with beam_reorders_to(model, self._defer_reorder):
                yield
            if self._pending_order is not None and self._cache is not None:
                self._cache.reorder_cache(self._pending_order)
        finally:
            del model.get_encoder, model.forward
            self._cross_kv, self._pending_order, self._cache, self._embed_targets = [], None, None, None

    def _defer_reorder(self, cache: Cache, beam_idx: torch.Tensor) -> Cache:
        """Beam search's reorder of ``cache``, kept for the next step to do (composed with one kept before)."""
        # int64, as the graph was traced with: generate's indices are int32 on some releases, and a compiled
        # graph reads its inputs as the types it was built for without checking them
        beam_idx = beam_idx.to(torch.long, copy=True)
        order = self._pending_order
        self._pending_order = beam_idx if order is None else order.index_select(0, beam_idx)
        return cache

    def _forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        encoder_outputs: Any = None,
        **kwargs: Any,
    ) -> Any:
        from transformers.modeling_outputs import Seq2SeqLMOutput

        cache = take_cache(kwargs)
        if encoder_outputs is None or cache is None or decoder_input_ids is None:
            raise RuntimeError("the exported graphs run inside generate, with its encoder output and cache")
        hidden = encoder_outputs[0].contiguous()
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        attention_mask = attention_mask.contiguous()
        self_cache = cache.self_attention_cache
        self._cache = cache
        if self_cache.get_seq_length() == 0:
            outputs = self._first_step(decoder_input_ids.contiguous(), hidden, attention_mask)
        else:
            token = self._embed_targets(decoder_input_ids[:, -1:]).contiguous()
            past = [tensor.contiguous() for tensor in cache_tensors(self_cache)]
            order = self._pending_order
            order = torch.arange(token.shape[0], device=token.device) if order is None else order.contiguous()
            self._pending_order = None
            outputs = self.graphs["decoder_step"](token, hidden, attention_mask, order, past, self._cross_kv)
        set_cache_tensors(self_cache, outputs[1:])
        return Seq2SeqLMOutput(logits=outputs[0], **cache_kwargs(cache))

    def _first_step(self, tokens: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """The first step (an empty self-attention cache) on one row per sentence, its outputs repeated for
        the rows `generate` made of each sentence (its beams), where those rows are the same; on every row
        otherwise. The cross-attention cache, made per sentence by the encoder, is repeated once here for
        the later steps."""
        sentences = self._cross_kv[0].shape[0]
        rows = tokens.shape[0]
        if rows % sentences:
            raise RuntimeError(f"generate decodes {rows} rows for {sentences} encoded sentences")
        copies = rows // sentences
        per_sentence = self._cross_kv
        if copies > 1:
            self._cross_kv = [tensor.repeat_interleave(copies, dim=0) for tensor in per_sentence]
            one = [tensor[::copies].contiguous() for tensor in (tokens, hidden, mask)]
            if all(
                torch.equal(part.repeat_interleave(copies, dim=0), whole)
                for part, whole in zip(one, (tokens, hidden, mask))
            ):
                order = torch.arange(sentences, device=tokens.device)
                embeds = self._embed_targets(one[0]).contiguous()
                outputs = self.graphs["decoder_step"](
                    embeds, *one[1:], order, empty_self_cache(per_sentence, sentences), per_sentence
                )
                return [tensor.repeat_interleave(copies, dim=0) for tensor in outputs]
        order = torch.arange(rows, device=tokens.device)
        embeds = self._embed_targets(tokens).contiguous()
        return list(
            self.graphs["decoder_step"](
                embeds, hidden, mask, order, empty_self_cache(self._cross_kv, rows), self._cross_kv
            )
        )


__all__ = ["UNSERVED_OPTIONS", "ExportedDecoding", "ExportedFallbackWarning"]
