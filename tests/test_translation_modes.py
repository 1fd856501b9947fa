"""Translating in cheaper formats: ``--dtype auto | fp32 | bf16 | fp16 | int8`` (hf_graphtf.translation.dtype_choice).

The rule ``auto`` follows is checked with stand-in ``/proc/cpuinfo`` files, so it holds on every host kind;
int8 and bf16 translation run for real on tiny models of every family and option set.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from model_matrix import FAMILIES, source_batch
from recipe_fixtures import one_thread, trained_tiny_model  # noqa: F401  (autouse fixture)

from hf_graphtf import cli
from hf_graphtf.self_check import matrix
from hf_graphtf.translation import dtype_choice, dtypes
from hf_graphtf.translation.dtype_choice import (
    canonical_dtype,
    quantize_int8,
    resolve_translation_dtype,
)
from hf_graphtf.translation.int8_linear import RowScaledInt8Linear


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return trained_tiny_model(tmp_path_factory)


def _cpuinfo(tmp_path, flags: str):
    path = tmp_path / f"cpuinfo-{flags.replace(' ', '-') or 'none'}"
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse2 avx2 {flags}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("flags", ["avx512_bf16", "amx_bf16 amx_tile"])
def test_auto_takes_bf16_only_where_the_cpu_computes_it(tmp_path, flags):
    mode = resolve_translation_dtype("auto", "cpu", _cpuinfo(tmp_path, flags))
    assert mode.dtype == "bf16" and mode.requested == "auto" and not mode.emulated
    assert "natively" in mode.reason and "\n" not in mode.reason


def test_auto_falls_back_to_fp32_with_one_line_on_a_cpu_without_bf16(tmp_path):
    mode = resolve_translation_dtype("auto", "cpu", _cpuinfo(tmp_path, "avx512f"))
    assert mode.dtype == "fp32" and mode.reason == "translating in fp32: this CPU has no native bf16"
    unreadable = resolve_translation_dtype("auto", "cpu", tmp_path / "absent")  # not Linux: cannot tell
    assert unreadable.dtype == "fp32" and "cannot tell" in unreadable.reason


def test_the_lines_auto_and_int8_print_point_to_the_measured_costs_rather_than_restate_them(tmp_path):
    """A measured figure lives on the results page, which the line names; the page has the section."""
    lines = [
        resolve_translation_dtype("auto", "cpu", _cpuinfo(tmp_path, "avx512_bf16")).reason,
        resolve_translation_dtype("int8", "cpu", _cpuinfo(tmp_path, "")).reason,
        cli._translate_dtype_help(),
    ]
    page = (Path(__file__).resolve().parents[1] / dtype_choice.RESULTS_PAGE).read_text(encoding="utf-8")
    named = []
    for line in lines:
        assert dtype_choice.RESULTS_PAGE in line, line
        assert not re.search(r"[0-9]\.[0-9]", line), line  # no figure restated
        section = re.search(rf"{re.escape(dtype_choice.RESULTS_PAGE)}, '([^']+)'", line).group(1)
        assert f"\n## {section}" in page, f"{section!r} is not a section of the page"
        named.append(section)
    # int8's figures are the per-row layers' (dtypes.quantize_int8), not quantize_dynamic's
    assert named == ["Fast translation", "int8 with a scale per row", "Fast translation"]


def test_int8_is_never_chosen_unasked(tmp_path):
    for flags in ("", "avx512_bf16", "amx_bf16 amx_int8 avx512_vnni"):
        assert resolve_translation_dtype("auto", "cpu", _cpuinfo(tmp_path, flags)).dtype != "int8"
    asked = resolve_translation_dtype("int8", "cpu", _cpuinfo(tmp_path, ""))
    assert asked.dtype == "int8" and "BLEU" in asked.reason and asked.torch_dtype == "float32"


def test_explicit_formats_are_kept_and_emulated_bf16_is_said(tmp_path):
    without = _cpuinfo(tmp_path, "")
    emulated = resolve_translation_dtype("bf16", "cpu", without)
    assert emulated.dtype == "bf16" and emulated.emulated and "emulates" in emulated.reason
    assert resolve_translation_dtype("fp32", "cpu", _cpuinfo(tmp_path, "avx512_bf16")).dtype == "fp32"
    assert resolve_translation_dtype("bfloat16", "cpu", without).dtype == "bf16"  # the alias
    with pytest.raises(ValueError, match="int8 runs on a CPU only"):
        resolve_translation_dtype("int8", "cuda")


def test_one_dtype_vocabulary_with_aliases():
    assert [canonical_dtype(name) for name in ("float32", "bfloat16", "float16", "int8")] == [
        "fp32",
        "bf16",
        "fp16",
        "int8",
    ]
    assert canonical_dtype("float64", ("fp32", "bf16", "fp64")) == "fp64"
    with pytest.raises(ValueError, match="dtype must be one of auto, fp32, bf16, fp16, int8"):
        canonical_dtype("int4")


@pytest.mark.parametrize("family", FAMILIES)
def test_int8_translates_every_option_set_with_the_right_shape(family):
    """Every family and option set quantizes and generates (greedy and beam): the link and graph paths read
    no ``.weight`` of a quantized linear layer; the logits stay near fp32's. A sentence's logits are the same
    beside another sentence (padded, in one batch) as alone: activations are scaled per row, so a batch-mate
    cannot move them (with one scale for the whole batch, torch's ``quantize_dynamic``, they moved by 0.6)."""
    input_ids, attention_mask = source_batch()
    for name, options in matrix.options_for(family).items():
        model = matrix.tiny_model(family, options, dtype=torch.float32)
        with torch.inference_mode():
            full = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=input_ids[:, :3]).logits
            quantized = quantize_int8(model)
            assert not any(type(m) is torch.nn.Linear for m in quantized.modules()), name
            assert any(isinstance(m, RowScaledInt8Linear) for m in quantized.modules()), name
            logits = quantized(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=input_ids[:, :3])
            assert logits.logits.shape == full.shape, name
            alone = quantized(
                input_ids=input_ids[1:], attention_mask=attention_mask[1:], decoder_input_ids=input_ids[1:, :3]
            )
            torch.testing.assert_close(alone.logits[0], logits.logits[1], rtol=0, atol=1e-5, msg=name)
            # int8 of a d=16 model: a rounding error of some percent, not another function
            assert (logits.logits - full).norm() < 0.3 * full.norm(), name
            for beams in (1, 2):
                out = quantized.generate(
                    input_ids=input_ids, attention_mask=attention_mask, num_beams=beams, max_new_tokens=4
                )
                assert out.shape[0] == input_ids.shape[0] and out.shape[1] <= 5, name


@pytest.mark.parametrize("dtype, torch_dtype", [("int8", torch.float32), ("bf16", torch.bfloat16)])
def test_the_cli_translates_in_int8_and_bf16_and_says_so(trained, tmp_path, capsys, monkeypatch, dtype, torch_dtype):
    seen = {}
    real_load = cli.load_model

    def spy(*args, **kwargs):
        tokenizer, model = real_load(*args, **kwargs)
        seen["mode"], seen["dtype"] = model.decoding_setup, model.dtype
        return tokenizer, model

    monkeypatch.setattr(cli, "load_model", spy)
    lines = ["El rey dijo pan.", "", "El hombre y la mujer vieron la tierra."]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt")]
    argv += ["--output", str(tmp_path / "out.txt"), "--max-new-tokens", "4", "--quiet", "--dtype", dtype]
    assert cli.main(argv) == 0
    outputs = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(outputs) == 3 and outputs[1] == "" and outputs[0]
    assert seen["mode"].dtype == dtype and seen["dtype"] == torch_dtype
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-graphtf: translating")]
    assert len(said) == 1 and dtype in said[0]


def test_the_cli_default_is_auto_and_says_its_choice(trained, tmp_path, capsys, monkeypatch):
    """Without --dtype, translate picks by the device and says so in one line; on a CPU without bf16
    (stand-in flags) it falls back to fp32, saying why."""
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt"), "--quiet"]
    argv += ["--max-new-tokens", "4"]
    for flags, expected in ((set(), "fp32"), ({"avx512_bf16"}, "bf16")):
        monkeypatch.setattr(dtypes, "cpu_flags", lambda cpuinfo, flags=flags: {"sse2", *flags})
        assert cli.main([*argv, "--output", str(tmp_path / f"{expected}.txt")]) == 0
        said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-graphtf:")]
        assert said == [said[0]] and f"translating in {expected}" in said[0]
    with pytest.raises(SystemExit):  # refused by the parser, naming the choices
        cli.main([*argv, "--dtype", "int4"])
    assert "dtype must be one of" in capsys.readouterr().err


def test_evaluate_and_check_keep_fp32_by_default_and_take_the_aliases():
    parser = cli.build_parser()
    assert parser.parse_args(["evaluate", "--model", "m", "--source", "s"]).dtype == "fp32"
    assert parser.parse_args(["translate", "--model", "m"]).dtype == "auto"
    assert parser.parse_args(["check", "--dtype", "bfloat16"]).dtype == "bf16"
    assert parser.parse_args(["check", "--dtype", "float64"]).dtype == "fp64"


def test_compiling_is_chosen_only_where_it_measured_faster():
    """``--compile auto`` compiles nowhere it has not paid: not on a CPU (measured slower for beam search,
    compile time included), not on an unmeasured GPU; ``on`` compiles and says the wait, ``off`` does not."""
    assert dtype_choice.decides_to_compile("auto", "cpu") == (False, "")
    assert dtype_choice.decides_to_compile("auto", "cuda:0") == (False, "")
    compiled, reason = dtype_choice.decides_to_compile("on", "cpu")
    assert compiled and "each new batch shape waits" in reason
    assert dtype_choice.decides_to_compile("off", "cuda") == (False, "")
    with pytest.raises(ValueError, match="compile must be one of auto, on, off"):
        dtype_choice.decides_to_compile("yes", "cpu")
    with pytest.raises(ValueError, match="not int8 .*`hf-graphtf export --dtype int8` compiles"):  # exported instead
        dtype_choice.decides_to_compile("on", "cpu", "int8")


def test_the_cli_compiles_decoding_on_request_and_translates_the_same(trained, tmp_path, capsys, monkeypatch):
    """``--compile on``: static cache, the forward compiled whole (here with the eager backend, as fast to
    compile as a test needs), the same translations as eager decoding, and the choice said; with int8 it is
    refused before anything loads."""
    compiled = []
    real_compile = dtype_choice.compile_decoding

    def eager_backend(model, backend="inductor"):
        compiled.append(model)
        return real_compile(model, backend="eager")

    monkeypatch.setattr(dtype_choice, "compile_decoding", eager_backend)
    monkeypatch.setattr(cli_inference(), "compile_decoding", eager_backend)
    lines = ["El rey dijo pan.", "El hombre y la mujer vieron la tierra."]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt"), "--quiet"]
    argv += ["--max-new-tokens", "4", "--beam-size", "2", "--dtype", "fp32"]
    assert cli.main([*argv, "--output", str(tmp_path / "eager.txt")]) == 0
    assert not compiled
    capsys.readouterr()
    assert cli.main([*argv, "--compile", "on", "--output", str(tmp_path / "compiled.txt")]) == 0
    assert len(compiled) == 1 and compiled[0].generation_config.cache_implementation == "static"
    assert compiled[0].decoding_setup.compiled
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-graphtf:")]
    assert len(said) == 1 and "compiling the decoding step" in said[0]
    eager_text = (tmp_path / "eager.txt").read_text(encoding="utf-8")
    assert (tmp_path / "compiled.txt").read_text(encoding="utf-8") == eager_text
    compiled.clear()
    assert cli.main([*argv[:-2], "--dtype", "int8", "--compile", "on", "--output", str(tmp_path / "x.txt")]) != 0
    assert "not int8" in capsys.readouterr().err and not compiled


def test_a_model_torch_cannot_compile_is_said_in_one_line(trained, tmp_path, capsys, monkeypatch):
    """Where torch's compiler fails on the forward (torch 2.6 on Transformers 5.17 does), ``--compile on``
    ends with one ``error:`` line naming torch and the compiler's reason, not a compiler trace."""
    import torch

    def fails(*args, **kwargs):
        raise torch._dynamo.exc.TorchDynamoException("call_method co_varnames __contains__\n(the trace)")

    monkeypatch.setattr(torch, "compile", lambda forward, **options: fails)
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    argv = ["translate", "--model", str(trained.output_dir), "--input", str(tmp_path / "in.txt"), "--quiet"]
    argv += ["--max-new-tokens", "4", "--dtype", "fp32", "--compile", "on"]
    assert cli.main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: torch {torch.__version__} cannot compile this model's decoding step (TorchDynamoException: "
        "call_method co_varnames __contains__); translate without --compile"
    ]


def cli_inference():
    """The module whose ``compile_decoding`` the CLI's loading calls."""
    from hf_graphtf.translation import loading

    return loading


def test_compiled_decoding_of_nllb_models_is_refused_where_transformers_cannot_trace_it(monkeypatch):
    """M2M100/NLLB position embeddings branch on the cache length before Transformers 5.20, which a static cache
    makes a tensor: compiling decoding there would fail at the first step with a compiler trace. It is refused
    before any translating, naming the release; other families and newer releases compile."""
    from hf_graphtf import transformers_seam

    refusal = transformers_seam.compiled_decoding_refusal
    assert "transformers >= 5.20.0" in refusal("graph_m2m_100", installed="5.19.0")
    assert "installed: 5.17.0" in refusal("m2m_100", installed="5.17.0")
    assert refusal("graph_m2m_100", installed="5.20.0") is None
    assert refusal("graph_marian", installed="5.17.0") is None
    monkeypatch.setitem(transformers_seam.COMPILED_DECODING_SINCE, "m2m_100", "99.0.0")
    with pytest.raises(ValueError, match="needs transformers >= 99.0.0"):
        dtype_choice.compile_decoding(matrix.tiny_model("m2m_100", {}), backend="eager")
    dtype_choice.compile_decoding(matrix.tiny_model("marian", {}), backend="eager")  # not refused


def test_a_folder_saved_with_use_cache_false_decodes_with_its_cache_and_says_so_once(trained, tmp_path, capsys):
    """Folders trained before the fix carry ``"use_cache": false``: translate and the pipeline turn the cache
    back on (the same translations, faster) and say so once; a folder saved with it on says nothing."""
    import json
    import shutil
    import warnings

    from hf_graphtf import TranslationPipeline
    from hf_graphtf.translation_pipeline import CacheTurnedOnWarning

    folder = tmp_path / "old"
    shutil.copytree(trained.output_dir, folder, ignore=shutil.ignore_patterns("checkpoint-*"))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "use_cache": False}), encoding="utf-8")
    (tmp_path / "in.txt").write_text("El rey dijo pan.\n", encoding="utf-8")
    argv = ["translate", "--input", str(tmp_path / "in.txt"), "--max-new-tokens", "4", "--quiet", "--dtype", "fp32"]
    outputs = []
    for model in (folder, trained.output_dir):
        assert cli.main([*argv, "--model", str(model), "--output", str(tmp_path / f"{model.name}.txt")]) == 0
        outputs.append((tmp_path / f"{model.name}.txt").read_text(encoding="utf-8"))
        said = [line for line in capsys.readouterr().err.splitlines() if "use_cache: false" in line]
        assert len(said) == (1 if model == folder else 0)
    assert outputs[0] == outputs[1]
    tokenizer, model = cli.load_model(str(folder), "cpu", "fp32", engine="eager")
    assert model.config.use_cache is True and "use_cache: false" in model.decoding_setup.cache_note
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    old = AutoModelForSeq2SeqLM.from_pretrained(folder)
    with pytest.warns(CacheTurnedOnWarning, match="use_cache: false"):
        translator = TranslationPipeline(model=old, tokenizer=AutoTokenizer.from_pretrained(folder), device="cpu")
    assert old.config.use_cache is True
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheTurnedOnWarning)
        TranslationPipeline(model=old, tokenizer=translator.tokenizer, device="cpu")  # on now: nothing to say
