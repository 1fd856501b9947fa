"""Attention link: each layer adds the previous layer's pre-softmax scores to its own.

For one attention type (encoder self-attention, decoder self-attention or cross-attention),
layer n computes per head ``S_n = A_n + L_{n-1}`` with ``A_n = Q_n K_n^T * s`` and

* ``previous``:   ``L_{n-1} = A_{n-1}`` (the Attention Link paper), or
* ``cumulative``: ``L_{n-1} = S_{n-1}`` (a running sum, as in RealFormer),

then ``P_n = softmax(S_n + mask)``. Scores are carried before the mask, so a mask is never added twice.

``attention_link_gate="learned"`` (not from the paper) weighs the carry per head: ``S_n = A_n + w_n L_{n-1}``
with ``w_n`` the parameter ``link_gate`` of layer n >= 1, zeros at the start, so a pretrained model with the
link switched on computes what it computed before and learns how much to link.

Two kernels compute the same thing (`attention_link_kernel`: "auto" picks per device and step):

* **scores** (``attn_implementation="eager"``): materialise ``A_n``, add the carried scores, softmax.
  The carry between layers is the score tensor itself: `CarriedScores`.
* **concat** (``attn_implementation="sdpa"``): because ``Q_n K_n^T + Q_{n-1} K_{n-1}^T`` equals
  ``[Q_n | Q_{n-1}] [K_n | K_{n-1}]^T``, the linked scores are one fused SDPA call on queries and
  keys concatenated along the head dimension (values unchanged). The carry is the queries and keys,
  `CarriedQueryKey`; in cumulative mode it is the growing concatenation. No score matrix is ever
  materialised.

Between layers the carry travels as two positional tensors (``prev_attn``, ``prev_attn_keys``), so
that activation-checkpointing wrappers that track only top-level tensor arguments (DeepSpeed's,
reentrant checkpointing) see it; `carry_from_tensors` and `carry_tensors` convert, in one place.

Both work with the KV cache: the carried keys of layer n-1 are that layer's full (cached) keys,
and the carried queries or scores are those of the rows being decoded now, so incremental decoding
sees exactly the rows a full forward pass would. On the concat kernel in ``previous`` mode, cross-attention
stores its keys in the cache already concatenated with the carried ones (`stores_linked_keys`): the
encoder's keys do not change while decoding, so their concatenation is made once per `generate`. In training,
autograd keeps a previous-mode layer's concatenations for backward as their two halves, which live on anyway,
and concatenates them again there (`saved_joins`), so a linked step saves what a vanilla one does.

This module travels with saved checkpoints (``trust_remote_code``): it imports only torch and
Transformers.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, NamedTuple

import torch
from torch import nn

from .layer_blocks import add_and_norm, attentions_requested, feed_forward, normalizes_before, sublayer_input
from .link_modes import LinkMode, get_link_mode
from .saved_joins import Join, joins_saved_as_halves, saves_halves
from .transformers_seam import (
    cache_kwargs,
    is_torchdynamo_compiling,
    project_qkv,
    sdpa_attention_forward,
    take_cache,
)

#: attention implementations the link supports; anything else (flash, flex, paged) would drop it
LINK_IMPLEMENTATIONS = ("eager", "sdpa")
LINK_KERNELS_MESSAGE = (
    "attention_link needs attn_implementation 'eager' or 'sdpa': flash and flex kernels cannot add the "
    "previous layer's scores to the current ones."
)


class CarriedScores(NamedTuple):
    """What the scores kernel hands on: ``L_n``, the pre-softmax scores (before the mask) that the next
    layer adds to its own, shape ``(batch, heads, query_len, key_len)``."""

    scores: torch.Tensor


class CarriedQueryKey(NamedTuple):
    """What the concat kernel hands on: the queries and keys whose product is ``L_n`` (unscaled), shape
    ``(batch, heads, len, head_dim x k)``; the next layer concatenates them to its own along the head
    dimension, so one SDPA call computes ``A_{n+1} + L_n``."""

    queries: torch.Tensor
    keys: torch.Tensor


#: the previous layer's contribution to this layer's scores; None before the first linked layer
LinkCarry = CarriedScores | CarriedQueryKey | None


def carry_from_tensors(prev_attn: torch.Tensor | None, prev_attn_keys: torch.Tensor | None) -> LinkCarry:
    """The carry a layer received as positional tensors: scores alone, or queries with their keys."""
    if prev_attn is None:
        return None
    return CarriedScores(prev_attn) if prev_attn_keys is None else CarriedQueryKey(prev_attn, prev_attn_keys)


def carry_tensors(carry: LinkCarry) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The carry as the two positional tensors a layer returns (``prev_attn``, ``prev_attn_keys``)."""
    if carry is None:
        return None, None
    return (carry.scores, None) if isinstance(carry, CarriedScores) else (carry.queries, carry.keys)


def check_link_implementation(attn_implementation: str | None) -> None:
    """Refuse attention kernels that cannot add the carried scores, instead of silently dropping them."""
    if attn_implementation not in (*LINK_IMPLEMENTATIONS, None):
        raise ValueError(f"got attn_implementation {attn_implementation!r}. {LINK_KERNELS_MESSAGE}")


def readable_mask(attention_mask: Any) -> torch.Tensor | None:
    """The mask, if it is a tensor the linked kernels can add to scores (float or bool) or None.

    Mask forms built for other kernels (flex attention's ``BlockMask``) reach a linked layer only when
    the private ``config._attn_implementation`` was changed on a built model, past the one check
    Transformers offers (``_check_and_adjust_attn_implementation``); they are refused here with that
    check's message rather than failing deep inside the score sum.
    """
    if attention_mask is None or isinstance(attention_mask, torch.Tensor):
        return attention_mask
    raise ValueError(
        f"attention_link got a {type(attention_mask).__name__} attention mask, which only flash or flex "
        "kernels read. " + LINK_KERNELS_MESSAGE
    )


def gated(carry: LinkCarry, gate: torch.Tensor | None) -> LinkCarry:
    """The carry weighted per head by `gate` (shape ``(heads,)``): scores times the weight, or, for the
    concat kernel, the carried queries times it (the product with the keys is linear in them)."""
    if gate is None or carry is None:
        return carry
    weight = gate.view(1, -1, 1, 1)
    if isinstance(carry, CarriedScores):
        return CarriedScores(carry.scores * weight.to(carry.scores.dtype))
    return CarriedQueryKey(carry.queries * weight.to(carry.queries.dtype), carry.keys)


def _additive_mask(attention_mask: torch.Tensor | None, module: nn.Module, scores: torch.Tensor) -> torch.Tensor | None:
    """The mask as an additive float tensor, whatever form the mask builder produced for the kernel.

    A stack hands the same boolean mask to every layer, so the additive form of a mask the stack built for
    this call (`stack_mask`) is made once and kept on the mask tensor itself, per score dtype, for the layers
    after the first: the values are the ones each layer would make, and the copy lives exactly as long as
    the mask, one forward call. A mask the stack did not build (a caller's own tensor, which it might change
    in place) is converted at every layer."""
    if attention_mask is None:
        q_len, k_len = scores.shape[-2:]
        if not getattr(module, "is_causal", False) or q_len == 1:
            return None
        keep = torch.ones(q_len, k_len, dtype=torch.bool, device=scores.device).tril(k_len - q_len)
        attention_mask = keep
    if attention_mask.dtype != torch.bool:
        return attention_mask
    made = None if is_torchdynamo_compiling() else attention_mask.__dict__.get(_ADDITIVE)
    if made is None:
        return _additive_form(attention_mask, scores.dtype)
    if scores.dtype not in made:
        made[scores.dtype] = _additive_form(attention_mask, scores.dtype)
    return made[scores.dtype]


#: the attribute of a boolean mask a stack built holding its additive forms by dtype (`_additive_mask`)
_ADDITIVE = "_hf_graphtf_additive"


def stack_mask(built: Any, given: Any) -> Any:
    """The mask a stack built from the caller's (`given`) for its layers, marked so that its additive form is
    made once for all of them (`_additive_mask`); a caller's own tensor passed through unchanged is not
    marked, nor is anything while compiling (an attribute on a tensor would break the graph)."""
    if (
        isinstance(built, torch.Tensor)
        and built is not given
        and built.dtype == torch.bool
        and not is_torchdynamo_compiling()
    ):
        built.__dict__[_ADDITIVE] = {}
    return built


def _additive_form(keep: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where `keep` is True, the dtype's most negative value elsewhere (one kernel)."""
    zero = torch.zeros((), dtype=dtype, device=keep.device)
    return torch.where(keep, zero, torch.finfo(dtype).min)


def linked_scores_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    prev_attn: LinkCarry,
    *,
    mode: LinkMode,
    scaling: float,
    dropout: float,
) -> tuple[torch.Tensor, torch.Tensor, CarriedScores]:
    """Eager linked attention: returns (output, probabilities actually used, carry for the next layer)."""
    if key.shape[-1] > query.shape[-1]:  # cross-attention keys cached by the concat kernel, carry included
        key = key[..., : query.shape[-1]]
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if isinstance(prev_attn, CarriedQueryKey):  # the previous layer ran the concat kernel
        carried = torch.matmul(prev_attn.queries, prev_attn.keys.transpose(2, 3)) * scaling
    else:
        carried = None if prev_attn is None else prev_attn.scores
    linked = scores if carried is None else scores + carried
    mask = _additive_mask(attention_mask, module, linked)
    weights = nn.functional.softmax(linked if mask is None else linked + mask, dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights, CarriedScores(mode.carry(scores, linked))


def joined_heads(current: torch.Tensor, carried: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[current | carried]`` along the head dimension, shape ``(batch, heads, len, width)``, and `current`
    to carry on to the next layer.

    The join is laid out in memory as ``(batch, len, heads, width)``, the projections' layout, which fused
    SDPA kernels read without a copy and write their gradients in. `current` is handed on through the same
    ``(batch, len, heads, head_dim)`` view the join read, so its two gradients (this layer's and the next
    one's) are summed in that layout and reach the projection's backward without a contiguity copy."""
    current_t = current.transpose(1, 2)
    joined = torch.cat([current_t, carried.transpose(1, 2)], dim=-1).transpose(1, 2)
    return joined, current_t.transpose(1, 2)


def _join_again(current: torch.Tensor, carried: torch.Tensor) -> torch.Tensor:
    """A join `joined_heads` made, made again in the same memory layout (for backward: `saved_joins`)."""
    return joined_heads(current, carried)[0]


#: no saved-tensor hooks: autograd saves the joins themselves
_as_usual = contextlib.nullcontext()


def linked_concat_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    prev_attn: CarriedQueryKey | None,
    *,
    mode: LinkMode,
    scaling: float,
    dropout: float,
    **kwargs: Any,
) -> tuple[torch.Tensor, None, CarriedQueryKey]:
    """SDPA linked attention on head-dim-concatenated queries and keys (no score matrix materialised)."""
    joins: list[Join] = []  # the joins made here, which autograd may keep as their halves
    if prev_attn is not None:
        query_cat, query = joined_heads(query, prev_attn.queries)
        joins.append((query_cat, functools.partial(_join_again, query, prev_attn.queries)))
        if key.shape[-1] == query_cat.shape[-1]:  # cross-attention keys cached concatenated (`stores_linked_keys`)
            key_cat, key = key, key[..., : query.shape[-1]]
        else:
            key_cat, key = joined_heads(key, prev_attn.keys)
            joins.append((key_cat, functools.partial(_join_again, key, prev_attn.keys)))
    else:
        query_cat, key_cat = query, key
    kwargs.pop("output_attentions", None)
    keeps_halves = joins and mode.keeps_halves and saves_halves(query_cat, key_cat)
    saving = joins_saved_as_halves(joins) if keeps_halves else _as_usual
    with saving:
        output, _ = sdpa_attention_forward(
            module, query_cat, key_cat, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    return output, None, CarriedQueryKey(*mode.carry((query, key), (query_cat, key_cat)))


class LinkedAttentionMixin:
    """Turns a Marian/BART attention module into a linked one; adds no parameters.

    The forward takes the previous layer's carry and returns this layer's, after the usual
    ``(output, weights)`` so that Transformers' output capturing (index 1) keeps working.
    """

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        prev_attn: LinkCarry = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, LinkCarry]:
        """The KV cache comes in ``kwargs`` under either name (`take_cache`)."""
        config = self.config  # the options are read here, where they act, not copied onto the module
        implementation = config._attn_implementation
        dropout = self.dropout if self.training else 0.0
        attention_mask = readable_mask(attention_mask)
        prev_attn = gated(prev_attn, getattr(self, "link_gate", None))  # attention_link_gate="learned"
        sums_scores = use_score_path(
            config.attention_link_kernel, implementation, hidden_states, prev_attn, attentions_requested(self, kwargs)
        )
        cache = take_cache(kwargs)
        mode = get_link_mode(config.attention_link_mode)
        stores = stores_linked_keys(mode, prev_attn, cache, key_value_states, sums_scores)
        carried_keys = prev_attn.keys if stores else None
        query, key, value = project_qkv(self, hidden_states, key_value_states, cache, carried_keys)
        if sums_scores:
            attend = linked_scores_attention
        else:
            attend = functools.partial(linked_concat_attention, **kwargs)
        output, weights, carry = attend(
            self,
            query,
            key,
            value,
            attention_mask,
            prev_attn,
            mode=mode,
            scaling=self.scaling,
            dropout=dropout,
        )
        output = self.out_proj(output.reshape(*hidden_states.shape[:-1], -1).contiguous())
        return output, weights, carry


def stores_linked_keys(
    mode: LinkMode, prev_attn: LinkCarry, cache: Any, key_value_states: torch.Tensor | None, sums_scores: bool
) -> bool:
    """Whether this call, cross-attention (``key_value_states``) on the concat kernel (not `sums_scores`),
    stores its keys in the KV cache already concatenated with the carried ones, so a decoding step reads
    them instead of concatenating them again (one op fewer per linked cross-attention layer and step). Only
    with a cache: without one (training) the keys are made anew at every call and are concatenated where
    they always were. Only where the mode allows it (`LinkMode.stores_linked_keys`)."""
    return (
        cache is not None
        and key_value_states is not None
        and not sums_scores
        and isinstance(prev_attn, CarriedQueryKey)
        and mode.stores_linked_keys
    )


def use_score_path(
    kernel: str, implementation: str, states: torch.Tensor, prev_attn: LinkCarry, output_attentions: bool
) -> bool:
    """Whether this call sums scores (True) or runs SDPA on concatenated queries and keys (False).

    ``"auto"`` picks what measured fastest (recipes/benchmarks/RESULTS.md): the score sum under
    eager and on a CPU (whose flash kernel refuses queries/keys wider than values, so the concat falls
    back to the slower, memory-hungrier math kernel); the concat on a GPU, in training and in one-row
    decoding steps alike (the H200 sections of that page). Scores are also needed when the probabilities
    are requested, and once a layer has carried scores.
    """
    if output_attentions or isinstance(prev_attn, CarriedScores):
        return True
    if kernel != "auto":
        return kernel == "scores"
    return implementation == "eager" or states.device.type == "cpu"


def make_linked(attn: nn.Module, cls: type[nn.Module], *, learned_gate: bool = False) -> nn.Module:
    """Turn a vanilla attention module into its linked subclass `cls`, in place.

    The paper's link adds no parameters, so the module keeps its weights and names; only its class (and
    so its forward) changes. Nothing is built twice, and nothing of the config is copied: the forward reads
    the link's mode and kernel from ``attn.config``. `learned_gate` adds the one new parameter,
    ``link_gate`` (one weight per head, zeros: the carry starts switched off).
    """
    if not issubclass(cls, type(attn)):
        raise TypeError(f"{cls.__name__} is not a linked form of {type(attn).__name__}")
    attn.__class__ = cls
    if learned_gate:
        attn.link_gate = nn.Parameter(torch.zeros(attn.num_heads, device=attn.q_proj.weight.device))
    return attn


def _vanilla_layer_init(layer: nn.Module, mixin: type, config, layer_idx: int | None) -> None:
    """The vanilla layer's ``__init__``, with ``layer_idx`` where it takes one (M2M100's encoder layer does not)."""
    vanilla_init = super(mixin, layer).__init__
    if "layer_idx" in inspect.signature(vanilla_init).parameters:
        vanilla_init(config, layer_idx=layer_idx)
    else:
        vanilla_init(config)
    layer.normalize_before = normalizes_before(config)


def _link(layer: nn.Module, attn: nn.Module, config, layer_idx: int | None) -> None:
    """Make `attn` linked, with a learned gate in layers 1..N-1 when the config asks for one (layer 0
    receives no carry, so a gate there would be a parameter that never gets a gradient)."""
    learned_gate = config.attention_link_gate == "learned" and (layer_idx or 0) > 0
    make_linked(attn, layer.linked_attention_class, learned_gate=learned_gate)


class LinkedEncoderLayerMixin:
    """Encoder layer whose self-attention is linked to the previous layer's.

    ``forward(hidden_states, attention_mask, prev_attn, prev_attn_keys)`` takes the previous layer's
    carry as positional tensors and returns ``(hidden_states, prev_attn, prev_attn_keys)``: the stack's
    loop hands the carry from one layer's outputs to the next one's inputs. Any activation-checkpointing
    wrapper (Transformers', ``checkpoint_wrapper``, DeepSpeed's) then sees the carry as an input and an
    output of the computation it re-runs, so recomputation is exact.
    """

    linked_attention_class: type[nn.Module]

    def __init__(self, config, layer_idx: int | None = None):
        _vanilla_layer_init(self, LinkedEncoderLayerMixin, config, layer_idx)
        _link(self, self.self_attn, config, layer_idx)

    def forward(self, hidden_states, attention_mask, prev_attn=None, prev_attn_keys=None, **kwargs):
        attn_output, _, carry = self.self_attn(
            sublayer_input(self, hidden_states, self.self_attn_layer_norm),
            attention_mask=attention_mask,
            prev_attn=carry_from_tensors(prev_attn, prev_attn_keys),
            **kwargs,
        )
        hidden_states = add_and_norm(self, hidden_states, attn_output, self.self_attn_layer_norm)
        return feed_forward(self, hidden_states, clamp_fp16=True), *carry_tensors(carry)


class LinkedDecoderLayerMixin:
    """Decoder layer whose self- and cross-attention are each linked to the previous layer's.

    The four carry tensors (self-attention's and cross-attention's ``prev_attn``/``prev_attn_keys``)
    are positional inputs after ``encoder_hidden_states`` and come back after the hidden states, as in
    the encoder layer.
    """

    linked_attention_class: type[nn.Module]

    def __init__(self, config, layer_idx: int | None = None):
        _vanilla_layer_init(self, LinkedDecoderLayerMixin, config, layer_idx)
        _link(self, self.self_attn, config, layer_idx)
        _link(self, self.encoder_attn, config, layer_idx)

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        encoder_hidden_states=None,
        self_prev_attn=None,
        self_prev_attn_keys=None,
        cross_prev_attn=None,
        cross_prev_attn_keys=None,
        encoder_attention_mask=None,
        use_cache=True,
        **kwargs,
    ):
        cache = take_cache(kwargs)  # `cache` (Transformers >= 5.24) or `past_key_values`
        attn_output, _, self_carry = self.self_attn(
            sublayer_input(self, hidden_states, self.self_attn_layer_norm),
            attention_mask=attention_mask,
            prev_attn=carry_from_tensors(self_prev_attn, self_prev_attn_keys),
            **cache_kwargs(cache),
            **kwargs,
        )
        hidden_states = add_and_norm(self, hidden_states, attn_output, self.self_attn_layer_norm)
        cross_carry = carry_from_tensors(cross_prev_attn, cross_prev_attn_keys)
        if encoder_hidden_states is not None:
            attn_output, _, cross_carry = self.encoder_attn(
                sublayer_input(self, hidden_states, self.encoder_attn_layer_norm),
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                prev_attn=cross_carry,
                **cache_kwargs(cache),
                **kwargs,
            )
            hidden_states = add_and_norm(self, hidden_states, attn_output, self.encoder_attn_layer_norm)
        hidden_states = feed_forward(self, hidden_states, clamp_fp16=False)
        return hidden_states, *carry_tensors(self_carry), *carry_tensors(cross_carry)
