"""`hf-graphtf analyze` and the analysis functions behind it: graph gates and attention entropy."""

from __future__ import annotations

import json
import math

import pytest
import torch
from recipe_fixtures import tiny_model_config, write_tiny_corpus
from transformers import AutoModelForSeq2SeqLM

from hf_graphtf.analysis import attention_entropy_profile
from hf_graphtf.cli import main as cli_main

SOURCES = ["w3 w4 w5 w6 w7 w8", "w9 w10", "w11 w12 w13 w14", "w5"]
TARGETS = ["w20 w21 w22", "w23 w24 w25 w26 w27", "w28", "w29 w30"]


def _model(tokenizer, **options):
    torch.manual_seed(0)
    config = tiny_model_config(len(tokenizer), **options)
    return AutoModelForSeq2SeqLM.from_config(config, attn_implementation="eager").eval()


@pytest.mark.parametrize("options", [{}, {"attention_link": "both"}, {"graph_attention": True}])
def test_entropy_matches_a_plain_recomputation_and_ignores_padding(tiny_tokenizer, options):
    model = _model(tiny_tokenizer, **options)
    batched = attention_entropy_profile(tiny_tokenizer, model, SOURCES, TARGETS, batch_size=4)
    single = attention_entropy_profile(tiny_tokenizer, model, SOURCES, TARGETS, batch_size=1)
    for kind in ("encoder", "decoder", "cross"):
        assert batched[kind] == pytest.approx(single[kind], abs=1e-4), kind  # padding changes nothing
    # one sentence by hand: mean over heads and positions of -sum p log p of each attention row
    features = tiny_tokenizer([SOURCES[0]], text_target=[TARGETS[0]], return_tensors="pt")
    labels = features.pop("labels")
    with torch.no_grad():
        output = model(**features, labels=labels, output_attentions=True)
    weights = output.encoder_attentions[1].double()
    expected = float(-(weights * weights.log()).sum(-1).mean())
    alone = attention_entropy_profile(tiny_tokenizer, model, SOURCES[:1], TARGETS[:1])
    assert alone["encoder"][1] == pytest.approx(expected, abs=1e-4)
    assert all(0 <= value <= math.log(64) for kind in ("encoder", "decoder", "cross") for value in batched[kind])


def test_entropy_needs_attention_weights(tiny_tokenizer):
    model = _model(tiny_tokenizer)
    model.set_attn_implementation("sdpa")
    with pytest.raises(ValueError, match="eager"):
        attention_entropy_profile(tiny_tokenizer, model, SOURCES, TARGETS)


def test_analyze_writes_gate_and_entropy_figures(tmp_path, tiny_tokenizer):
    folder = tmp_path / "graph-gate"
    _model(tiny_tokenizer, graph_attention=True).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = [json.dumps({"translation": {"es": s, "en": t}}) for s, t in zip(SOURCES, TARGETS)]
    (corpus / "test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "analysis"
    code = cli_main(["analyze", "--model", str(folder), "--corpus", str(corpus), "--out", str(out), "--threads", "1"])
    assert code == 0
    for name in ("gates.json", "gates.png", "entropy.json", "entropy.png"):
        assert (out / name).stat().st_size > 0, name
    gates = json.loads((out / "gates.json").read_text())
    assert len(gates["layers"]) == 1  # graph attention replaces the encoder layers after the first
    assert len(json.loads((out / "entropy.json").read_text())["encoder"]) == 2


def test_analyze_of_a_model_without_gates_writes_entropy_only(tmp_path, tiny_tokenizer):
    folder = tmp_path / "vanilla"
    _model(tiny_tokenizer).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    corpus = write_tiny_corpus(tmp_path / "corpus", {"test": 3})
    out = tmp_path / "analysis"
    assert cli_main(["analyze", "--model", str(folder), "--corpus", str(corpus), "--out", str(out)]) == 0
    assert (out / "entropy.png").is_file() and not (out / "gates.json").exists()
