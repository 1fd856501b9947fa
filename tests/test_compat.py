"""The seam to Transformers' internals, the import warning and `hf-graphtf check` (CI runs these on the lowest,
the pinned and the newest releases)."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import textwrap

import pytest
import torch
from model_matrix import OPTION_MATRIX, source_batch, tiny_model
from transformers.models.bart.modeling_bart import BartDecoder, BartDecoderLayer
from transformers.models.marian.modeling_marian import MarianDecoder, MarianDecoderLayer

from hf_graphtf import cli, modeling_common, transformers_seam
from hf_graphtf.transformers_seam import CACHE_KWARG, take_cache


@pytest.mark.parametrize("vanilla", [MarianDecoder, MarianDecoderLayer, BartDecoder, BartDecoderLayer])
def test_the_seam_names_the_cache_as_the_installed_release_does(vanilla):
    assert CACHE_KWARG in inspect.signature(vanilla.forward).parameters


def test_the_seam_reads_an_outputs_cache_under_the_installed_name():
    from transformers.modeling_outputs import Seq2SeqLMOutput

    fields = {field.name for field in dataclasses.fields(Seq2SeqLMOutput)}
    assert CACHE_KWARG in fields
    cache = object()
    assert transformers_seam.output_cache(Seq2SeqLMOutput(**{CACHE_KWARG: cache})) is cache


def test_the_checks_cached_decode_uses_the_installed_cache_name_without_deprecation(recwarn):
    """`hf-graphtf check` feeds the cache back step by step as generation does; under the old name a
    5.24 release warns at every step (and a later one drops the name)."""
    from hf_graphtf import self_check

    case = self_check.Case("bart", "al-dec", "cpu", torch.float32)
    model = case.model()
    real_forward, seen = model.forward, []

    def forward(*args, **kwargs):
        seen.append({name: kwargs[name] is not None for name in ("cache", "past_key_values") if name in kwargs})
        return real_forward(*args, **kwargs)

    model.forward = forward
    input_ids, attention_mask = source_batch()
    sequences = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=4, do_sample=False)
    seen.clear()
    self_check.checks._stepwise_logits(model, input_ids, attention_mask, sequences)
    assert seen[0] == {CACHE_KWARG: False} and all(step == {CACHE_KWARG: True} for step in seen[1:])
    assert not [w for w in recwarn if "past_key_values" in str(w.message)]


def test_the_models_forward_is_the_installed_vanilla_forward_plus_the_gates():
    """Each model writes its ``forward`` out (`modeling_common`): the parameters of the installed release's
    vanilla ``forward``, in order, the cache under the name every tested release takes, and
    ``output_graph_gates`` keyword-only. A release that adds, drops or reorders one fails here, by name."""
    from hf_graphtf.families import FAMILIES

    for family in FAMILIES.values():
        pairs = [  # each model class and the Transformers class it extends (next in its MRO)
            (ours, next(c for c in ours.__mro__ if c.__module__.startswith("transformers.models.")))
            for ours in (family.seq2seq_class, family.base_model_class)
        ]
        for ours, vanilla in pairs:
            parameters = inspect.signature(ours.forward).parameters
            assert parameters["output_graph_gates"].kind is inspect.Parameter.KEYWORD_ONLY
            written = [name for name in parameters if name not in ("self", "output_graph_gates", "kwargs")]
            assert written == transformers_seam.vanilla_forward_parameters(vanilla), (ours.__name__, vanilla.__name__)
        assert [name for name in transformers_seam.SEQ2SEQ_FORWARD_PARAMETERS] == [
            name
            for name in inspect.signature(family.base_model_class.forward).parameters
            if name not in ("self", "output_graph_gates", "kwargs")
        ]


def test_the_models_hand_the_cache_on_under_the_installed_name_without_a_warning(recwarn):
    model = tiny_model("marian", OPTION_MATRIX["al-both"])
    input_ids, attention_mask = source_batch()
    with torch.no_grad():
        first = model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=input_ids[:, :1], use_cache=True
        )
        cache = transformers_seam.output_cache(first)
        model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=input_ids[:, 1:2],
            past_key_values=cache,
        )
    assert not [w for w in recwarn if "past_key_values" in str(w.message)]


def test_take_cache_accepts_either_name_and_refuses_both():
    cache = object()
    for name in ("cache", "past_key_values"):
        kwargs = {name: cache, "other": 1}
        assert take_cache(kwargs) is cache
        assert kwargs == {"other": 1}
    assert take_cache({}) is None
    with pytest.raises(ValueError, match="not both"):
        take_cache({"cache": cache, "past_key_values": cache})


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_the_linked_decoder_takes_its_cache_under_either_name(name, family):
    """Decoding step by step through the decoder stack with the cache under either name gives what one
    uncached pass gives: the cache reached the linked layers (on 5.24 it did not under `cache`)."""
    model = tiny_model(family, OPTION_MATRIX["al-dec"])
    input_ids, attention_mask = source_batch()
    decoder, encoder_out = model.get_decoder(), model.get_encoder()(input_ids, attention_mask).last_hidden_state
    start = model.config.decoder_start_token_id  # (M2M100's positions skip pad tokens: start as generate does)
    targets = torch.tensor([[start, 14, 15, 16], [start, 18, 19, 20]])
    full = decoder(input_ids=targets, encoder_hidden_states=encoder_out, encoder_attention_mask=attention_mask)
    cache = transformers_seam.new_decoder_cache(model.config)
    steps = []
    with torch.no_grad():
        for position in range(targets.shape[1]):
            out = decoder(
                input_ids=targets[:, position : position + 1],
                encoder_hidden_states=encoder_out,
                encoder_attention_mask=attention_mask,
                use_cache=True,
                **{name: cache},
            )
            steps.append(out.last_hidden_state)
    assert cache.get_seq_length() == targets.shape[1]
    torch.testing.assert_close(torch.cat(steps, dim=1), full.last_hidden_state, rtol=1e-10, atol=1e-10)


def test_untested_releases_name_the_newer_ones(monkeypatch):
    monkeypatch.setattr(transformers_seam.transformers, "__version__", "5.99.0")
    monkeypatch.setitem(transformers_seam.NEWEST_TESTED, "torch", torch.__version__.split("+")[0])
    assert transformers_seam.untested_releases() == [
        f"transformers 5.99.0 (tested {transformers_seam.LOWEST_TESTED['transformers']} to "
        f"{transformers_seam.NEWEST_TESTED['transformers']})"
    ]
    monkeypatch.setattr(transformers_seam.transformers, "__version__", transformers_seam.NEWEST_TESTED["transformers"])
    assert transformers_seam.untested_releases() == []


_IMPORT_WITH_A_NEWER_RELEASE = textwrap.dedent(
    """
    import warnings
    import torch, transformers
    import transformers.models.bart.modeling_bart, transformers.models.marian.modeling_marian  # (they reset it)
    transformers.__version__ = "5.99.0"
    torch.__version__ = "2.13.0"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import hf_graphtf  # noqa: F401
        import hf_graphtf.cli  # noqa: F401  (a second import warns no more)
    print(repr([str(w.message) for w in caught if "tested up to" in str(w.message)]))
    """
)


def test_importing_under_a_newer_transformers_warns_once_with_the_tested_range(monkeypatch):
    monkeypatch.setitem(transformers_seam.NEWEST_TESTED, "torch", "2.13.0")
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_WITH_A_NEWER_RELEASE], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    messages = eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - the repr of a list of str
    assert len(messages) == 1
    newest = transformers_seam.NEWEST_TESTED["transformers"]
    assert f"tested up to transformers {newest}" in messages[0]
    assert "transformers 5.99.0" in messages[0] and "hf-graphtf check" in messages[0]


def test_check_prints_versions_and_one_line_per_check(capsys):
    assert cli.main(["check", "--families", "marian", "--options", "vanilla", "al-dec"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("hf_graphtf ") and "transformers " in lines[0] and "torch " in lines[0]
    assert lines[1].startswith("device cpu")
    checks = [line for line in lines if line.startswith(("PASS", "FAIL"))]
    assert len(checks) == 5 + 4  # vanilla: equivalence + the four; al-dec: the four
    assert all(line.startswith("PASS") for line in checks)
    assert lines[-1].startswith("9 checks, all passed")


def test_check_fails_when_the_decoder_loses_its_cache(monkeypatch, capsys):
    """The fault of Transformers 5.24 before the seam: the linked decoder stack never sees the cache
    generate() hands it and starts a fresh one at every step."""

    def drop_cache(kwargs):
        take_cache(kwargs)
        return None

    monkeypatch.setattr(modeling_common, "take_cache", drop_cache)
    assert cli.main(["check", "--families", "bart", "--options", "al-dec"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  bart    al-dec" in out and "cached == uncached" in out
    assert "1 FAILED" in out or "2 FAILED" in out
    assert "method re-computation" in out and "PASS  bart    al-dec                       method" in out


def _case_whose_uncached_decode_swaps_a_tied_token(monkeypatch, dtype, num_beams, tie: bool):
    """A bf16 "rounding" stand-in: two tokens get identical embedding and output rows (an exact tie wherever
    one of them is chosen), and the uncached decode returns the generated sequence with the first of them
    swapped for the other. With ``tie`` False the second token's rows stay its own, so the swap is not a tie."""
    from hf_graphtf import self_check
    from hf_graphtf.self_check.matrix import source_batch as check_source_batch

    monkeypatch.undo()  # the real Case.model, not a stand-in an earlier call left
    case = self_check.Case("bart", "al-dec", "cpu", dtype)
    model = case.model()
    input_ids, attention_mask = check_source_batch("cpu")
    first = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=8, num_beams=num_beams)
    chosen = int(first[0, 2])
    twin = next(token for token in range(4, model.config.vocab_size) if token != chosen and token not in first)
    if tie:
        with torch.no_grad():  # lm_head is tied to the embeddings: the twin is the same token under a new id
            model.model.shared.weight[twin] = model.model.shared.weight[chosen]
            model.final_logits_bias[0, twin] = model.final_logits_bias[0, chosen]
    real_generate = model.generate

    def generate(*args, use_cache=True, **kwargs):
        out = real_generate(*args, use_cache=use_cache, **kwargs)
        if use_cache:
            return out
        swapped = out.clone()
        row, position = ((out == chosen) | (out == twin)).nonzero()[0].tolist()
        swapped[row, position] = twin if out[row, position] == chosen else chosen
        return swapped

    model.generate = generate
    monkeypatch.setattr(self_check.Case, "model", lambda self, **overrides: model)
    return case


@pytest.mark.parametrize("num_beams", [1, 3])
def test_check_takes_a_bfloat16_near_tie_for_rounding_and_nothing_else(monkeypatch, num_beams):
    """On an H200 bf16 decodes with and without the cache parted at near-ties and then went on as different
    sentences: the check must pass them on the cache's logits, fail the same parting in float32, and fail a
    greedy parting at tokens that are not a tie."""
    from hf_graphtf import self_check

    case = _case_whose_uncached_decode_swaps_a_tied_token(monkeypatch, torch.bfloat16, num_beams, tie=True)
    detail = self_check.checks.check_cached(case, num_beams)
    assert "sequences part" in detail and "logits through the cache" in detail
    if num_beams == 1:
        assert "near-tie (gap 0.00)" in detail
    case = _case_whose_uncached_decode_swaps_a_tied_token(monkeypatch, torch.float32, num_beams, tie=True)
    with pytest.raises(self_check.CheckFailed, match="!= uncached"):
        self_check.checks.check_cached(case, num_beams)
    if num_beams == 1:
        case = _case_whose_uncached_decode_swaps_a_tied_token(monkeypatch, torch.bfloat16, num_beams, tie=False)
        with pytest.raises(self_check.CheckFailed, match="not a near-tie"):
            self_check.checks.check_cached(case, num_beams)


def test_check_compares_decodes_of_different_lengths(monkeypatch):
    """A decode longer than the other is compared with the shorter one padded to its length, not refused or
    crashed on its shape: here the uncached decode goes on with one more token where the cached one has
    ended, which in bf16 is no near-tie (the stand-in's extra token against padding) and in float32 a
    difference."""
    from hf_graphtf import self_check
    from hf_graphtf.self_check.matrix import EOS

    for dtype, message in ((torch.bfloat16, "not a near-tie"), (torch.float32, "!= uncached")):
        monkeypatch.undo()
        case = self_check.Case("bart", "al-dec", "cpu", dtype)
        model = case.model()
        real_generate = model.generate

        def generate(*args, use_cache=True, _real=real_generate, **kwargs):
            out = _real(*args, use_cache=use_cache, **kwargs)
            return out if use_cache else torch.cat([out, torch.full_like(out[:, :1], EOS)], dim=1)

        model.generate = generate
        monkeypatch.setattr(self_check.Case, "model", lambda self, _model=model, **overrides: _model)
        with pytest.raises(self_check.CheckFailed, match=message):
            self_check.checks.check_cached(case, num_beams=1)


def test_check_fails_a_bfloat16_cache_whose_logits_drift(monkeypatch):
    """A cache fault that leaves the decodes equal (every cached step's logits shifted by a constant, which no
    argmax sees) fails on the logits fed through the cache, in bfloat16 too."""
    from hf_graphtf import self_check

    case = self_check.Case("bart", "al-dec", "cpu", torch.bfloat16)
    model = case.model()
    real_forward = model.forward

    def forward(*args, **kwargs):
        out = real_forward(*args, **kwargs)
        if kwargs.get(CACHE_KWARG) is not None:
            out.logits = out.logits + 1.0
        return out

    model.forward = forward
    monkeypatch.setattr(self_check.Case, "model", lambda self, **overrides: model)
    with pytest.raises(self_check.CheckFailed, match="logits"):
        self_check.checks.check_cached(case, num_beams=3)


def test_check_refuses_an_unknown_option_set(capsys):
    assert cli.main(["check", "--options", "no-such-option"]) != 0
    assert "unknown option set no-such-option" in capsys.readouterr().err


def test_check_covers_the_nllb_family_and_its_refusal_of_graph_attention(capsys, monkeypatch):
    assert cli.main(["check", "--families", "m2m_100", "--options", "vanilla", "al-both-gate", "graph-gate"]) == 0
    out = capsys.readouterr().out
    assert "PASS  m2m_100 vanilla" in out and "identical to M2M100ForConditionalGeneration" in out
    assert "PASS  m2m_100 al-both-gate                 method re-computation" in out
    assert "PASS  m2m_100 graph-gate                   not defined: refused" in out
    # a config that builds an option set its family does not define fails the check (here: Marian's, as
    # though graph attention were not defined for it)
    from hf_graphtf import self_check

    monkeypatch.setattr(self_check.runner, "supports", lambda family, options: False)
    assert cli.main(["check", "--families", "marian", "--options", "graph-gate"]) == 1
    assert "built, though the family does not define it" in capsys.readouterr().out
