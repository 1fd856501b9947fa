"""Every family and option set of the test matrix through the onnx engine: exported by Transformers'
`OnnxExporter`, decoded inside `generate`, with `generate`'s tokens in fp32, greedy and beam.

Each case exports two graphs (seconds each), so the whole matrix is behind the slow marker; CI's pinned leg runs
it (`.ci/run`). The openvino engine decodes through the same `exported_decoding` path from the same graphs; its
cases are in test_runtime_engines.py."""

from __future__ import annotations

import pytest
import torch
from exported_build import ending_model, sources

from hf_graphtf.self_check import matrix
from hf_graphtf.translation import runtimes
from hf_graphtf.translation.inference import load_model

SEARCHES = {
    "greedy": {"num_beams": 1},
    "beam": {"num_beams": 3, "length_penalty": 0.6, "min_new_tokens": 2},
}
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
    input_ids, attention_mask = sources()
    for search, options in SEARCHES.items():
        kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, **options)
        with torch.inference_mode():
            eager = model.generate(**kwargs)
            exported = model.exported_decoding.generate(model, **kwargs)
        assert torch.equal(exported, eager), f"{family} {name} {search}:\n{exported}\n{eager}"
