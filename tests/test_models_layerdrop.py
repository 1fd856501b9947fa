"""LayerDrop and attention outputs on every option: what a skipped layer hands on, and one tensor per layer.

A graph encoder never drops layer 0 (the standard layer whose output every graph layer builds on); a
dropped layer n >= 1, a dropped linked layer and a dropped linked decoder layer act as the identity,
handing on what they received (hidden states, P, the link carry). The oracle is the same model with that
layer removed from its stack, in float64. ``output_attentions`` gives one tensor per layer, asked for per
call or through the config, also where a fused kernel would compute no probabilities.
"""

from __future__ import annotations

import copy

import pytest
import torch
from model_matrix import FAMILIES, OPTION_MATRIX, source_batch, target_batch, tiny_model
from torch import nn

from hf_graphtf import modeling_common

LAYERED = {name: options for name, options in OPTION_MATRIX.items() if options}


def _scripted_drops(monkeypatch, pattern: list[bool]) -> list[bool]:
    """Make `_drop_layer` answer from ``pattern`` (in call order), recording each call."""
    calls: list[bool] = []

    def drop(stack: nn.Module) -> bool:
        answer = pattern[len(calls)] if stack.training and len(calls) < len(pattern) else False
        calls.append(answer)
        return answer

    monkeypatch.setattr(modeling_common, "_drop_layer", drop)
    return calls


def _without_layer(model: nn.Module, stack: str, index: int) -> nn.Module:
    reduced = copy.deepcopy(model)
    layers = (reduced.get_encoder() if stack == "encoder" else reduced.get_decoder()).layers
    del layers[index]
    return reduced


def _logits(model: nn.Module) -> torch.Tensor:
    input_ids, attention_mask = source_batch()
    return model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch()).logits


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "options",
    [OPTION_MATRIX[name] for name in ("graph-gate", "graph-shared-gate", "graph-half-shared-self_gate")],
    ids=["graph-gate", "graph-shared-gate", "graph-half-shared-self_gate"],
)
def test_layerdrop_never_crashes_a_graph_encoder(family, options):
    torch.manual_seed(0)
    model = tiny_model(family, options, encoder_layerdrop=0.5, dtype=torch.float32).train()
    for _ in range(20):  # before the fix, 7 of 20 passes dropped layer 0 and raised
        assert torch.isfinite(_logits(model)).all()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("options", "stack", "dropped"),
    [
        (OPTION_MATRIX["graph-gate"], "encoder", 1),
        (OPTION_MATRIX["graph-half-shared-self_gate"], "encoder", 1),
        (OPTION_MATRIX["graph-sum"], "encoder", 2),
        (OPTION_MATRIX["al-enc"], "encoder", 1),
        (OPTION_MATRIX["al-enc-cum"], "encoder", 0),
        (OPTION_MATRIX["al-dec"], "decoder", 1),
        (OPTION_MATRIX["al-both-cum"], "decoder", 0),
    ],
    ids=["graph-gate-1", "graph-half-shared-self_gate-1", "graph-sum-2", "al-enc-1", "al-enc-cum-0", "al-dec-1",
         "al-both-cum-dec-0"],
)  # fmt: skip
def test_a_dropped_layer_is_the_identity(family, options, stack, dropped, monkeypatch):
    """Training with layer ``dropped`` skipped equals the model without that layer (dropout 0, float64)."""
    layerdrop = {f"{stack}_layerdrop": 0.5}
    model = tiny_model(family, options, **layerdrop).train()
    reference = _without_layer(model, stack, dropped).eval()
    graph = stack == "encoder" and options.get("graph_attention")
    # the graph stack draws only for layers 1..N-1 (layer 0 always runs): its calls start at layer 1
    pattern = [index == dropped for index in range(1 if graph else 0, 3)]
    if stack == "decoder" and options.get("attention_link") == "both":
        pattern = [False, False, False] + pattern  # the encoder (also linked) draws first
    calls = _scripted_drops(monkeypatch, pattern)
    torch.testing.assert_close(_logits(model), _logits(reference), rtol=1e-10, atol=1e-10)
    assert any(calls)


def test_layer_0_of_a_graph_encoder_is_never_dropped(graph_family, monkeypatch):
    model = tiny_model(graph_family, OPTION_MATRIX["graph-gate"], encoder_layerdrop=0.9).train()
    calls = _scripted_drops(monkeypatch, [True, True, True])
    reference = copy.deepcopy(model)
    del reference.get_encoder().layers[1:]  # only layer 0 ran
    torch.testing.assert_close(_logits(model), _logits(reference.eval()), rtol=1e-10, atol=1e-10)
    assert len(calls) == 2  # asked for layers 1 and 2 only


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", list(LAYERED.values()), ids=list(LAYERED))
def test_layerdrop_is_off_in_eval(family, options):
    model = tiny_model(family, options, encoder_layerdrop=0.5, decoder_layerdrop=0.5)
    plain = tiny_model(family, options)
    torch.testing.assert_close(_logits(model), _logits(plain), rtol=0, atol=0)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", list(OPTION_MATRIX.values()), ids=list(OPTION_MATRIX))
@pytest.mark.parametrize("how", ["argument", "config"])
@pytest.mark.parametrize(
    "attn_implementation", ["eager", "sdpa"]
)  # under sdpa vanilla stacks record nothing: only fully linked models are asked there
def test_output_attentions_give_one_tensor_per_layer(family, options, how, attn_implementation):
    """Transformers' `test_attention_outputs` asks both ways; shared-qkv graph layers (fused path) and
    the link's concat kernel compute no probabilities and must step aside."""
    if attn_implementation == "sdpa" and (options.get("attention_link") != "both" or how == "config"):
        pytest.skip("under sdpa vanilla stacks return no probabilities, and the config refuses output_attentions")
    extra = {"attention_link_kernel": "concat"} if options.get("attention_link", "none") != "none" else {}
    model = tiny_model(family, {**options, **extra}, attn_implementation=attn_implementation, dtype=torch.float32)
    input_ids, attention_mask = source_batch()
    kwargs = {"output_attentions": True} if how == "argument" else {}
    if how == "config":
        model.config.output_attentions = True
    output = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch(), **kwargs)
    config = model.config
    for name, count in (
        ("encoder_attentions", config.encoder_layers),
        ("decoder_attentions", config.decoder_layers),
        ("cross_attentions", config.decoder_layers),
    ):
        attentions = getattr(output, name)
        assert len(attentions) == count, name
        assert all(weights is not None and torch.isfinite(weights).all() for weights in attentions), name
