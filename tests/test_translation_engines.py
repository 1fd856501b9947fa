"""The engines (`translation.engines`): one record each, read by the CLI and `load_model`; adding one is one
registration, and it is then offered, built for and decoded with, as the built-in ones are."""

from __future__ import annotations

import pytest
import torch

from hf_graphtf import cli
from hf_graphtf.self_check import matrix
from hf_graphtf.translation import engines
from hf_graphtf.translation.engines import TRANSLATION_ENGINES, TranslationEngine, register_engine
from hf_graphtf.translation.packages import PackageLookup


def test_the_built_in_engines_say_what_they_take_and_whether_loading_runs_code():
    eager, aoti = TRANSLATION_ENGINES["eager"], TRANSLATION_ENGINES["aoti"]
    assert not eager.exports and not eager.runs_code and eager.takes("fp16", "cuda")
    assert aoti.exports and aoti.runs_code and aoti.takes("int8", "cpu")
    assert not aoti.takes("fp16", "cpu") and not aoti.takes("fp32", "cuda:0")
    assert engines.engine_choices() == ("auto", "exported", "eager", "aoti", "onnx", "openvino")
    with pytest.raises(ValueError, match="registered already"):
        register_engine(TranslationEngine("auto", "a chooser's name"))


def test_an_engine_is_one_registration(tmp_path, tiny_tokenizer, monkeypatch, capsys):
    """A registered engine is an --engine choice of translate and export, export builds with it, and
    `load_model` decodes with what its ``find`` gives, saying so in the one line."""
    built, found = [], []

    def build(model_dir, dtype, *, output=None, command=None):
        built.append((model_dir, dtype, command))
        return tmp_path

    def find(model, model_dir, dtype, *, trust_exported=False):
        found.append(dtype)
        return PackageLookup(_Decoding(), "decoding with the stand-in engine", True)

    monkeypatch.setitem(
        TRANSLATION_ENGINES, "standin", TranslationEngine("standin", "a test's", build=build, find=find)
    )
    folder = tmp_path / "model"
    matrix.tiny_model("marian", {}, dtype=torch.float32).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    assert cli.main(["export", "--model", str(folder), "--engine", "standin", "--dtype", "fp32"]) == 0
    assert built == [(str(folder), "fp32", f"hf-graphtf export --model {folder} --engine standin --dtype fp32")]
    (tmp_path / "in.txt").write_text("w5 w6\n", encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--dtype", "fp32"]
    assert cli.main([*argv, "--engine", "standin", "--max-new-tokens", "2", "--quiet"]) == 0
    assert found == ["fp32"] and "decoding with the stand-in engine" in capsys.readouterr().err
    assert _Decoding.calls == 1
    with pytest.raises(SystemExit):  # gone again: no longer a choice
        monkeypatch.delitem(TRANSLATION_ENGINES, "standin")
        cli.main([*argv, "--engine", "standin"])


def test_auto_says_a_package_it_passed_over_for_the_one_that_decodes(tmp_path, tiny_tokenizer, monkeypatch):
    """Where one engine's package is there but does not load and the next one's decodes, the line names both:
    nothing is passed over silently."""
    from hf_graphtf.translation.inference import load_model

    def broken(model, model_dir, dtype, *, trust_exported=False):
        return PackageLookup(None, "the first export does not load (damaged)", True, held=True)

    def absent(model, model_dir, dtype, *, trust_exported=False):
        return PackageLookup(None, "no second export (hf-graphtf export builds one)", True)

    def working(model, model_dir, dtype, *, trust_exported=False):
        return PackageLookup(_Decoding(), "decoding with the third export", True)

    monkeypatch.setattr(engines, "TRANSLATION_ENGINES", {})
    for name, find in (("first", broken), ("second", absent), ("third", working)):
        engines.TRANSLATION_ENGINES[name] = TranslationEngine(name, "a test's", find=find)
    folder = tmp_path / "model"
    matrix.tiny_model("marian", {}, dtype=torch.float32).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    _, model = load_model(str(folder), "cpu", "fp32", engine="auto")
    assert model.decoding_setup.engine_note == (
        "decoding with the third export; passed over: the first export does not load (damaged)"
    )


class _Decoding:
    """What a stand-in engine's package does: `generate` as the model's own."""

    calls = 0

    def generate(self, model, **kwargs):
        _Decoding.calls += 1
        return model.generate(**kwargs)
