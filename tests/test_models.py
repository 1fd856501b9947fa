"""The model battery: one list of checks run over every (family x options) combination."""

from __future__ import annotations

import pytest
import torch
import transformers
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

from hf_graphtf.configuration import GRAPH_OPTIONS
from hf_graphtf.families import FAMILIES as MODEL_FAMILIES
from hf_graphtf.self_check import reference as ref
from hf_graphtf.self_check import spec_pairs
from hf_graphtf.self_check.matrix import supports
from hf_graphtf.transformers_seam import output_cache

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


# --- method re-computation -----------------------------------------------------------------------


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


@pytest.mark.parametrize(("options", "linked_widths"), [("al-dec", (1, 2, 2)), ("al-both-cum", (1, 1, 1))])
def test_the_concat_kernel_caches_cross_keys_with_the_carried_ones(family, options, linked_widths):
    """On the concat kernel, previous mode, a linked cross-attention layer caches its keys concatenated with
    the previous layer's, so decoding steps read them instead of concatenating them again; in cumulative
    mode the keys are cached alone (the concatenation would grow with depth). The tokens are checked
    against decoding without a cache by `test_cached_and_uncached_generation_agree`."""
    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa", attention_link_kernel="concat")
    input_ids, attention_mask = source_batch()
    out = model.generate(
        input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=4, num_beams=2, return_dict_in_generate=True
    )
    head_dim = model.config.d_model // model.config.decoder_attention_heads
    layers = output_cache(out).cross_attention_cache.layers
    assert tuple(layer.keys.shape[-1] // head_dim for layer in layers) == linked_widths
    assert all(layer.values.shape[-1] == head_dim for layer in layers)


#: decoding modes that reach the decoder by other paths than step-by-step cached decoding: a
#: preallocated cache whose unfilled slots are masked, several new positions verified in one forward
#: over the cache and the cache cropped back where a drafted token is rejected, and sampling
DECODING_MODES = {
    "static cache": dict(num_beams=2, cache_implementation="static"),
    "assisted by itself": dict(assistant="itself"),
    "assisted by another model": dict(assistant="another"),
    "prompt lookup": dict(prompt_lookup_num_tokens=2),
    "sampling": dict(do_sample=True, top_k=4, num_return_sequences=2),
}
#: the `generate()` arguments above that only decoding with a cache takes
CACHE_ONLY_ARGUMENTS = ("cache_implementation", "assistant_model", "prompt_lookup_num_tokens")


def _decoding_mismatch(model, mode: str, family: str) -> str | None:
    """How decoding in `mode` differs from decoding without a cache, or None where the tokens agree."""
    input_ids, attention_mask = source_batch()
    gen = dict(DECODING_MODES[mode], max_new_tokens=8)
    assistant = gen.pop("assistant", None)
    if assistant is not None or "prompt_lookup_num_tokens" in gen:  # Transformers runs these on one row
        input_ids, attention_mask = input_ids[:1], attention_mask[:1]
    if assistant is not None:
        gen["assistant_model"] = model if assistant == "itself" else tiny_model(family, {}, seed=1)
    # the same call without the cache and without what needs one
    uncached_gen = {key: value for key, value in gen.items() if key not in CACHE_ONLY_ARGUMENTS}
    torch.manual_seed(0)
    tokens = model.generate(input_ids=input_ids, attention_mask=attention_mask, **gen)
    torch.manual_seed(0)
    uncached = model.generate(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **uncached_gen)
    if torch.equal(tokens, uncached) and tokens.shape[1] > 3:
        return None
    return f"{mode}: {tokens.tolist()} where decoding without a cache gives {uncached.tolist()}"


#: the option sets that change the decoder (graph attention and the encoder link change only the encoder,
#: whose output every decoding mode reads once)
DECODER_OPTIONS = [name for name, opts in OPTION_MATRIX.items() if opts.get("attention_link") in ("decoder", "both")]


@pytest.mark.parametrize("options", DECODER_OPTIONS)
@pytest.mark.parametrize("mode", list(DECODING_MODES))
def test_every_decoding_mode_gives_the_uncached_tokens(family, options, mode):
    """What a user passes to `generate()` beyond beams and the cache reaches the carried scores by other
    paths; each must give the tokens that decoding without a cache gives, wherever it does for vanilla
    (Transformers 5.17's prompt lookup ends at once when the decoder starts with EOS, as BART's does)."""
    mismatch = _decoding_mismatch(tiny_model(family, OPTION_MATRIX[options], attn_implementation="sdpa"), mode, family)
    if mismatch is not None:
        vanilla = _decoding_mismatch(tiny_model(family, {}, attn_implementation="sdpa"), mode, family)
        if vanilla is not None:
            pytest.skip(f"vanilla {family} under Transformers {transformers.__version__} too: {vanilla}")
    assert mismatch is None, mismatch


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
        config.graph_attention = True  # set after construction: refused when a model is built from it
        with pytest.raises(ValueError, match="graph_attention"):
            FAMILIES[family][1](config)


def test_half_dim_needs_divisible_heads(graph_family):
    with pytest.raises(ValueError, match="graph_half_dim"):
        tiny_config(graph_family, {"graph_attention": True, "graph_half_dim": True}, encoder_attention_heads=16)


def test_option_set_after_construction_is_refused_before_a_model_or_checkpoint_exists(family, tmp_path):
    """An option or a size set on a built config is a plain attribute, as in Transformers' configs; building a
    model from it or saving it validates it, with the `ValueError` naming the field that construction raises."""
    from huggingface_hub.errors import StrictDataclassClassValidationError

    _, model_class = FAMILIES[family]
    config = tiny_config(family)
    config.graph_fusion = "avg"
    with pytest.raises(ValueError, match="graph_fusion"):
        model_class(config)
    with pytest.raises(StrictDataclassClassValidationError, match="graph_fusion must be one of") as info:
        config.save_pretrained(tmp_path)  # Transformers' `save_pretrained` runs the `@strict` class validators
    assert isinstance(info.value.__cause__, ValueError) and not (tmp_path / "config.json").exists()
    config.graph_fusion = "gate"
    config.d_model = 15  # a size an option's check reads is validated the same way
    with pytest.raises(ValueError, match="encoder_attention_heads"):
        model_class(config)
    config.d_model = 16
    if MODEL_FAMILIES[family].supports_graph_attention:
        config.attention_link, config.graph_attention = "both", True
        with pytest.raises(ValueError, match="cannot be combined"):
            model_class(config)
        config.attention_link = "decoder"
    model = model_class(config)
    model.save_pretrained(tmp_path)
    loaded = model_class.from_pretrained(tmp_path).config
    assert {option.name: getattr(loaded, option.name) for option in GRAPH_OPTIONS} == {
        option.name: getattr(config, option.name) for option in GRAPH_OPTIONS
    }


def test_an_option_is_validated_where_the_recipe_is_read_and_where_the_model_is_built(tmp_path, monkeypatch):
    """Followed from a recipe to the built model, a bad option is refused as the recipe is read, before a corpus
    or a tokenizer is touched, and the built model's config is validated again."""
    from hf_graphtf import configuration
    from hf_graphtf.training import models, parse_recipe_args

    calls = []
    validate = configuration.validate_graph_options
    monkeypatch.setattr(
        configuration, "validate_graph_options", lambda config: calls.append(config) or validate(config)
    )
    recipe = tmp_path / "recipe.yaml"
    sizes = (
        "d_model: 16\nencoder_layers: 2\ndecoder_layers: 2\nencoder_attention_heads: 2\n"
        "decoder_attention_heads: 2\nencoder_ffn_dim: 32\ndecoder_ffn_dim: 32\nmax_position_embeddings: 256\n"
        f"corpus: {tmp_path}\noutput_dir: {tmp_path / 'run'}\ndo_train: true\n"
    )
    recipe.write_text("attention_link: every\n" + sizes)
    with pytest.raises(ValueError, match="attention_link must be one of"):
        parse_recipe_args([str(recipe)])
    recipe.write_text("attention_link: both\n" + sizes)
    calls.clear()
    model_args, data_args, training_args = parse_recipe_args([str(recipe)])
    assert calls  # by the config built as the recipe is read
    tokenizer = type(
        "Tokenizer", (), {"pad_token_id": 0, "eos_token_id": 2, "bos_token_id": 1, "__len__": lambda _: 40}
    )()
    model = models.build_model(model_args, data_args, training_args, tokenizer)
    assert calls[-1] is model.config and model.config.attention_link == "both" and model.config.vocab_size == 40


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
    """A kernel switched on a built model goes through the one check Transformers offers for it, which refuses
    it for a linked model and leaves the model as it was; nothing else checks it."""
    from hf_graphtf import modeling_common

    model = tiny_model(family, OPTION_MATRIX["al-both"], dtype=torch.float32)
    before = model.config._attn_implementation
    with pytest.raises(ValueError, match="flex"):
        model.set_attn_implementation("flex_attention")
    assert model.config._attn_implementation == before
    calls = []
    monkeypatch.setattr(modeling_common, "check_link_implementation", calls.append)
    _forward(model)
    assert calls == []  # a forward does not check again
    # the link's options are read from the config where they act, not copied onto the modules
    assert not hasattr(model.model.encoder.layers[0].self_attn, "link_mode")
    # past that check (the private field set by hand), the flex mask is refused with the same message
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(ValueError, match="BlockMask attention mask.*needs attn_implementation 'eager' or 'sdpa'"):
        _forward(model)


@pytest.mark.parametrize("options", [k for k in OPTION_MATRIX if k.startswith("graph")])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_fused_and_per_module_graph_paths_agree(family, options, attn_implementation, monkeypatch):
    """The fused group path (one projection per input, one attention call, one output matmul) equals one
    call per module, in float64, forward and gradients, with shared q/k/v and without, for every fusion."""
    from hf_graphtf import graph_attention
    from hf_graphtf.graph_attention import GraphEncoderLayerMixin

    model = tiny_model(family, OPTION_MATRIX[options], attn_implementation=attn_implementation)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    fused_calls = []
    fused_groups = GraphEncoderLayerMixin._fused_groups
    monkeypatch.setattr(graph_attention, "fused_path_pays", lambda device, shared: True)
    monkeypatch.setattr(
        GraphEncoderLayerMixin, "_fused_groups", lambda *args: fused_calls.append(1) or fused_groups(*args)
    )
    fused = _forward(model, output_graph_gates=True)
    fused_grads = torch.autograd.grad(fused.logits.sum(), trained, allow_unused=True)
    assert fused_calls  # the fused path ran
    monkeypatch.setattr(GraphEncoderLayerMixin, "_can_fuse", lambda self, kwargs: False)
    per_module = _forward(model, output_graph_gates=True)
    per_module_grads = torch.autograd.grad(per_module.logits.sum(), trained, allow_unused=True)
    torch.testing.assert_close(fused.logits, per_module.logits, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused.encoder_graph_gates, per_module.encoder_graph_gates, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused_grads, per_module_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_auto_link_kernel_picks_per_device_and_step():
    from hf_graphtf.attention_link import CarriedQueryKey, CarriedScores, use_score_path

    none = None
    on_cpu, elsewhere = torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4, device="meta")
    assert use_score_path("auto", "sdpa", on_cpu, none, False)  # CPU: the score sum measured faster
    assert not use_score_path("auto", "sdpa", elsewhere, none, False)  # GPU: one fused SDPA call
    assert not use_score_path("auto", "sdpa", elsewhere[:, :, :1], none, False)  # GPU decode step: concat too
    assert use_score_path("auto", "sdpa", on_cpu[:, :, :1], none, False)  # CPU decode step: scores
    assert use_score_path("auto", "eager", elsewhere, none, False)
    assert not use_score_path("concat", "sdpa", on_cpu, none, False)
    assert use_score_path("concat", "sdpa", on_cpu, none, True)  # probabilities requested
    assert use_score_path("concat", "sdpa", on_cpu, CarriedScores(on_cpu), False)  # a score carry arrived
    assert not use_score_path("concat", "sdpa", on_cpu, CarriedQueryKey(on_cpu, on_cpu), False)


def test_a_recipe_config_completed_later_equals_one_built_at_once(family):
    """`ModelArguments.fresh_config` completes the config validated when the recipe was read with the
    tokenizer's fields; it must equal the config built with all fields at once (no field derived at
    construction is left stale)."""
    from hf_graphtf.training import ModelArguments

    sizes = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2)
    model_args = ModelArguments(model_family=family, attention_link="both", **sizes)
    fields = dict(vocab_size=40, pad_token_id=3, eos_token_id=2, bos_token_id=1, decoder_start_token_id=3)
    built_at_once = MODEL_FAMILIES[family].config_class(
        **model_args.size_options(), **model_args.graph_options(), **fields
    )
    assert model_args.fresh_config(**fields).to_dict() == built_at_once.to_dict()


def test_a_stack_makes_each_additive_mask_once_and_never_from_a_callers_tensor(monkeypatch):
    """The score path's additive mask is made once per mask a stack built and dtype, not in every layer; a
    boolean mask the caller passes in as it is stays unmarked (the caller may change it in place)."""
    from hf_graphtf import attention_link

    made = []  # the masks converted, held (ids of freed tensors repeat)
    real = attention_link._additive_form
    monkeypatch.setattr(attention_link, "_additive_form", lambda keep, dtype: made.append(keep) or real(keep, dtype))
    # sdpa builds boolean masks; on a CPU the link sums scores (`use_score_path`), which adds them
    model = tiny_model("marian", OPTION_MATRIX["al-both"], attn_implementation="sdpa")
    input_ids, attention_mask = source_batch()
    attention_mask[0, -2:] = 0  # padding, so that the masks are tensors
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch())
    marked = [keep for keep in made if attention_link._ADDITIVE in keep.__dict__]  # the stacks' own masks
    assert marked  # the encoder's and the cross-attention's, at least
    assert all(sum(other is keep for other in made) == 1 for keep in marked)  # each converted once, not per layer
    keep = attention_mask.bool()[:, None, None, :]
    assert attention_link.stack_mask(keep, keep) is keep and attention_link._ADDITIVE not in keep.__dict__
