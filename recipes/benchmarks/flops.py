"""Matmul FLOPs of one forward pass, from the shapes alone: the bound a measured ratio is judged against.

Counted: every matrix product of the encoder layers, decoder layers and the output projection (LM head),
2 FLOPs per multiply-add, padded positions included (the model computes them). Not counted: embedding
lookups, LayerNorm, softmax, activations, residual adds, the gate arithmetic and the optimizer: they are
elementwise, O(tokens * d) or O(params), and small next to the matmuls at these shapes.

A training step is ~3x the forward (the backward computes two products per forward product), so the
factor cancels in a ratio and the FLOP-count bound of a variant is ``forward(vanilla) / forward(variant)``:
a variant can reach it only if its extra work runs as fast per FLOP as vanilla's.

Per attention call with ``q`` query rows, ``k`` key rows, model width d, inner width i (``d``, or
``d/2`` with ``graph_half_dim``), batch B:

    projections  2 B (q d i  +  2 k d i  +  q i d)        q, k, v and out
    scores       2 B q k i f  +  2 B q k i                 Q K^T and P V; f = head-dim factor below

``f`` is 1, except for attention link computed by its concat kernel (queries and keys concatenated
along the head dimension; ``attention_link_kernel`` "concat", or "auto" under sdpa off CPU): 2 in layers
n >= 1 with ``previous``, n + 1 with ``cumulative``. The score-sum kernel adds score matrices, which is
elementwise and not counted. Per layer, with S source and T target
positions and FFN width F:

    encoder layer    attn(S, S) + 4 B S d F
    decoder layer    attn(T, T) + attn(T, S) + 4 B T d F
    graph layer      3 attn(S, S) + 2 B S d^2 (low_proj) + 4 B S d F            (layers 1..N-1)
                     + the fusion's own products (`Fusion.flops`: self_gate's q, k, v of the 4 group
                     vectors, 3 * 2 B (4S) d^2, and its 4x4 scores and weighted sum, 2 B S 20 d)
                     graph_shared_qkv: q, k, v of I and of P once each (6, not 9, projections) and, for sum
                     and gate, one out_proj of the summed head outputs (out_proj is linear), as the
                     package's fused group path computes them
    LM head          2 B T d V
"""

from __future__ import annotations

from typing import Any

from hf_graphtf.graph_fusions import get_fusion


def attention_flops(batch: int, q_len: int, kv_len: int, d_model: int, inner: int, qk_factor: int = 1) -> int:
    """One Marian/BART attention call: q/k/v/out projections and the two score products."""
    projections = 2 * batch * (q_len * d_model * inner + 2 * kv_len * d_model * inner + q_len * inner * d_model)
    scores = 2 * batch * q_len * kv_len * inner * (qk_factor + 1)
    return projections + scores


def link_uses_concat(config: Any, device: str) -> bool:
    """Whether a teacher-forced forward runs the link's concat kernel (mirrors ``attention_link_kernel``).

    ``"auto"`` sums scores under eager and on CPU and concatenates under sdpa elsewhere; ``"scores"``
    and ``"concat"`` force one.
    """
    kernel = getattr(config, "attention_link_kernel", "auto")
    if kernel != "auto":
        return kernel == "concat"
    return config._attn_implementation == "sdpa" and not device.startswith("cpu")


def link_qk_factor(layer: int, linked: bool, mode: str, concat: bool) -> int:
    """How many head dims wide Q K^T is: the concat kernel multiplies queries and keys of several layers."""
    if not linked or not concat or layer == 0:
        return 1
    return 2 if mode == "previous" else layer + 1


def graph_layer_extra_flops(batch: int, src_len: int, d_model: int, half_dim: bool, fusion: str, shared: bool) -> int:
    """What a graph layer computes besides its FFN: three group attentions, low_proj, the fusion."""
    inner = d_model // 2 if half_dim else d_model
    if shared:  # one module: I and P are each projected once (q, k, v), and out_proj is linear
        rows = batch * src_len
        # a fusion of a_h + a_m projects the sum of the three head outputs once; one of the groups apart, each
        outs = 1 if get_fusion(fusion).fuse_attended is not None else 3
        flops = 6 * 2 * rows * d_model * inner + outs * 2 * rows * inner * d_model
        flops += 3 * 2 * batch * src_len * src_len * inner * 2
    else:
        flops = 3 * attention_flops(batch, src_len, src_len, d_model, inner)
    flops += 2 * batch * src_len * d_model * d_model  # low_proj
    return flops + get_fusion(fusion).matmul_flops(batch * src_len, d_model)  # the fusion's own products


def forward_flops(config: Any, batch: int, src_len: int, tgt_len: int, device: str = "cpu") -> int:
    """Matmul FLOPs of one teacher-forced forward pass of a (graph) Marian/BART config (see module docstring)."""
    d, vocab = config.d_model, config.vocab_size
    concat = link_uses_concat(config, device)
    link = getattr(config, "attention_link", "none")
    mode = getattr(config, "attention_link_mode", "previous")
    graph = getattr(config, "graph_attention", False)
    enc_linked, dec_linked = link in ("encoder", "both"), link in ("decoder", "both")

    total = 0
    for n in range(config.encoder_layers):
        ffn = 4 * batch * src_len * d * config.encoder_ffn_dim
        if graph and n >= 1:
            extra = graph_layer_extra_flops(
                batch, src_len, d, config.graph_half_dim, config.graph_fusion, config.graph_shared_qkv
            )
            total += ffn + extra
        else:
            factor = link_qk_factor(n, enc_linked, mode, concat)
            total += ffn + attention_flops(batch, src_len, src_len, d, d, factor)
    for n in range(config.decoder_layers):
        factor = link_qk_factor(n, dec_linked, mode, concat)
        total += attention_flops(batch, tgt_len, tgt_len, d, d, factor)
        total += attention_flops(batch, tgt_len, src_len, d, d, factor)
        total += 4 * batch * tgt_len * d * config.decoder_ffn_dim
    return total + 2 * batch * tgt_len * d * vocab


def training_flops(config: Any, batch: int, src_len: int, tgt_len: int, device: str = "cpu") -> int:
    """Forward + backward of one training step, ~3x the forward."""
    return 3 * forward_flops(config, batch, src_len, tgt_len, device)
