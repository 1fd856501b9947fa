"""The model battery: one list of checks run over every (family x options) combination."""

from __future__ import annotations

import pytest
import torch
from model_matrix import (
    EOS,
    FAMILIES,
    OPTION_MATRIX,
    PAD,
    TOLERANCE,
    source_batch,
    target_batch,
    tiny_config,
    tiny_model,
)

from hf_graphtf.families import FAMILIES as MODEL_FAMILIES
from hf_graphtf.self_check import reference as ref
from hf_graphtf.self_check import spec_pairs
from hf_graphtf.self_check.matrix import supports

VANILLA_CLASSES = {name: family.vanilla_seq2seq_class for name, family in MODEL_FAMILIES.items()}
options_params = pytest.mark.parametrize("options", list(OPTION_MATRIX), ids=list(OPTION_MATRIX))
# eager; sdpa with the link kernel chosen per device (the score sum on CPU); sdpa with the head-dim concat
kernels_params = pytest.mark.parametrize(
    ("attn_implementation", "kernel"), [("eager", "auto"), ("sdpa", "auto"), ("sdpa", "concat")]
)


def _forward(model, **extra):
    input_ids, attention_mask = source_batch()
    return model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch(), **extra)


# --- vanilla equivalence -------------------------------------------------------------------------


def test_default_options_are_vanilla_both_ways(family, tmp_path):
    graph = tiny_model(family)
    vanilla = VANILLA_CLASSES[family](graph.config).to(torch.float64).eval()
    vanilla.generation_config = graph.generation_config  # (M2M100: the forced target-language token)
    assert set(graph.state_dict()) == set(vanilla.state_dict())
    vanilla.load_state_dict(graph.state_dict())
    torch.testing.assert_close(_forward(graph).logits, _forward(vanilla).logits, rtol=0, atol=0)

    input_ids, attention_mask = source_batch()
    gen = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=6, num_beams=3)
    assert torch.equal(graph.generate(**gen), vanilla.generate(**gen))

    # a vanilla checkpoint loads into the graph class, and a graph checkpoint into the vanilla class
    vanilla.save_pretrained(tmp_path / "vanilla")
    graph.save_pretrained(tmp_path / "graph")
    _, graph_class = FAMILIES[family]
    from_vanilla = graph_class.from_pretrained(
        tmp_path / "vanilla", dtype=torch.float64, attn_implementation="eager"
    ).eval()
    from_graph = (
        VANILLA_CLASSES[family]
        .from_pretrained(tmp_path / "graph", dtype=torch.float64, attn_implementation="eager")
        .eval()
    )
    # reloaded weights may take another BLAS path: equal to float64 rounding
    torch.testing.assert_close(_forward(from_vanilla).logits, _forward(vanilla).logits, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(_forward(from_graph).logits, _forward(vanilla).logits, rtol=1e-12, atol=1e-12)


def test_vanilla_config_keeps_vanilla_modules(family):
    model = tiny_model(family)
    vanilla = VANILLA_CLASSES[family](model.config)
    assert [type(m).__name__ for m in model.modules() if "Layer" in type(m).__name__] == [
        type(m).__name__ for m in vanilla.modules() if "Layer" in type(m).__name__
    ]


# --- SPEC re-computation -------------------------------------------------------------------------


@options_params
@kernels_params
def test_matches_spec_recomputation(family, options, attn_implementation, kernel):
    model = tiny_model(
        family, OPTION_MATRIX[options], attn_implementation=attn_implementation, attention_link_kernel=kernel
    )
    input_ids, attention_mask = source_batch()
    pairs = spec_pairs(model, input_ids, attention_mask, target_batch())
    assert [what for what, _, _ in pairs][-1] == "logits" and len(pairs) >= 2
    for _, got, want in pairs:
        torch.testing.assert_close(got, want.to(got.dtype), **TOLERANCE)


@pytest.mark.parametrize("options", ["al-both", "al-both-cum", "graph-gate+al-dec-cum"])
def test_output_attentions_are_the_linked_probabilities(family, options):
    # linked attention returns its probabilities even under sdpa; unlinked (graph) attention under
    # sdpa returns none, as in Transformers, so the graph encoder is checked with eager
    implementation = "eager" if "graph" in options else "sdpa"
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation=implementation)
    input_ids, attention_mask = source_batch()
    decoder_input_ids = target_batch()
    with torch.no_grad():
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            output_attentions=True,
        )
        x, y = ref.embeddings(model, input_ids, decoder_input_ids)
        enc_out, enc_probs, _ = ref.encoder(model, x, attention_mask)
        _, self_probs, cross_probs = ref.decoder_logits(model, y, enc_out, attention_mask)
    for got, want in zip(out.decoder_attentions, self_probs, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    for got, want in zip(out.cross_attentions, cross_probs, strict=True):
        torch.testing.assert_close(got, want, **TOLERANCE)
    keep = attention_mask.bool()
    for got, want in zip(out.encoder_attentions, enc_probs, strict=True):
        # rows of padded query positions are never used; compare the real ones
        torch.testing.assert_close(got.transpose(1, 2)[keep], want.transpose(1, 2)[keep], **TOLERANCE)


@options_params
@pytest.mark.parametrize("kernel", ["auto", "concat"])
def test_eager_and_sdpa_agree_in_float32(family, options, kernel):
    eager = tiny_model(family, OPTION_MATRIX[options], dtype=torch.float32, attn_implementation="eager")
    sdpa = tiny_model(
        family, OPTION_MATRIX[options], dtype=torch.float32, attn_implementation="sdpa", attention_link_kernel=kernel
    )
    sdpa.load_state_dict(eager.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(_forward(eager).logits, _forward(sdpa).logits, rtol=1e-5, atol=1e-5)


def test_link_changes_the_output(family):
    """Guards the tests above against a link that silently does nothing."""
    vanilla = tiny_model(family)
    for options in ("al-enc", "al-dec", "al-both-cum", "graph-gate"):
        if not supports(family, OPTION_MATRIX[options]):
            continue
        model = tiny_model(family, OPTION_MATRIX[options])
        model.load_state_dict(vanilla.state_dict(), strict=False)
        assert not torch.allclose(_forward(model).logits, _forward(vanilla).logits)


# --- generation ----------------------------------------------------------------------------------


@options_params
@pytest.mark.parametrize("num_beams", [1, 4])
@kernels_params
def test_cached_and_uncached_generation_agree(family, options, num_beams, attn_implementation, kernel):
    model = tiny_model(
        family, OPTION_MATRIX[options], attn_implementation=attn_implementation, attention_link_kernel=kernel
    )
    input_ids, attention_mask = source_batch()
    gen = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=8, num_beams=num_beams)
    cached = model.generate(**gen, use_cache=True)
    uncached = model.generate(**gen, use_cache=False)
    assert cached.shape[1] > 3
    assert torch.equal(cached, uncached)


@options_params
def test_padding_does_not_change_any_row(family, options):
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa")
    input_ids, attention_mask = source_batch()
    gen = dict(max_new_tokens=8, num_beams=2)
    batched = model.generate(input_ids=input_ids, attention_mask=attention_mask, **gen)
    for row in range(input_ids.shape[0]):
        ids = input_ids[row : row + 1, attention_mask[row].bool()]
        alone = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **gen)
        width = alone.shape[1]
        assert torch.equal(batched[row, :width], alone[0])
        # the tail is filler: Transformers' beam search fills it with PAD, or with EOS after a finished
        # BART beam (the old and new code give the same fill on the same weights)
        assert ((batched[row, width:] == PAD) | (batched[row, width:] == EOS)).all()


# --- configuration errors ------------------------------------------------------------------------

BAD_VALUES = [
    ("attention_link", "enc"),
    ("attention_link", None),
    ("attention_link", True),
    ("attention_link_mode", "sum"),
    ("attention_link_mode", 1),
    ("attention_link_kernel", "flash"),
    ("graph_attention", "yes"),
    ("graph_attention", 1),
    ("graph_fusion", "max"),
    ("graph_fusion", None),
    ("graph_half_dim", "no"),
    ("graph_shared_qkv", 0),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
def test_bad_option_values_raise_naming_the_field(family, field, value):
    with pytest.raises(ValueError, match=field) as info:
        tiny_config(family, {field: value})
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("link", ["encoder", "both"])
def test_encoder_link_with_graph_attention_is_refused(graph_family, link):
    with pytest.raises(ValueError, match="attention_link"):
        tiny_config(graph_family, {"attention_link": link, "graph_attention": True})
    tiny_config(graph_family, {"attention_link": "decoder", "graph_attention": True})


def test_graph_attention_is_refused_for_pre_ln_families():
    pre_ln = [name for name, family in MODEL_FAMILIES.items() if not family.supports_graph_attention]
    assert pre_ln == ["m2m_100"]
    for family in pre_ln:
        for fusion in ("sum", "gate", "self_gate"):
            with pytest.raises(ValueError, match=r"graph_attention=True .* post-LN .* pre-LN"):
                tiny_config(family, {"graph_attention": True, "graph_fusion": fusion})
        config = tiny_config(family)
        config.graph_attention = True  # set after construction: caught when a model is built
        with pytest.raises(ValueError, match="graph_attention"):
            FAMILIES[family][1](config)


def test_half_dim_needs_divisible_heads(graph_family):
    with pytest.raises(ValueError, match="graph_half_dim"):
        tiny_config(graph_family, {"graph_attention": True, "graph_half_dim": True}, encoder_attention_heads=16)


def test_option_changed_after_construction_is_caught_when_building(family):
    config = tiny_config(family)
    config.graph_fusion = "avg"
    _, model_class = FAMILIES[family]
    with pytest.raises(ValueError, match="graph_fusion"):
        model_class(config)


def test_other_model_type_checkpoint_is_refused(family, tmp_path):
    other = "bart" if family == "marian" else "marian"
    tiny_model(other).save_pretrained(tmp_path)
    _, model_class = FAMILIES[family]
    with pytest.raises(ValueError, match=f"model type 'graph_{other}'"):
        model_class.from_pretrained(tmp_path)


def test_link_refuses_kernels_that_would_drop_it(family):
    with pytest.raises(ValueError, match="does not support an attention implementation through torch's flex"):
        tiny_model(family, OPTION_MATRIX["al-both"], attn_implementation="flex_attention")
    unlinked = "graph-gate" if supports(family, OPTION_MATRIX["graph-gate"]) else "vanilla"
    tiny_model(family, OPTION_MATRIX[unlinked], attn_implementation="flex_attention")  # no link: allowed
    linked, other = tiny_model(family, OPTION_MATRIX["al-dec"]), tiny_model(family, OPTION_MATRIX[unlinked])
    assert not linked._supports_flash_attn and not linked._supports_flex_attn
    assert other._supports_flash_attn and other._supports_flex_attn


def test_link_refuses_kernel_switched_after_loading(family, monkeypatch):
    from hf_graphtf import modeling_common, transformers_seam

    model = tiny_model(family, OPTION_MATRIX["al-both"], dtype=torch.float32)
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(ValueError, match="attention_link needs attn_implementation"):
        _forward(model)
    # each linked stack refuses it before building masks for it (flex masks take seconds to build)
    for module, mask in ((modeling_common, "create_bidirectional_mask"), (transformers_seam, "create_causal_mask")):
        monkeypatch.setattr(module, mask, lambda **_: pytest.fail("mask built before the check"))
    input_ids, _ = source_batch()
    with pytest.raises(ValueError, match="attention_link needs attn_implementation"):
        model.model.encoder(input_ids=input_ids)
    with pytest.raises(ValueError, match="attention_link needs attn_implementation"):
        model.model.decoder(
            input_ids=target_batch(), encoder_hidden_states=torch.zeros(*input_ids.shape, model.config.d_model)
        )
    attention = model.model.encoder.layers[0].self_attn
    with pytest.raises(ValueError, match="attention_link needs attn_implementation"):
        attention(torch.zeros(1, 3, model.config.d_model))  # and by each linked attention module


@pytest.mark.parametrize("options", [k for k in OPTION_MATRIX if k.startswith("graph")])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_fused_and_per_module_graph_paths_agree(family, options, attn_implementation, monkeypatch):
    """The fused group path (one projection per input, one attention call) equals one call per module."""
    from hf_graphtf.graph_attention import GraphEncoderLayerMixin

    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation=attn_implementation)
    with torch.no_grad():
        fused = _forward(model, output_graph_gates=True)
        monkeypatch.setattr(GraphEncoderLayerMixin, "_can_fuse", lambda self, kwargs: False)
        per_module = _forward(model, output_graph_gates=True)
    torch.testing.assert_close(fused.logits, per_module.logits, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused.encoder_graph_gates, per_module.encoder_graph_gates, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_auto_link_kernel_picks_per_device_and_step():
    from hf_graphtf.attention_link import CarriedQueryKey, CarriedScores, use_score_path

    none = None
    on_cpu, elsewhere = torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4, device="meta")
    assert use_score_path("auto", "sdpa", on_cpu, none, False)  # CPU: the score sum measured faster
    assert not use_score_path("auto", "sdpa", elsewhere, none, False)  # GPU: one fused SDPA call
    assert use_score_path("auto", "sdpa", elsewhere[:, :, :1], none, False)  # one-row decode step
    assert use_score_path("auto", "eager", elsewhere, none, False)
    assert not use_score_path("concat", "sdpa", on_cpu, none, False)
    assert use_score_path("concat", "sdpa", on_cpu, none, True)  # probabilities requested
    assert use_score_path("concat", "sdpa", on_cpu, CarriedScores(on_cpu), False)  # a score carry arrived
    assert not use_score_path("concat", "sdpa", on_cpu, CarriedQueryKey(on_cpu, on_cpu), False)
