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
#: (device type, shared q/k/v) -> whether the fused group path measured faster there than one call per module.
#: On a CPU (recipes/benchmarks/RESULTS.md, "Where the time goes") matmuls set the pace: with shared q/k/v the
#: fused path does fewer projections and gains; with separate modules it gained nothing and held more memory.
#: On CUDA (RESULTS.md, "On an NVIDIA H200 (2026-12-04)", measured at 16K target tokens a step in bf16) the
#: fused path was faster for both. A device type not listed takes the fused path, which dispatches fewer ops.
FUSED_PATH_MEASURED: dict[tuple[str, bool], bool] = {
    ("cpu", True): True,
    ("cpu", False): False,
    ("cuda", True): True,
    ("cuda", False): True,
}


def fused_path_pays(device_type: str, shared_qkv: bool) -> bool:
    """Whether a graph layer on `device_type` takes the fused group path (`FUSED_PATH_MEASURED`)."""
    return FUSED_PATH_MEASURED.get((device_type, shared_qkv), True)


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
        """Whether this call takes the fused group path: where it can (`_fusable`) and where it measured
        faster on this kind of device (`fused_path_pays`)."""
        return self._fusable(kwargs) and fused_path_pays(self.low_proj.weight.device.type, self.graph_shared_qkv)

    def _group_linears(self) -> tuple[list[nn.Linear], list[nn.Linear], list[nn.Linear]]:
        """The layer's projections by what they read: I's (the high group's q, k, v; middle-inc's q;
        middle-prev's k, v), P's (middle-inc's k, v; middle-prev's q; ``low_proj``), and the three
        groups' output projections (high, middle-inc, middle-prev). With shared q/k/v the modules are one."""
        high = self.self_attn
        if self.graph_shared_qkv:  # each input projected once: the groups read the same q, k, v of it
            return (
                [high.q_proj, high.k_proj, high.v_proj],
                [high.q_proj, high.k_proj, high.v_proj, self.low_proj],
                [high.out_proj],
            )
        inc, prev = self.mid_attn_inc, self.mid_attn_prev
        reads_incremental = [high.q_proj, high.k_proj, high.v_proj, inc.q_proj, prev.k_proj, prev.v_proj]
        reads_previous = [inc.k_proj, inc.v_proj, prev.q_proj, self.low_proj]
        return reads_incremental, reads_previous, [high.out_proj, inc.out_proj, prev.out_proj]

    def _fusable(self, kwargs) -> bool:
        """The fused path reads the weights directly, so it needs plain `nn.Linear` projections (not
        adapters such as LoRA) whose weights are materialised (not DeepSpeed ZeRO-3 partitions, which are
        gathered only when their own module runs), a kernel it knows, and no request for attention
        probabilities."""
        attn = self.self_attn
        linears = [linear for group in self._group_linears() for linear in group]
        return (
            not attentions_requested(attn, kwargs)
            and attn.config._attn_implementation in FUSED_IMPLEMENTATIONS
            and all(type(m) is nn.Linear and m.bias is not None for m in linears)
            and not any(hasattr(m.weight, "ds_id") for m in linears)  # ZeRO-3 partitioned parameter
        )

    def _fused_groups(self, incremental, prev, attention_mask):
        """The three group attentions and ``low_proj`` as one projection matmul per input, one batched
        attention call over the groups folded into the batch, and one output matmul; equal to
        `_module_groups` (a test holds them equal in float64)."""
        attn = self.self_attn
        reads_incremental, reads_previous, outputs = self._group_linears()
        if self.graph_shared_qkv:
            q_i, k_i, v_i = _project(incremental, reads_incremental)
            q_p, k_p, v_p, low = _project(prev, reads_previous)
            # high: I->I, middle_inc: I->P, middle_prev: P->I
            queries, keys, values = (q_i, q_i, q_p), (k_i, k_p, k_i), (v_i, v_p, v_i)
        else:
            q_h, k_h, v_h, q_inc, k_prev, v_prev = _project(incremental, reads_incremental)
            k_inc, v_inc, q_prev, low = _project(prev, reads_previous)
            queries, keys, values = (q_h, q_inc, q_prev), (k_h, k_inc, k_prev), (v_h, v_inc, v_prev)
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
        attended = output.reshape(3, batch * length, -1)  # (group, position, inner)
        if len(outputs) == 1:  # shared: one output projection, linear in the summed heads
            (out,) = outputs
            if self.fusion.fuse_attended is not None:
                summed = attended.sum(0).view(batch, length, -1)
                return self.fusion.fuse_attended(self, nn.functional.linear(summed, out.weight, 3 * out.bias), low)
            weights, biases = out.weight.t().expand(3, -1, -1), out.bias.expand(3, 1, -1)
        else:
            weights = torch.stack([out.weight.t() for out in outputs])  # (group, inner, d)
            biases = torch.stack([out.bias for out in outputs]).unsqueeze(1)
        if self.fusion.fuse_attended is not None:  # sum over groups inside one matmul: [o_h|o_i|o_p] [W_h;W_i;W_p]
            flat = attended.transpose(0, 1).reshape(batch * length, -1)
            summed = torch.addmm(biases.sum(0), flat, weights.reshape(-1, weights.shape[-1]))
            return self.fusion.fuse_attended(self, summed.view(batch, length, -1), low)
        groups = torch.baddbmm(biases, attended, weights).view(3, batch, length, -1)  # the groups apart
        return self.fusion.fuse(self, *groups.unbind(0), low)

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
