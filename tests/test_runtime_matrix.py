"""Every family and option set of the test matrix through the onnx engine: exported by Transformers'
`OnnxExporter`, decoded inside `generate`, with `generate`'s tokens in fp32, greedy and beam.

Each case exports two graphs (seconds each), so the whole matrix is behind the slow marker; CI's pinned leg runs
it (`.ci/run`). The openvino engine decodes through the same `exported_decoding` path from the same graphs; its
cases are in test_runtime_engines.py."""

from __future__ import annotations

import pytest
from exported_build import assert_decodes_as_generate, ending_model

from hf_graphtf.self_check import matrix
from hf_graphtf.translation import runtimes
from hf_graphtf.translation.inference import load_model

CASES = [(family, name) for family in matrix.FAMILIES for name in matrix.options_for(family)]


@pytest.mark.slow
@pytest.mark.parametrize("family,name", CASES)
def test_every_family_and_option_decodes_through_onnx_as_generate(tmp_path, tiny_tokenizer, family, name):
    if problem := runtimes.runtime_problem("onnx"):
        pytest.skip(problem)
    folder = tmp_path / "model"
    ending_model(family, name, must_end_early=False).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    runtimes.export_runtime(folder, "fp32", engine="onnx", progress=lambda line: None)
    _, model = load_model(str(folder), "cpu", "fp32", engine="onnx")
    assert model.exported_decoding is not None, model.decoding_setup.reason
    assert_decodes_as_generate(model, model.exported_decoding, f"{family} {name}")
