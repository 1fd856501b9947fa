"""A plain re-computation of docs/method.md's formulas from a model's own weights (the tests and
`hf-graphtf check` use it).

Deliberately naive: explicit per-layer loops, explicit masks, every projection done with
`F.linear` on the stored weights. Nothing here calls the package's attention, link or graph code,
so agreement with the model is evidence that the model computes what docs/method.md says. Eval mode
(no dropout); post-LN layers as in Marian and BART, pre-LN layers with a final LayerNorm per stack as
in M2M100 (read from ``config.layer_norm_position``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

NEG = -1e30
#: docs/method.md's carry of each link mode, written out here (not read from `link_modes`): layer n hands on its
#: own scores A_n or its linked scores S_n. A mode missing here fails the re-computation by name.
CARRY = {
    "previous": lambda scores, linked: scores,
    "cumulative": lambda scores, linked: linked,
}


def _linear(module, x):
    return F.linear(x, module.weight, module.bias)


def _heads(x, num_heads):
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def attention(attn, query_states, kv_states, mask, link=None, mode="previous"):
    """Return (output, probabilities, carry) of one attention call, with an optional link term.

    `mask` is additive of shape (batch, 1, q_len, k_len) or None; `link` is the previous layer's
    carry: its raw scaled scores A (mode "previous") or its linked scores S (mode "cumulative"), weighted
    per head by the module's ``link_gate`` where it has one (``attention_link_gate="learned"``).
    """
    heads = attn.num_heads
    q = _heads(_linear(attn.q_proj, query_states), heads)
    k = _heads(_linear(attn.k_proj, kv_states), heads)
    v = _heads(_linear(attn.v_proj, kv_states), heads)
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # A_n
    gate = getattr(attn, "link_gate", None)
    if link is not None and gate is not None:
        link = link * gate.view(1, -1, 1, 1)  # w_n L_{n-1}
    linked = scores if link is None else scores + link  # S_n
    probs = torch.softmax(linked if mask is None else linked + mask, dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(query_states.shape[0], query_states.shape[1], -1)
    return _linear(attn.out_proj, out), probs, CARRY[mode](scores, linked)


def _norm(ln, x):
    return F.layer_norm(x, x.shape[-1:], ln.weight, ln.bias)


def _pre_ln(config) -> bool:
    return getattr(config, "layer_norm_position", "post") == "pre"


def _block(config, ln, h, sublayer):
    """One residual block: ``LN(h + f(h))`` post-LN, ``h + f(LN(h))`` pre-LN. `sublayer` returns
    (update, *extras); the extras come back after the new h."""
    update, *extras = sublayer(_norm(ln, h) if _pre_ln(config) else h)
    return (h + update if _pre_ln(config) else _norm(ln, h + update)), *extras


def _ffn_block(layer, h, config=None):
    def ffn(x):
        return (_linear(layer.fc2, layer.activation_fn(_linear(layer.fc1, x))),)

    return _block(config, layer.final_layer_norm, h, ffn)[0]


def _final_norm(config, stack, h):
    """Pre-LN stacks end with a LayerNorm (M2M100's ``layer_norm``); post-LN ones end with the last layer."""
    return _norm(stack.layer_norm, h) if _pre_ln(config) else h


def padding_mask(attention_mask, q_len, dtype):
    keep = attention_mask[:, None, None, :].to(torch.bool).expand(-1, 1, q_len, -1)
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(~keep, NEG)


def causal_mask(batch, length, dtype, device=None):
    keep = torch.ones(length, length, dtype=torch.bool, device=device).tril()
    return torch.zeros(batch, 1, length, length, dtype=dtype, device=device).masked_fill(~keep, NEG)


def fuse(layer, config, a_h, a_m1, a_m2, a_l):
    """docs/method.md's three fusions; returns (g, gate) with the gate the model reports (None for sum)."""
    if config.graph_fusion == "sum":
        return a_h + a_m1 + a_m2 + a_l, None
    if config.graph_fusion == "gate":
        w = torch.sigmoid(a_h + a_m1 + a_m2 + a_l)
        return w * (a_h + a_m1 + a_m2) + (1 - w) * a_l, w
    gate = layer.self_gate
    rows = torch.stack([a_h, a_m1, a_m2, a_l], dim=-2)  # (B, T, 4, d)
    q, k, v = _linear(gate.q_proj, rows), _linear(gate.k_proj, rows), _linear(gate.v_proj, rows)
    probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(rows.shape[-1]), dim=-1)
    rf = probs @ v
    return rf.sum(dim=-2) / 4, probs.mean(dim=-2)


def encoder(model, x, attention_mask):
    """Encoder output from x (embeddings after position and, for BART, embedding LayerNorm)."""
    config = model.config
    enc = model.get_encoder()
    mask = padding_mask(attention_mask, x.shape[1], x.dtype)
    link_on = config.attention_link in ("encoder", "both")
    link, probs_all, gates = None, [], []
    h = x
    previous = None
    for n, layer in enumerate(enc.layers):
        if config.graph_attention and n >= 1:
            full, prev = h, previous
            inc = full - prev
            mid_inc = layer.self_attn if config.graph_shared_qkv else layer.mid_attn_inc
            mid_prev = layer.self_attn if config.graph_shared_qkv else layer.mid_attn_prev
            a_h, probs, _ = attention(layer.self_attn, inc, inc, mask)
            a_m1, _, _ = attention(mid_inc, inc, prev, mask)
            a_m2, _, _ = attention(mid_prev, prev, inc, mask)
            a_l = _linear(layer.low_proj, prev)
            g, gate = fuse(layer, config, a_h, a_m1, a_m2, a_l)
            gates.append(gate)
            new_h = _ffn_block(layer, _norm(layer.self_attn_layer_norm, full + g))
        else:
            new_h, probs, carry = _block(
                config,
                layer.self_attn_layer_norm,
                h,
                lambda x, layer=layer, link=link: attention(
                    layer.self_attn, x, x, mask, link if link_on else None, config.attention_link_mode
                ),
            )
            link = carry
            new_h = _ffn_block(layer, new_h, config)
        probs_all.append(probs)
        previous, h = h, new_h
    return _final_norm(config, enc, h), probs_all, gates


def decoder_logits(model, y, encoder_out, attention_mask):
    """LM logits for decoder input embeddings y (teacher forcing, no cache)."""
    config = model.config
    dec = model.get_decoder()
    self_mask = causal_mask(y.shape[0], y.shape[1], y.dtype, y.device)
    cross_mask = padding_mask(attention_mask, y.shape[1], y.dtype)
    link_on = config.attention_link in ("decoder", "both")
    mode = config.attention_link_mode
    self_link = cross_link = None
    self_probs, cross_probs = [], []
    h = y
    for layer in dec.layers:
        h, p_self, self_carry = _block(
            config,
            layer.self_attn_layer_norm,
            h,
            lambda x, layer=layer, link=self_link: attention(layer.self_attn, x, x, self_mask, link, mode),
        )
        h, p_cross, cross_carry = _block(
            config,
            layer.encoder_attn_layer_norm,
            h,
            lambda x, layer=layer, link=cross_link: attention(
                layer.encoder_attn, x, encoder_out, cross_mask, link, mode
            ),
        )
        h = _ffn_block(layer, h, config)
        if link_on:
            self_link, cross_link = self_carry, cross_carry
        self_probs.append(p_self)
        cross_probs.append(p_cross)
    h = _final_norm(config, dec, h)
    logits = F.linear(h, model.lm_head.weight)
    if hasattr(model, "final_logits_bias"):  # Marian and BART; M2M100 has none
        logits = logits + model.final_logits_bias
    return logits, self_probs, cross_probs


def embeddings(model, input_ids, decoder_input_ids):
    """Inputs of encoder and decoder layer 0, taken from the model's hidden-state outputs.

    The embedding layers are vanilla Transformers code that the options never touch; the
    hidden-state outputs expose exactly what enters layer 0.
    """
    out = model(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        decoder_input_ids=decoder_input_ids,
        output_hidden_states=True,
    )
    return out.encoder_hidden_states[0], out.decoder_hidden_states[0]
