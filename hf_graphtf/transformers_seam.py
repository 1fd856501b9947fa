"""The seam to Transformers' internals: every name and behaviour of Transformers that the models rely on
beyond its public API, in one place, each with the Transformers code it follows and since which release.

The model modules import these pieces from here and nowhere else, so a new Transformers release that
renames or moves an internal is met here once (and `hf-graphtf check`, the compatibility legs of CI and
the import warning below say when it was not). Tested from `LOWEST_TESTED` to `NEWEST_TESTED`.

This module travels with saved checkpoints (``trust_remote_code``): it imports only torch and Transformers.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import transformers
from packaging import version
from torch import nn

# Followed since 5.2 (absent in 5.0/5.1): the output-capturing decorators the vanilla stacks use.
# Followed since 5.2: `merge_with_config_defaults` (use_cache/return_dict defaults from the config).
# Followed since 5.0: the mask builders and the fused SDPA call of the attention interface.
# Followed since 5.0: the initialisers that skip a tensor loaded from a checkpoint (`_is_hf_initialized`),
# which `_init_weights` must use so a parameter missing from a checkpoint is set and a loaded one kept.
from transformers import M2M100Config
from transformers import initialization as hf_init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions
from transformers.models.marian.modeling_marian import MarianEncoder, MarianSinusoidalPositionalEmbedding
from transformers.utils import is_torchdynamo_compiling
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

#: The releases the package is tested on (CI's lowest and newest legs; pyproject's lower bound).
LOWEST_TESTED = {"transformers": "5.17.0", "torch": "2.6.0"}
NEWEST_TESTED = {"transformers": "5.25.0", "torch": "2.15.0"}

#: The keyword under which Transformers hands the KV cache to decoder stacks, layers, attention modules,
#: mask builders and outputs. Follows `MarianDecoder.forward` / `create_causal_mask`: ``cache`` since
#: 5.24.0 (where ``past_key_values`` still works through `deprecate_kwarg` and warns), before that
#: ``past_key_values``. Read from the installed mask builder's signature, not from a version number.
CACHE_KWARG = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
_CACHE_NAMES = ("cache", "past_key_values")


def take_cache(kwargs: dict[str, Any]) -> Cache | None:
    """Remove the KV cache from ``kwargs`` under either name and return it (None if absent).

    Both names work on every release, as Transformers' own deprecation lets them; both at once is an
    error there and here. A loop, not ``next(generator, None)``: this runs inside the compiled forward
    (``--compile on``), and torch 2.6's compiler cannot trace ``next`` with a default."""
    given = [name for name in _CACHE_NAMES if kwargs.get(name) is not None]
    if len(given) > 1:
        raise ValueError("pass the KV cache as `cache` or as `past_key_values`, not both")
    cache = None
    for name in _CACHE_NAMES:
        value = kwargs.pop(name, None)
        if cache is None:
            cache = value
    return cache


def cache_kwargs(cache: Cache | None) -> dict[str, Cache | None]:
    """The cache as the keyword argument the installed release's layers and checkpointing wrapper read:
    `GradientCheckpointingLayer.__call__` drops the cache by this name when it recomputes a layer."""
    return {CACHE_KWARG: cache}


#: The parameters of the vanilla seq2seq models' ``forward`` (`MarianModel.forward`; the translation models add
#: ``labels`` before ``use_cache``), in order, as the package's models write them out
#: (`modeling_common.GraphBaseModelMixin.forward`, `GraphTranslationModelMixin.forward`), ``self`` and
#: ``**kwargs`` aside. The same in every family from 5.17.0 to 5.25.0 but for the cache, named ``cache`` since
#: 5.24.0 (`CACHE_KWARG`): the models keep ``past_key_values``, which every tested release accepts, and hand
#: the cache on under the installed name, so no release warns. tests/test_compat.py compares the installed
#: release's signatures with `vanilla_forward_parameters`.
SEQ2SEQ_FORWARD_PARAMETERS = (
    "input_ids",
    "attention_mask",
    "decoder_input_ids",
    "decoder_attention_mask",
    "encoder_outputs",
    "past_key_values",
    "inputs_embeds",
    "decoder_inputs_embeds",
    "use_cache",
)


def vanilla_forward_parameters(model_class: type) -> list[str]:
    """The parameters of ``model_class.forward`` of the installed release, ``self`` and ``**kwargs`` left out,
    its cache named ``past_key_values`` as the package's models name it."""
    parameters = inspect.signature(model_class.forward).parameters.values()
    names = [p.name for p in parameters if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
    return ["past_key_values" if name in _CACHE_NAMES else name for name in names]


def new_decoder_cache(config) -> EncoderDecoderCache:
    """The cache a vanilla decoder stack starts when ``use_cache`` and none is given
    (follows `MarianDecoder.forward`, 5.0-5.24)."""
    return EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))


def cache_tensors(cache: DynamicCache) -> list[torch.Tensor]:
    """A ``DynamicCache``'s tensors as one flat list (layer 0's keys, its values, layer 1's keys, ...), as the
    exported graphs take and give them (follows `DynamicLayer`'s ``keys`` and ``values``, 5.0-5.25)."""
    return [tensor for layer in cache.layers for tensor in (layer.keys, layer.values)]


def set_cache_tensors(cache: DynamicCache, tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> None:
    """Fill ``cache`` with a flat list of `cache_tensors`' order: an empty cache layer by layer through its
    ``update``, a filled one by replacing its layers' tensors (the grown cache an exported step returns)."""
    if cache.get_seq_length() == 0:
        for index in range(len(tensors) // 2):
            cache.update(tensors[2 * index], tensors[2 * index + 1], index)
        return
    for layer, index in zip(cache.layers, range(0, len(tensors), 2)):
        layer.keys, layer.values = tensors[index], tensors[index + 1]


def filled_decoder_cache(self_kv: list[torch.Tensor], cross_kv: list[torch.Tensor] | None) -> EncoderDecoderCache:
    """An encoder-decoder cache holding ``self_kv`` (possibly none yet) and ``cross_kv`` (flat lists, as
    `cache_tensors`), each cross-attention layer marked as made (follows `EncoderDecoderCache.is_updated`,
    which tells the cross-attention to read its keys rather than make them, 5.0-5.25)."""
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    set_cache_tensors(cache.self_attention_cache, self_kv)
    if cross_kv:
        set_cache_tensors(cache.cross_attention_cache, cross_kv)
        for index in range(len(cross_kv) // 2):
            cache.is_updated[index] = True
    return cache


@contextmanager
def beam_reorders_to(model: nn.Module, reorder: Callable[[Cache, torch.Tensor], Cache]) -> Iterator[None]:
    """For the length of the block, beam search hands its cache reorders to ``reorder(cache, beam_idx)``,
    which returns the cache `generate` keeps. Follows `GenerationMixin._beam_search` (5.17-5.25): after each
    step it calls the model's ``_reorder_cache`` where the model has one (an instance attribute here,
    removed after), and the cache's own ``reorder_cache`` otherwise."""
    model._reorder_cache = reorder
    try:
        yield
    finally:
        del model._reorder_cache


class IgnoredRows:
    """Which rows of a running `generate` call it no longer reads the logits of, as its own search says
    (`ignored_rows_of`): rows it pads whatever their logits say, and rows of sentences it has done with.
    The caller's step may leave those rows out and give any finite logits for them; the tokens `generate`
    returns are the same."""

    def __init__(self) -> None:
        #: greedy search: the tokens after which a row is padded to the end (None: not a greedy search whose
        #: rows may be left out)
        self.greedy_row_ends: torch.Tensor | None = None
        #: beam search: whether its sentences' ends are watched (False: not a beam search whose rows may be
        #: left out), and, after each step, which sentences (one flag each) it has done with
        self.beam_watched = False
        self.sentences_done: torch.Tensor | None = None


@contextmanager
def ignored_rows_of(model: nn.Module) -> Iterator[IgnoredRows]:
    """For the length of the block, each `generate` call of ``model`` says, in the `IgnoredRows` given, which
    of its rows it no longer reads the logits of. Nothing is said (every row is read) where the call's output
    carries more than the tokens (`return_dict_in_generate`: scores, logits and every row's cache), or it is
    neither a greedy nor a beam search.

    Follows `GenerationMixin.generate`, `_sample` and `_beam_search` (5.17-5.25), through two of its methods
    called as instance attributes here (removed after):

    - `generate` builds its stopping criteria once, before decoding, by
      ``_get_stopping_criteria(generation_config=...)`` with the call's final generation config;
    - greedy search (`_sample`) finishes a row when any criterion says so, `EosTokenCriteria` saying so of a
      row whose last token is one of its ``eos_token_id``, and, as that criterion has an ``eos_token_id``
      (``has_eos_stopping_criteria``), sets the next token of every finished row to the pad token;
    - beam search calls ``_beam_search_has_unfinished_sequences(is_early_stop_heuristic_unsatisfied,
      is_sent_finished, next_token_hits_stopping_criteria, early_stopping)`` after each step. A sentence
      whose heuristic is no longer unsatisfied, or whose finished hypotheses are all set where
      ``early_stopping is True``, is done: `_update_finished_beams` adds -1e9 to each new candidate of it
      (below every hypothesis it keeps), so its running beams' scores reach nothing returned; its candidates'
      hits on the end-of-sequence, length and time criteria change no stop (every candidate of every
      sentence hits them together, at the maximum length, or a running sentence's beams cannot all end at
      once); and as both flags only ever turn one way, it stays done."""
    from transformers.generation import EosTokenCriteria, GenerationMode, MaxLengthCriteria, MaxTimeCriteria

    # the criteria with which a candidate of a running sentence hits one only at the maximum length (where
    # every candidate does) or by its own end-of-sequence token, as the docstring has it
    beam_criteria = (EosTokenCriteria, MaxLengthCriteria, MaxTimeCriteria)
    said = IgnoredRows()
    build = model._get_stopping_criteria

    def built_and_read(*args: Any, **kwargs: Any) -> Any:
        criteria = build(*args, **kwargs)
        config = kwargs["generation_config"] if "generation_config" in kwargs else args[0]
        mode = None if config.return_dict_in_generate else config.get_generation_mode()
        ends = [criterion.eos_token_id for criterion in criteria if isinstance(criterion, EosTokenCriteria)]
        if mode == GenerationMode.GREEDY_SEARCH and ends:
            said.greedy_row_ends = torch.cat([torch.as_tensor(ids).flatten() for ids in ends])
        if mode == GenerationMode.BEAM_SEARCH:
            said.beam_watched = all(type(criterion) in beam_criteria for criterion in criteria)
        return criteria

    def checked_and_read(heuristic_unsatisfied, sent_finished, hits, early_stopping) -> Any:
        if said.beam_watched:
            said.sentences_done = ~heuristic_unsatisfied[:, 0] | (sent_finished.all(dim=-1) & (early_stopping is True))
        return unfinished(heuristic_unsatisfied, sent_finished, hits, early_stopping)

    unfinished = model._beam_search_has_unfinished_sequences
    model._get_stopping_criteria = built_and_read
    model._beam_search_has_unfinished_sequences = checked_and_read
    try:
        yield said
    finally:
        del model._get_stopping_criteria, model._beam_search_has_unfinished_sequences


def stack_token_embeddings(stack: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """The ``inputs_embeds`` an encoder or decoder stack makes of ``input_ids`` itself, so that handing them in
    instead gives the same hidden states: the package's stacks say so (``token_embeddings``); a vanilla one
    follows its ``forward`` (5.17-5.25): `MarianEncoder` scales the looked-up rows by ``embed_scale``,
    `MarianDecoder` scales given and looked-up ones alike (so not here), and BART's and M2M100's embedding
    modules scale inside."""
    own = getattr(stack, "token_embeddings", None)
    if own is not None:
        return own(input_ids)
    embeds = stack.embed_tokens(input_ids)
    return embeds * stack.embed_scale if isinstance(stack, MarianEncoder) else embeds


def self_attention_cache(cache: Cache | None) -> Cache | None:
    """The self-attention half of an encoder-decoder cache (follows `MarianDecoder.forward`, 5.0-5.24)."""
    return cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache


def causal_mask(config, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor | None, cache: Cache | None):
    """`create_causal_mask` with the cache under the installed release's keyword."""
    return create_causal_mask(
        config=config,
        inputs_embeds=inputs_embeds,
        attention_mask=attention_mask,
        **cache_kwargs(self_attention_cache(cache)),
    )


def decoder_stack_output(hidden_states: torch.Tensor, cache: Cache | None) -> BaseModelOutputWithPastAndCrossAttentions:
    """A decoder stack's output with the cache in the field the installed release names (``cache`` since
    5.24.0; the old field name still reads there, with a deprecation message)."""
    return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden_states, **cache_kwargs(cache))


def output_cache(output: Any) -> Cache | None:
    """The KV cache a model's output carries, read under the installed release's field name (``cache`` since
    5.24.0, as in `Seq2SeqLMOutput`; there the old name is a property that logs a deprecation message)."""
    return getattr(output, CACHE_KWARG)


def project_qkv(
    attn: nn.Module,
    hidden_states: torch.Tensor,
    key_value_states: torch.Tensor | None,
    cache: Cache | None,
    carried_keys: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of a Marian/BART attention module, with its KV-cache reads and updates.

    Follows the projection half of `MarianAttention.forward` / `BartAttention.forward` (5.0-5.24): the
    cross-attention keys are computed once and then read from the cache (``is_updated``), the
    self-attention keys are appended to it. The link takes over the score computation after this.

    `carried_keys` (cross-attention only) are concatenated to the new keys along the head dimension before
    the cache stores them, so the cache holds, and later steps read, the keys the link's concat kernel
    attends over: computed once per `generate`, reordered by beam search with the rest of the cache. The
    static cache takes the wider keys, as it sizes its key tensor from the first update
    (`StaticLayer.lazy_initialization`, 5.17-5.24).
    """
    is_cross_attention = key_value_states is not None
    query = attn.q_proj(hidden_states).view(*hidden_states.shape[:-1], -1, attn.head_dim).transpose(1, 2)

    layer_cache, is_updated = None, False
    if cache is not None:
        if isinstance(cache, EncoderDecoderCache):
            is_updated = cache.is_updated.get(attn.layer_idx)
            layer_cache = cache.cross_attention_cache if is_cross_attention else cache.self_attention_cache
        else:
            layer_cache = cache

    current_states = key_value_states if is_cross_attention else hidden_states
    if is_cross_attention and layer_cache is not None and is_updated:
        key = layer_cache.layers[attn.layer_idx].keys
        value = layer_cache.layers[attn.layer_idx].values
    else:
        kv_shape = (*current_states.shape[:-1], -1, attn.head_dim)
        key = attn.k_proj(current_states).view(kv_shape).transpose(1, 2)
        value = attn.v_proj(current_states).view(kv_shape).transpose(1, 2)
        if is_cross_attention and carried_keys is not None:
            key = torch.cat([key, carried_keys], dim=-1)
        if layer_cache is not None:
            key, value = layer_cache.update(key, value, attn.layer_idx)
            if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                cache.is_updated[attn.layer_idx] = True
    return query, key, value


#: model type (a substring of it: vanilla and graph_ forms alike) -> the first Transformers release whose vanilla
#: code decodes with a static cache under `torch.compile(fullgraph=True)`. Follows
#: `M2M100SinusoidalPositionalEmbedding.forward`: before 5.20.0 it branches on the cache's length, a tensor in a
#: static cache, which the compiler cannot trace (a data-dependent branch error at the first step).
COMPILED_DECODING_SINCE = {M2M100Config.model_type: "5.20.0"}


def compiled_decoding_refusal(model_type: str, installed: str = transformers.__version__) -> str | None:
    """Why decoding a `model_type` model cannot be compiled on the `installed` Transformers, or None if it can."""
    for name, since in COMPILED_DECODING_SINCE.items():
        if name in model_type and version.parse(installed).release < version.parse(since).release:
            return (
                f"compiled decoding of {model_type} models needs transformers >= {since} (its position embeddings "
                f"branch on the cache length before that); installed: {installed}. Decode without --compile."
            )
    return None


#: Position tables Transformers computes rather than learns: built frozen (``_freeze=True``), never saved (the
#: model's ``_keys_to_ignore_on_save``), computed again at every load (`_init_weights`). Marian's only: BART
#: learns its positions and saves them, M2M100 keeps its table in a buffer.
COMPUTED_POSITION_TABLES: tuple[type[nn.Module], ...] = (MarianSinusoidalPositionalEmbedding,)


class MarianPositionTable(MarianSinusoidalPositionalEmbedding):
    """Marian's sinusoidal position table, computed as `MarianSinusoidalPositionalEmbedding.create_weight`
    (5.x) computes it, value for value, but without its Python loop over every (position, feature) pair: a
    table is computed at every load (`COMPUTED_POSITION_TABLES`), and that loop was a second or more of
    each ``from_pretrained`` of an opus-mt-sized model. The per-feature divisors are the same scalar powers,
    the division the same float64 one, so the table is bit-identical (a test compares the two)."""

    def create_weight(self) -> torch.Tensor:
        import numpy as np

        n_pos, dim = self.weight.shape
        divisors = np.array([np.power(10000, 2 * (j // 2) / dim) for j in range(dim)])
        position_enc = np.arange(n_pos, dtype=np.float64)[:, None] / divisors[None, :]
        out = torch.empty(n_pos, dim, dtype=self.weight.dtype, requires_grad=False)
        sentinel = dim // 2 if dim % 2 == 0 else (dim // 2) + 1
        out[:, 0:sentinel] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
        out[:, sentinel:] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
        return out


def keep_computed_positions_frozen(module: nn.Module) -> None:
    """Freeze `module`'s table again if it is a computed one (`COMPUTED_POSITION_TABLES`); called from the
    models' `_init_weights`, where loading computes the table.

    Corrects `PreTrainedModel._move_missing_keys_from_meta_to_device` (seen in 5.17, 5.23 and 5.25): a parameter
    missing from a checkpoint comes back as a new `nn.Parameter` that requires a gradient, one built frozen too.
    Marian's tables are always missing, since saving leaves them out, so after `from_pretrained` an optimizer
    trained them and `save_pretrained` dropped what it trained: the model on disk was not the one evaluated."""
    if isinstance(module, COMPUTED_POSITION_TABLES):
        module.weight.requires_grad_(False)


def unsaved_trainable_parameters(model: nn.Module) -> list[str]:
    """The parameters of `model` that need a gradient but `save_pretrained` does not write, whatever made them
    trainable: what a run would train and then lose. Follows `PreTrainedModel.save_pretrained` (5.x), which
    deletes the state dict's keys named in ``_keys_to_ignore_on_save``. A PEFT model is read through its base."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    ignored = set(getattr(base, "_keys_to_ignore_on_save", None) or ())
    return [name for name, parameter in base.named_parameters() if parameter.requires_grad and name in ignored]


def eager_attention(module: nn.Module, query, key, value, attention_mask, dropout: float, scaling: float):
    """Scores, mask, softmax, dropout and the weighted sum, as Transformers' ``eager_attention_forward`` of
    the Marian/BART modules (5.0-5.24), taking boolean masks as well as additive ones."""
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    weights = nn.functional.dropout(nn.functional.softmax(scores, dim=-1), p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def enable_activation_checkpointing(model: nn.Module, checkpoint_kwargs: dict[str, Any] | None = None) -> None:
    """Transformers' activation checkpointing under the name the installed release gives it: later 5.x
    releases renamed ``gradient_checkpointing_enable`` to ``activation_checkpointing_enable`` and keep the
    old name as an alias that warns until v6; earlier ones have only the old name."""
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=checkpoint_kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=checkpoint_kwargs)


#: the key under which a tokenizer remembers it has warned that an encoding is longer than the model reads
_LONG_SEQUENCE_WARNING = "sequence-length-is-longer-than-the-specified-maximum"


@contextmanager
def measuring_lengths(tokenizer: Any) -> Iterator[None]:
    """``tokenizer`` encoding texts only to measure them, without its warning that a text longer than the model
    reads "will result in indexing errors": the caller splits such a text into pieces that fit, and says so
    itself. Follows `PreTrainedTokenizerBase._eventual_warn_about_too_long_sequence` (5.x), which warns once per
    tokenizer unless ``deprecation_warnings`` already holds its key; the key is put back as it was after."""
    warned = getattr(tokenizer, "deprecation_warnings", None)
    if not isinstance(warned, dict):
        yield
        return
    before = warned.get(_LONG_SEQUENCE_WARNING)
    warned[_LONG_SEQUENCE_WARNING] = True
    try:
        yield
    finally:
        if before is None:
            warned.pop(_LONG_SEQUENCE_WARNING, None)
        else:
            warned[_LONG_SEQUENCE_WARNING] = before


@contextmanager
def saved_with_use_cache(model: nn.Module, use_cache: bool | None) -> Iterator[None]:
    """``model``'s config with ``use_cache`` as it was before training, for as long as the block saves it.

    Follows `Trainer.__init__`'s "Finalize" step (5.x: ``self.model.config.use_cache = self.args.use_cache``,
    whose default is False): left alone, every checkpoint and the final folder save ``"use_cache": false``,
    and anything built from that config decodes without its cache, silently (the folder's own
    generation_config says true, which hides it from `generate` on the folder itself). Training keeps the
    Trainer's value; only what is written changes."""
    config = getattr(model, "config", None)
    if config is None or use_cache is None:
        yield
        return
    during = config.use_cache
    config.use_cache = use_cache
    try:
        yield
    finally:
        config.use_cache = during


def pipeline_generate_kwargs(pipeline, generate_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The `generate()` kwargs of one pipeline call: the call's, over those given at init, with the
    pipeline's default generation config under them. Follows `Pipeline._prepare_generate_kwargs` (since
    5.20); before it, the pipeline's prepared ``generation_config`` went in unless the call passed one
    (`TextGenerationPipeline._forward`, 5.17-5.19)."""
    if hasattr(pipeline, "_prepare_generate_kwargs"):
        return pipeline._prepare_generate_kwargs(generate_kwargs)
    if "generation_config" in generate_kwargs:
        return dict(generate_kwargs)
    return {**generate_kwargs, "generation_config": pipeline.generation_config}


def generate_setting(model, generate_kwargs: dict[str, Any], name: str) -> Any:
    """The value of generation parameter ``name`` that `model.generate(**generate_kwargs)` decodes with: the
    call's argument, else that of the ``generation_config`` it passes, else the model's generation config's.
    Follows `GenerationMixin._prepare_generation_config` (5.x), which fills a passed config's unset values from
    the model's and then applies the call's arguments."""
    if generate_kwargs.get(name) is not None:
        return generate_kwargs[name]
    passed = generate_kwargs.get("generation_config")
    if passed is not None and getattr(passed, name, None) is not None:
        return getattr(passed, name)
    return getattr(model.generation_config, name, None)


def new_token_limit(model, generate_kwargs: dict[str, Any]) -> int:
    """The most new tokens `model.generate(**generate_kwargs)` decodes on an encoder-decoder, which starts from
    the decoder's start token alone (or the ``decoder_input_ids`` passed). Follows
    `GenerationMixin._prepare_generated_length` (5.x): ``max_new_tokens`` wherever set, else ``max_length`` less
    the start; where neither is set, the global default ``max_length`` (`GenerationConfig`'s
    ``_get_default_generation_params``, 20) counted after the start and capped at the decoder's positions."""
    start = generate_kwargs.get("decoder_input_ids")
    start = 1 if start is None else start.shape[-1]
    max_new_tokens = generate_setting(model, generate_kwargs, "max_new_tokens")
    if max_new_tokens is not None:
        return int(max_new_tokens)
    max_length = generate_setting(model, generate_kwargs, "max_length")
    if max_length is not None:
        return int(max_length) - start
    length = transformers.GenerationConfig._get_default_generation_params()["max_length"] + start
    positions = getattr(model.config, "max_position_embeddings", None)
    return (length if positions is None else min(length, positions)) - start


def untested_releases() -> list[str]:
    """The installed releases newer than the newest tested one, as ``name X (newest tested Y)``."""
    installed = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}
    return [
        f"{name} {installed[name]} (tested {LOWEST_TESTED[name]} to {newest})"
        for name, newest in NEWEST_TESTED.items()
        if version.parse(installed[name]).release > version.parse(newest).release
    ]


def warn_if_untested() -> None:
    """One warning, at import, when an installed release is newer than the newest tested one: the models
    reach into Transformers' internals, so such a release may change what they compute. `hf-graphtf
    check` tells in under a minute whether it does."""
    newer = untested_releases()
    if newer:
        warnings.warn(
            f"hf_graphtf is tested up to transformers {NEWEST_TESTED['transformers']} and torch "
            f"{NEWEST_TESTED['torch']}; installed: {', '.join(newer)}. Run `hf-graphtf check` to verify "
            "the models on this install.",
            UserWarning,
            stacklevel=3,
        )


__all__ = [
    "CACHE_KWARG",
    "COMPUTED_POSITION_TABLES",
    "LOWEST_TESTED",
    "NEWEST_TESTED",
    "SEQ2SEQ_FORWARD_PARAMETERS",
    "Cache",
    "GradientCheckpointingLayer",
    "IgnoredRows",
    "MarianPositionTable",
    "OutputRecorder",
    "beam_reorders_to",
    "cache_kwargs",
    "capture_outputs",
    "causal_mask",
    "compiled_decoding_refusal",
    "create_bidirectional_mask",
    "decoder_stack_output",
    "eager_attention",
    "enable_activation_checkpointing",
    "generate_setting",
    "hf_init",
    "ignored_rows_of",
    "is_torchdynamo_compiling",
    "keep_computed_positions_frozen",
    "merge_with_config_defaults",
    "new_decoder_cache",
    "new_token_limit",
    "pipeline_generate_kwargs",
    "project_qkv",
    "sdpa_attention_forward",
    "stack_token_embeddings",
    "take_cache",
    "unsaved_trainable_parameters",
    "untested_releases",
    "vanilla_forward_parameters",
    "warn_if_untested",
]
