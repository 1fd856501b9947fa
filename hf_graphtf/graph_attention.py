"""Graph-group encoder attention (multi-order subgraphs), for encoder layers 1..N-1.

Layer 0 is a standard encoder layer, ``f_0 = Layer_0(x)``. Layer n >= 1 receives the previous
representation ``P`` and the full one ``F = P + I`` (so the incremental one is ``I = F - P``) and
replaces self-attention by three subgraph groups:

* high order:   ``a_h  = self_attn(query=I, key=value=I)``
* middle order: ``a_m  = mid_attn_inc(query=I, key=value=P) + mid_attn_prev(query=P, key=value=I)``
* low order:    ``a_l  = low_proj(P)``

fused by one of the registered fusions (`graph_fusions`: ``sum``, a sigmoid ``gate`` or a one-head
``self_gate`` over the four group vectors of each position). The fused vector takes the place of the
self-attention output in the layer's usual post-LN block, and the next layer gets ``P' = F``.
Submodule names are part of the checkpoint format.

This module travels with saved checkpoints (``trust_remote_code``): it imports only torch.
"""

from __future__ import annotations

import torch
from torch import nn

from .graph_fusions import Fusion, get_fusion
from .layer_blocks import add_and_norm, attentions_requested, feed_forward
from .transformers_seam import eager_attention, sdpa_attention_forward

#: attention implementations the fused group path runs on; others take the per-module path
FUSED_IMPLEMENTATIONS = ("eager", "sdpa")


def _project(x: torch.Tensor, linears: list[nn.Linear]) -> tuple[torch.Tensor, ...]:
    """Several `nn.Linear` maps of the same input as one matmul."""
    weight = torch.cat([m.weight for m in linears])
    bias = torch.cat([m.bias for m in linears])
    return torch.nn.functional.linear(x, weight, bias).split([m.out_features for m in linears], dim=-1)


def build_group_attention(attention_class: type[nn.Module], config, half_dim: bool) -> nn.Module:
    """A Marian/BART encoder attention; with `half_dim` it projects d -> d/2 and maps back to d."""
    d_model = config.d_model
    inner = d_model // 2 if half_dim else d_model
    attn = attention_class(
        embed_dim=inner,
        num_heads=config.encoder_attention_heads,
        dropout=config.attention_dropout,
        config=config,
    )
    if half_dim:
        attn.q_proj = nn.Linear(d_model, inner)
        attn.k_proj = nn.Linear(d_model, inner)
        attn.v_proj = nn.Linear(d_model, inner)
        attn.out_proj = nn.Linear(inner, d_model)
    return attn


class GraphEncoderLayerMixin:
    """Encoder layer n >= 1 with graph-group self-attention.

    ``forward(F, attention_mask, P)`` takes the previous representation P as a positional tensor
    from the stack's loop and returns ``(f_n, gate)``; the gate is what ``output_graph_gates=True``
    collects. Any activation-checkpointing wrapper re-runs the layer on the same P.
    """

    group_attention_class: type[nn.Module]
    #: graph-group attention is defined for post-LN layers only (the config refuses it elsewhere)
    normalize_before = False

    def __init__(self, config, layer_idx: int | None = None):
        super().__init__(config, layer_idx=layer_idx)
        half_dim = config.graph_half_dim
        if half_dim:
            self.self_attn = build_group_attention(self.group_attention_class, config, half_dim)
        self.graph_shared_qkv = config.graph_shared_qkv
        if not self.graph_shared_qkv:
            self.mid_attn_inc = build_group_attention(self.group_attention_class, config, half_dim)
            self.mid_attn_prev = build_group_attention(self.group_attention_class, config, half_dim)
        self.low_proj = nn.Linear(config.d_model, config.d_model)
        self.graph_fusion = config.graph_fusion
        fusion_modules = self.fusion.build_modules(config.d_model)
        for name, module in fusion_modules.items():
            setattr(self, name, module)
        #: the submodules a vanilla checkpoint has no weights for (`GraphPreTrainedMixin.added_module_names`)
        self.added_modules = (
            *(("self_attn",) if half_dim else ()),
            *(() if self.graph_shared_qkv else ("mid_attn_inc", "mid_attn_prev")),
            "low_proj",
            *fusion_modules,
        )

    @property
    def fusion(self) -> Fusion:
        """The registered fusion of ``graph_fusion`` (looked up, not stored: modules stay picklable)."""
        return get_fusion(self.graph_fusion)

    def forward(self, hidden_states, attention_mask, previous=None, **kwargs):
        if previous is None:
            raise ValueError(
                f"{type(self).__name__} needs the previous representation P; it runs inside a graph encoder "
                "after a standard layer 0, not on its own."
            )
        full, prev = hidden_states, previous
        incremental = full - prev
        if self._can_fuse(kwargs):
            fused, gate = self._fused_groups(incremental, prev, attention_mask)
        else:
            fused, gate = self._module_groups(incremental, prev, attention_mask, **kwargs)
        hidden_states = add_and_norm(self, full, fused, self.self_attn_layer_norm)
        return feed_forward(self, hidden_states, clamp_fp16=True), gate

    def _can_fuse(self, kwargs) -> bool:
        """The fused path serves shared-qkv layers, where it removes work: I and P are projected once
        each (6 projections instead of 9) and one output projection of the summed heads replaces three.
        With separate modules it measured no faster and kept more memory for backward
        (recipes/benchmarks/RESULTS.md), so those take the per-module path. It reads the weights
        directly, so it also needs plain `nn.Linear` projections (not adapters such as LoRA) whose
        weights are materialised (not DeepSpeed ZeRO-3 partitions, which are gathered only when their
        own module runs), a kernel it knows, and no request for attention probabilities."""
        attn = self.self_attn
        linears = [self.low_proj, attn.q_proj, attn.k_proj, attn.v_proj, attn.out_proj]
        return (
            self.graph_shared_qkv
            and not attentions_requested(attn, kwargs)
            and attn.config._attn_implementation in FUSED_IMPLEMENTATIONS
            and all(type(m) is nn.Linear and m.bias is not None for m in linears)
            and not any(hasattr(m.weight, "ds_id") for m in linears)  # ZeRO-3 partitioned parameter
        )

    def _fused_groups(self, incremental, prev, attention_mask):
        """The three shared-module attentions and ``low_proj`` with two input matmuls, one batched
        attention call and, for ``sum``/``gate``, one output projection; equal to `_module_groups`."""
        attn = self.self_attn
        q_i, k_i, v_i = _project(incremental, [attn.q_proj, attn.k_proj, attn.v_proj])
        q_p, k_p, v_p, low = _project(prev, [attn.q_proj, attn.k_proj, attn.v_proj, self.low_proj])
        # high: I->I, middle_inc: I->P, middle_prev: P->I, as one batch of 3 * batch
        queries, keys, values = (q_i, q_i, q_p), (k_i, k_p, k_i), (v_i, v_p, v_i)
        batch, length = incremental.shape[:2]

        def heads(parts):
            return torch.cat(parts, dim=0).view(3 * batch, length, -1, attn.head_dim).transpose(1, 2)

        mask = None if attention_mask is None else attention_mask.repeat(3, 1, 1, 1)
        dropout = attn.dropout if self.training else 0.0
        if attn.config._attn_implementation == "sdpa":
            output, _ = sdpa_attention_forward(
                attn, heads(queries), heads(keys), heads(values), mask,
                dropout=dropout, scaling=attn.scaling, is_causal=False,
            )  # fmt: skip
        else:
            output, _ = eager_attention(attn, heads(queries), heads(keys), heads(values), mask, dropout, attn.scaling)
        o_high, o_inc, o_prev = output.reshape(3, batch, length, -1).unbind(0)
        out = attn.out_proj
        if self.fusion.fuse_attended is None:  # it needs the three attended groups apart
            groups = [nn.functional.linear(o, out.weight, out.bias) for o in (o_high, o_inc, o_prev)]
            return self.fusion.fuse(self, *groups, low)
        attended = nn.functional.linear(o_high + o_inc + o_prev, out.weight, 3 * out.bias)
        return self.fusion.fuse_attended(self, attended, low)

    def _module_groups(self, incremental, prev, attention_mask, **kwargs):
        """One call per attention module: works with every kernel, adapter and output flag."""
        high, _ = self.self_attn(incremental, attention_mask=attention_mask, **kwargs)
        if self.graph_shared_qkv:
            # The shared module's own forward, not __call__: only the high-order call above is
            # recorded as this layer's attention by `output_attentions`.
            middle_inc_attn = middle_prev_attn = self.self_attn.forward
        else:
            middle_inc_attn, middle_prev_attn = self.mid_attn_inc, self.mid_attn_prev
        middle_inc, _ = middle_inc_attn(incremental, key_value_states=prev, attention_mask=attention_mask, **kwargs)
        middle_prev, _ = middle_prev_attn(prev, key_value_states=incremental, attention_mask=attention_mask, **kwargs)
        low = self.low_proj(prev)
        return self.fusion.fuse(self, high, middle_inc, middle_prev, low)
