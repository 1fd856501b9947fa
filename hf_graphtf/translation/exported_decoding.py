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
- rows whose logits `generate` no longer reads are not decoded again: in greedy search a row that has ended
  (it pads the row whatever its logits), in beam search the beams of a sentence it is done with
  (`transformers_seam.ignored_rows_of` says which); the later steps run on the rows still going, and the
  others' logits are zeros. Not where the call returns more than the tokens (`return_dict_in_generate`:
  every row's scores and cache) or a logits processor of the caller's reads every row. In float32 the
  tokens are the same; in int8, whose activations are quantized by the batch's range, fewer rows may move
  the others' logits as a batch's make-up always does;
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

from ..transformers_seam import (
    Cache,
    IgnoredRows,
    beam_reorders_to,
    cache_kwargs,
    cache_tensors,
    ignored_rows_of,
    set_cache_tensors,
    take_cache,
)
from .export_graphs import empty_self_cache, token_embedders

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
        #: whether the steps leave out the rows `generate` no longer reads (False: every row is decoded to
        #: the end, as eagerly; for measuring what leaving them out changes)
        self.leave_out_ignored_rows = True
        self._cross_kv: list[torch.Tensor] = []
        self._embed_targets: Callable[[torch.Tensor], torch.Tensor] | None = None
        #: the reorder of the self-attention cache the next step does (None: none asked since the last step)
        self._pending_order: torch.Tensor | None = None
        self._cache: Any = None
        #: whether a call's ignored rows may be left out of its steps (not where a logits processor of the
        #: caller's sees every row's logits together)
        self._may_drop_rows = True
        #: the rows of the call `generate` no longer reads (None: every row is decoded)
        self._ignored: IgnoredRows | None = None
        #: the rows of `generate`'s batch the last step decoded, which the self-attention cache holds in this
        #: order (None: every row) and, for those rows, the encoder's states and mask the steps read
        self._live: torch.Tensor | None = None
        self._live_encoded: tuple[torch.Tensor, torch.Tensor] | None = None
        #: none of the last step's logits (their type and vocabulary, for a step with no row left to decode)
        self._empty_logits: torch.Tensor | None = None

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
        self._may_drop_rows = self.leave_out_ignored_rows and not kwargs.get("logits_processor")
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
            with beam_reorders_to(model, self._defer_reorder), ignored_rows_of(model) as ignored:
                self._ignored = ignored if self._may_drop_rows else None
                yield
            if self._pending_order is not None and self._cache is not None and self._live is None:
                self._cache.reorder_cache(self._pending_order)
        finally:
            del model.get_encoder, model.forward
            self._cross_kv, self._pending_order, self._cache, self._embed_targets = [], None, None, None
            self._ignored, self._live, self._live_encoded, self._empty_logits = None, None, None, None

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
        rows = decoder_input_ids.shape[0]
        if self_cache.get_seq_length() == 0:
            outputs = self._first_step(decoder_input_ids.contiguous(), hidden, attention_mask)
            self._live, self._live_encoded = None, (hidden, attention_mask)
        else:
            tokens, past = decoder_input_ids[:, -1:], cache_tensors(self_cache)
            order = self._pending_order
            self._pending_order = None
            live = self._rows_going(tokens[:, 0])
            if live is not None:
                tokens, order, self._live = tokens.index_select(0, live), self._cache_rows(live, order, rows), live
                if tokens.shape[0] == 0:  # every row has ended: a step generate drops, or stops on, all padding
                    return Seq2SeqLMOutput(logits=self._all_rows(self._empty_logits, rows), **cache_kwargs(cache))
                if order.shape[0] != past[0].shape[0]:  # the graph takes as many cache rows as tokens
                    past, order = [tensor.index_select(0, order) for tensor in past], None
                hidden, attention_mask = self._live_encoded
            token = self._embed_targets(tokens).contiguous()
            past = [tensor.contiguous() for tensor in past]
            order = torch.arange(token.shape[0], device=token.device) if order is None else order.contiguous()
            outputs = self.graphs["decoder_step"](token, hidden, attention_mask, order, past, self._cross_kv)
        set_cache_tensors(self_cache, outputs[1:])
        self._empty_logits = outputs[0][:0]
        return Seq2SeqLMOutput(logits=self._all_rows(outputs[0], rows), **cache_kwargs(cache))

    def _rows_going(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """The rows of the batch this step decodes, in order (None: every row, none having been left out),
        given each row's last token; the cross-attention cache and the encoder's states are cut to them here
        from the rows the last step decoded, once each time rows are left out, not at every step. A row is
        left out when `generate` no longer reads its logits (`ignored_rows_of`), and stays out."""
        ignored, previous = self._ignored, self._live
        going = None
        if ignored is not None and ignored.greedy_row_ends is not None:
            going = ~torch.isin(tokens, ignored.greedy_row_ends)
        elif ignored is not None and ignored.sentences_done is not None:
            done = ignored.sentences_done
            going = ~done.repeat_interleave(tokens.shape[0] // done.shape[0])
        if going is None:
            return previous
        if previous is not None:
            going &= torch.zeros_like(going).index_fill_(0, previous, True)
        elif bool(going.all()):
            return None
        live = going.nonzero().flatten()
        if previous is None or live.shape[0] != previous.shape[0]:
            kept = live if previous is None else self._places(previous, tokens.shape[0]).index_select(0, live)
            self._cross_kv = [tensor.index_select(0, kept) for tensor in self._cross_kv]
            self._live_encoded = tuple(tensor.index_select(0, kept).contiguous() for tensor in self._live_encoded)
        return live

    @staticmethod
    def _places(live: torch.Tensor, rows: int) -> torch.Tensor:
        """For each row of the batch, its place among the rows ``live`` (-1 for the others)."""
        places = torch.full((rows,), -1, dtype=torch.long, device=live.device)
        return places.index_copy_(0, live, torch.arange(live.shape[0], device=live.device))

    def _cache_rows(self, live: torch.Tensor, order: torch.Tensor | None, rows: int) -> torch.Tensor:
        """For each row decoded (``live``), the row of the self-attention cache it continues: the one beam
        search's reorder (``order``, over the whole batch) names for it, in the cache, which holds the rows
        the last step decoded (``self._live``, not yet moved on). A beam continues a beam of its own sentence,
        which was going then too."""
        wanted = live if order is None else order.index_select(0, live)
        return wanted if self._live is None else self._places(self._live, rows).index_select(0, wanted)

    def _all_rows(self, logits: torch.Tensor, rows: int) -> torch.Tensor:
        """A step's logits for all ``rows`` of `generate`'s batch: those of the rows decoded, zeros for the
        rows left out (whose logits `generate` does not read)."""
        if self._live is None:
            return logits
        return logits.new_zeros((rows, *logits.shape[1:])).index_copy_(0, self._live, logits)

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
