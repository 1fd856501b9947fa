"""The onnx and openvino engines (`translation.runtimes`): a model's graphs through Transformers' own exporters,
written so that ``transformers.exporters.ExportedModel.from_pretrained`` loads them, decoding as `generate` does
in fp32, used from a folder copied from elsewhere without any trust flag, and refused in one line where the
runtime is missing.

Exporting is tens of seconds a graph, so every test that builds is behind the slow marker; CI's pinned leg runs
them (`.ci/run`: ``pytest -m slow tests/test_runtime_engines.py``)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from exported_build import TEXTS, assert_decodes_as_generate, ending_model, sources, translate_with

from hf_graphtf import cli
from hf_graphtf.self_check import matrix
from hf_graphtf.translation import runtimes
from hf_graphtf.translation.aoti import ExportError
from hf_graphtf.translation.engine_choice import Host
from hf_graphtf.translation.engines import TRANSLATION_ENGINES
from hf_graphtf.translation.inference import load_model, translate_texts

ENGINES = tuple(runtimes.RUNTIMES)
#: the host `--engine auto` orders engines for (`engine_choice`): ONNX Runtime before OpenVINO, int8 first
AMD_HOST = Host(frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}), "AuthenticAMD")


def _on_host(monkeypatch, host: Host = AMD_HOST) -> None:
    monkeypatch.setattr(Host, "read", classmethod(lambda cls, cpuinfo=None: host))


def test_each_runtime_is_an_engine_whose_exports_are_data():
    for name in ENGINES:
        engine = TRANSLATION_ENGINES[name]
        assert engine.exports and not engine.runs_code
        assert engine.takes("fp32", "cpu") and not engine.takes("fp32", "cuda") and not engine.takes("bf16", "cpu")
        assert engine.takes("int8", "cpu") == ("int8" in runtimes.RUNTIMES[name].quantizers)


def test_building_openvino_int8_without_nncf_is_refused_in_one_line(monkeypatch, tmp_path):
    """Loading an openvino int8 export needs only openvino; building one needs NNCF, and says which extra."""
    real = runtimes.importlib.util.find_spec
    monkeypatch.setattr(
        runtimes.importlib.util, "find_spec", lambda name, *a: None if name == "nncf" else real(name, *a)
    )
    if runtimes.runtime_problem("openvino"):
        pytest.skip(runtimes.runtime_problem("openvino"))
    assert runtimes.runtime_problem("openvino", building="int8") == (
        "building openvino int8 needs nncf, not installed: pip install 'hf-graphtf[openvino-int8]'"
    )
    assert runtimes.runtime_problem("openvino", building="fp32") is None
    with pytest.raises(ExportError, match=r"needs nncf, not installed"):
        runtimes.export_runtime(tmp_path, "int8", engine="openvino")


def test_a_missing_runtime_is_refused_in_one_line_and_the_other_engines_remain(
    monkeypatch, tmp_path, tiny_tokenizer, capsys
):
    real = runtimes.importlib.util.find_spec
    monkeypatch.setattr(
        runtimes.importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a)
    )
    assert runtimes.runtime_problem("openvino") == (
        "the openvino engine needs openvino, not installed: pip install 'hf-graphtf[openvino]'"
    )
    folder = _save(tmp_path, tiny_tokenizer, "marian", "vanilla")
    capsys.readouterr()
    assert cli.main(["export", "--model", str(folder), "--engine", "openvino"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'hf-graphtf[openvino]'" in err and len(err.strip().splitlines()) == 1
    assert "openvino" in TRANSLATION_ENGINES and "aoti" in TRANSLATION_ENGINES


def test_a_second_export_to_a_folder_is_refused_while_one_runs(tmp_path, tiny_tokenizer):
    """As for the aoti engine: a second export would delete the first's building folder, so it is refused before
    it loads anything, naming the folder."""
    from hf_graphtf.folder_lock import FolderInUseError, hold_folder

    if problem := runtimes.runtime_problem("onnx"):
        pytest.skip(problem)
    folder = _save(tmp_path, tiny_tokenizer, "marian", "vanilla")
    target = runtimes.runtime_dir(folder, "onnx", "fp32")
    with hold_folder(target.parent, f".export-{target.name}.lock", lambda holder: holder):  # a live export
        with pytest.raises(FolderInUseError, match=f"{folder} is being exported for onnx in fp32 to {target}"):
            runtimes.export_runtime(folder, "fp32", engine="onnx")
    assert not target.exists()


def _save(tmp_path, tokenizer, family: str, name: str):
    model = ending_model(family, name)
    folder = tmp_path / f"{family}-{name}"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def linked(tmp_path_factory, tiny_tokenizer):
    """A tiny linked Marian (cumulative link in encoder and decoder) exported for every runtime."""
    for engine in ENGINES:
        if problem := runtimes.runtime_problem(engine):
            pytest.skip(problem)
    folder = _save(tmp_path_factory.mktemp("runtimes"), tiny_tokenizer, "marian", "al-both-cum")
    lines: list[str] = []
    for engine in ENGINES:
        runtimes.export_runtime(folder, "fp32", engine=engine, progress=lines.append)
    return folder, lines


def _generates_alike(folder, engine: str) -> None:
    """The engine's decoding gives `generate`'s tokens, greedy and beam, with sentences that end early."""
    _, model = load_model(str(folder), "cpu", "fp32", engine=engine)
    assert model.exported_decoding is not None, model.decoding_setup.reason
    ended_early = assert_decodes_as_generate(model, model.exported_decoding, engine)
    assert all(ended_early.values()), f"no sentence ended early: {ended_early}"


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_each_runtime_decodes_as_generate(linked, engine):
    folder, lines = linked
    assert any("the decoder step graph (2/2)" in line and runtimes.RUNTIMES[engine].label in line for line in lines)
    _generates_alike(folder, engine)
    eager, _ = translate_with(folder, "eager")
    translated, model = translate_with(folder, engine)
    assert translated == eager
    assert f"decoding with {runtimes.RUNTIMES[engine].label}" in model.decoding_setup.reason


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_transformers_loads_what_an_export_writes(linked, engine):
    from transformers.exporters import ExportedModel

    from hf_graphtf.translation.export_graphs import graph_inputs

    folder, _ = linked
    exported = ExportedModel.from_pretrained(
        runtimes.runtime_dir(folder, engine, "fp32"), **runtimes.RUNTIMES[engine].runner_options()
    )
    assert sorted(exported.components) == ["decoder_step", "encoder"]
    _, model = load_model(str(folder), "cpu", "fp32", engine="eager")
    module, args, _ = graph_inputs(model)["encoder"]
    got = exported.runners["encoder"](inputs_embeds=args[0], attention_mask=args[1])
    for ours, theirs in zip(got, module(*args)):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_copied_folder_translates_without_any_trust_flag(linked, tmp_path, monkeypatch, capsys):
    """Copied to another place, with a store that holds nothing of this user's, the ONNX export is used as it is:
    data, never asked to be trusted; and a copy whose weights changed is not used, and says why."""
    from hf_graphtf.translation import package_store

    _on_host(monkeypatch)
    monkeypatch.setenv(package_store.CACHE_ENV, str(tmp_path / "store"))
    monkeypatch.delenv(package_store.TRUST_ENV, raising=False)
    copy = tmp_path / "copy"
    shutil.copytree(linked[0], copy)
    translated, model = translate_with(copy, "auto")
    assert "decoding with ONNX Runtime" in model.decoding_setup.reason
    assert translated == translate_with(copy, "eager")[0]
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(copy), "--input", str(tmp_path / "in.txt"), "--max-new-tokens", "10"]
    for engine in ("openvino", "eager"):
        assert cli.main([*argv, "--dtype", "fp32", "--engine", engine, "--output", str(tmp_path / engine)]) == 0
    assert (tmp_path / "openvino").read_text() == (tmp_path / "eager").read_text()
    assert "decoding with OpenVINO" in capsys.readouterr().err
    original = (copy / "config.json").read_text()
    (copy / "config.json").write_text(json.dumps({**json.loads(original), "dropout": 0.3}))
    _, model = translate_with(copy, "auto")
    assert model.exported_decoding is None
    assert "onnx fp32 export" in model.decoding_setup.reason and "changed since" in model.decoding_setup.reason
    with pytest.raises(ExportError, match="changed since it was exported"):
        load_model(str(copy), "cpu", "fp32", engine="onnx")
    (copy / "config.json").write_text(original)
    (runtimes.runtime_dir(copy, "onnx", "fp32") / "decoder_step.onnx").write_bytes(b"not a graph")
    _, model = translate_with(copy, "auto")  # the next engine whose export loads: OpenVINO's
    assert "decoding with OpenVINO" in model.decoding_setup.reason
    assert "; passed over: the onnx fp32 export in" in model.decoding_setup.reason  # and why not ONNX Runtime's
    with pytest.raises(ExportError, match="does not load"):
        load_model(str(copy), "cpu", "fp32", engine="onnx")


@pytest.mark.slow
def test_an_onnx_int8_export_quantizes_the_products_and_says_how(linked, tmp_path, monkeypatch, capsys):
    """An int8 export, and then ``translate`` with no flags takes it, saying so: on a host with int8 dot
    products, int8 comes before the fp32 exports beside it."""
    import onnx

    folder = shutil.copytree(linked[0], tmp_path / "model")  # the module's folder keeps its fp32 exports only
    target = runtimes.export_runtime(folder, "int8", engine="onnx", progress=lambda line: None)
    ops = {node.op_type for node in onnx.load(target / "decoder_step.onnx", load_external_data=False).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    tokenizer, model = load_model(str(folder), "cpu", "int8", engine="onnx")
    assert "decoding with ONNX Runtime" in model.decoding_setup.reason
    assert "activations scaled per tensor" in model.decoding_setup.reason
    translated = translate_texts(tokenizer, model, TEXTS, progress=False, batch_size=2, max_new_tokens=10)
    assert len(translated) == len(TEXTS) and any(translated)
    with pytest.raises(ExportError, match="the onnx engine exports fp32, int8, not bf16"):
        runtimes.export_runtime(folder, "bf16", engine="onnx")
    _on_host(monkeypatch)
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--max-new-tokens", "10"]
    capsys.readouterr()
    assert cli.main([*argv, "--output", str(tmp_path / "no-flags.txt")]) == 0
    said = capsys.readouterr().err
    assert "translating in int8, as the model's onnx export (int8 first: avx512_vnni" in said
    assert "decoding with ONNX Runtime (onnx int8 export" in said
    assert cli.main([*argv, "--dtype", "int8", "--engine", "onnx", "--output", str(tmp_path / "named.txt")]) == 0
    assert (tmp_path / "no-flags.txt").read_text() == (tmp_path / "named.txt").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("family,name", [("bart", "graph-half-gate"), ("m2m_100", "al-dec-cum-gate")])
def test_the_other_families_export_to_onnx_and_decode_as_generate(tmp_path, tiny_tokenizer, family, name):
    if problem := runtimes.runtime_problem("onnx"):
        pytest.skip(problem)
    folder = _save(tmp_path, tiny_tokenizer, family, name)
    runtimes.export_runtime(folder, "fp32", engine="onnx", progress=lambda line: None)
    _generates_alike(folder, "onnx")


@pytest.mark.slow
def test_an_openvino_int8_export_compresses_the_weights_and_keeps_each_line_alone(linked, tmp_path):
    """NNCF's int8 weights, and OpenVINO quantizing activations per row: a line translates as it does alone,
    whatever is batched with it (unlike onnx int8, whose activations share one scale per tensor)."""
    import openvino

    if problem := runtimes.runtime_problem("openvino", building="int8"):
        pytest.skip(problem)
    folder = shutil.copytree(linked[0], tmp_path / "model")
    target = runtimes.export_runtime(folder, "int8", engine="openvino", progress=lambda line: None)
    graph = openvino.Core().read_model(target / "openvino_decoder_step.xml")
    constants = [op for op in graph.get_ops() if op.get_type_name() == "Constant"]
    assert any(op.get_element_type() == openvino.Type.i8 for op in constants)
    _, model = load_model(str(folder), "cpu", "int8", engine="openvino")
    assert "decoding with OpenVINO (openvino int8 export" in model.decoding_setup.reason
    assert "activations quantized per row" in model.decoding_setup.reason
    input_ids, attention_mask = sources()
    options = {"max_new_tokens": 12, "num_beams": 1}
    with torch.inference_mode():
        batched = model.exported_decoding.generate(model, input_ids=input_ids, attention_mask=attention_mask, **options)
        for row in range(input_ids.shape[0]):
            alone = model.exported_decoding.generate(
                model, input_ids=input_ids[row : row + 1], attention_mask=attention_mask[row : row + 1], **options
            )
            assert torch.equal(alone[0], batched[row, : alone.shape[1]]), row
            assert (batched[row, alone.shape[1] :] == matrix.PAD).all(), row
