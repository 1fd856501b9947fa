"""The model card: Hub metadata, scores, options, usage and citations; the template ships with the package."""

from __future__ import annotations

import copy

import pytest
import yaml
from huggingface_hub import ModelCard
from recipe_fixtures import REPO_ROOT, trained_tiny_model

from hf_graphtf.model_card import TEMPLATE_PATH, describe_variant, render_model_card

RESULTS = {
    "model": {
        "family": "marian",
        "model_type": "graph_marian",
        "parameters": 9_876_543,
        "options": {
            "attention_link": "both",
            "attention_link_mode": "previous",
            "graph_attention": False,
            "graph_fusion": "gate",
            "graph_half_dim": False,
            "graph_shared_qkv": False,
        },
        "sizes": {"d_model": 256, "encoder_layers": 3, "decoder_layers": 3},
        "vocab_size": 8000,
        "license": "apache-2.0",
    },
    "data": {
        "corpus": "data/bible-es-en",
        "corpus_config": None,
        "hub_dataset": None,
        "name": "Bible es-en",
        "src_lang": "es",
        "tgt_lang": "en",
        "splits": {"train": "train_10k", "validation": "valid", "test": "test"},
    },
    "training": {"learning_rate": 0.001, "lr_scheduler_type": "inverse_sqrt", "generation_num_beams": 1},
    "train": {"global_step": 400, "train_runtime": 600.0},
    "test": {
        "bleu": 12.34,
        "chrf": 38.9,
        "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "chrf_signature": "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0",
        "sentences": 1516,
        "references_per_sentence": 1,
        "bleu_by_length": {"1-10": {"sentences": 100, "bleu": 20.5}, "11+": {"sentences": 0, "bleu": None}},
    },
    "test_multi_reference": {
        "bleu": 15.6,
        "chrf": 40.1,
        "bleu_signature": "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "chrf_signature": "nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0",
        "sentences": 1516,
        "references_per_sentence": 2,
        "bleu_by_length": {},
    },
    "samples": [{"id": "Gen.1.3", "source": 'Y dijo Dios: "Sea la luz".', "reference": "God said", "translation": "x"}],
}


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    header, _ = card[4:].split("\n---\n", 1)
    return yaml.safe_load(header)


def test_card_has_hub_metadata_with_model_index():
    card = render_model_card(RESULTS, model_id="someone/bible-al")
    meta = _front_matter(card)
    assert meta["language"] == ["es", "en"]
    assert meta["license"] == "apache-2.0"
    assert meta["pipeline_tag"] == "translation"
    assert meta["library_name"] == "transformers"
    assert meta["metrics"] == ["bleu", "chrf"]
    assert "datasets" not in meta  # a local corpus is no Hub dataset: `datasets:` would link one that does not exist
    hub = copy.deepcopy(RESULTS)
    hub["data"].update(corpus="iwslt14-de-en", hub_dataset="bbaaaa/iwslt14-de-en")
    assert _front_matter(render_model_card(hub, model_id="someone/x"))["datasets"] == ["bbaaaa/iwslt14-de-en"]
    assert {"translation", "hf_graphtf", "attention-link"} <= set(meta["tags"])
    (entry,) = meta["model-index"]
    assert entry["name"] == "bible-al"
    scores = {(m["name"], m["type"]): m["value"] for result in entry["results"] for m in result["metrics"]}
    assert scores[("BLEU", "bleu")] == 12.34 and scores[("chrF", "chrf")] == 38.9
    assert scores[("BLEU (all references)", "bleu")] == 15.6
    assert entry["results"][0]["dataset"]["split"] == "test"
    # huggingface_hub parses it back into the same evaluation results
    parsed = ModelCard(card).data
    assert parsed.eval_results[0].metric_value == 12.34


def test_card_shows_options_scores_usage_and_citations():
    card = render_model_card(RESULTS, model_id="someone/bible-al")
    assert "| `attention_link` | `both` |" in card
    assert "| 1-10 | 100 | 20.5 |" in card and "| 11+ | 0 | – |" in card
    assert 'AutoModelForSeq2SeqLM.from_pretrained("someone/bible-al", trust_remote_code=True)' in card
    assert "import hf_graphtf" in card
    # the example sentence (with quotes) stays valid Python and shell
    assert 'tokenizer([\'Y dijo Dios: "Sea la luz".\'], return_tensors="pt")' in card
    assert "echo 'Y dijo Dios: \"Sea la luz\".' | hf-graphtf translate" in card
    # only the papers whose method the model uses
    assert "arXiv:2302.00340" in card and "Min, Zeping" in card and card.count("@article{") == 1


@pytest.mark.parametrize(
    ("options", "cited"),
    [
        ({"attention_link": "none"}, []),
        ({"attention_link": "none", "graph_attention": True}, ["arXiv:2009.07489", "arXiv:2101.06397"]),
        ({"attention_link": "decoder", "graph_attention": True}, ["arXiv:2302.00340", "arXiv:2009.07489"]),
    ],
)
def test_the_card_cites_the_papers_of_the_methods_used(options, cited):
    results = copy.deepcopy(RESULTS)
    results["model"]["options"].update(options)
    card = render_model_card(results, model_id="someone/x")
    assert all(arxiv in card for arxiv in cited)
    assert ("## Citation" in card) == bool(cited)
    if not options.get("graph_attention"):
        assert "arXiv:2009.07489" not in card


def test_the_card_says_how_to_rebuild_the_corpus_and_what_the_run_left_undone():
    results = copy.deepcopy(RESULTS)
    results["data"].update(
        rebuild="hf-graphtf build-corpus --output-dir data/bible-es-en",
        extra_references="the KJV",
        card_limitations=["The Spanish side is the Reina-Valera of 1909."],
    )
    results["train"].update(stop_reason="time budget", validation_bleu=[[100, 5.0], [200, 9.0]])
    card = render_model_card(results, model_id="someone/x")
    assert "rebuild it with\n`hf-graphtf build-corpus --output-dir data/bible-es-en`" in card
    assert "further references: the KJV" in card
    limitations = card.split("## Limitations", 1)[1]
    assert "validation BLEU still rising at the last evaluation: the model is undertrained" in limitations
    assert "- The Spanish side is the Reina-Valera of 1909." in limitations
    results["train"].update(stop_reason="validation plateau", best_step=100, validation_bleu=[[100, 9.0], [200, 5.0]])
    limitations = render_model_card(results, model_id="someone/x").split("## Limitations", 1)[1]
    assert "stopped when validation BLEU stopped improving" in limitations and "undertrained" not in limitations


def test_the_card_names_test_sentences_seen_in_training_or_cut():
    results = copy.deepcopy(RESULTS)
    results["data"].update(
        sources_also_in_train={"validation": 0, "test": 3},
        cut_to_max_length={
            "train": {"pairs": 9, "sources": 2, "targets": 1},
            "test": {"pairs": 50, "sources": 4, "targets": 7},
        },
    )
    limitations = render_model_card(results, model_id="someone/x").split("## Limitations", 1)[1]
    assert "- 3 test sources also occur in the training split: scores on them measure memory." in limitations
    assert "- 4 of the 50 test sources were longer than the run's maximum source length and were cut" in limitations
    assert "validation sources" not in limitations  # none
    results["data"].update(
        sources_also_in_train={"test": 0}, cut_to_max_length={"test": {"pairs": 5, "sources": 0, "targets": 2}}
    )
    limitations = render_model_card(results, model_id="someone/x").split("## Limitations", 1)[1]
    assert "training split" not in limitations and "were cut" not in limitations  # a cut test target is not scored


def test_card_without_test_scores_has_no_model_index():
    results = copy.deepcopy(RESULTS)
    del results["test"], results["test_multi_reference"], results["samples"]
    card = render_model_card(results, model_id="local-model")
    assert "model-index" not in _front_matter(card)
    assert "not been evaluated" in card


@pytest.mark.parametrize(
    ("options", "phrase"),
    [
        ({}, "vanilla"),
        ({"attention_link": "encoder", "attention_link_mode": "cumulative"}, "encoder (cumulative"),
        ({"graph_attention": True, "graph_fusion": "self_gate", "graph_half_dim": True}, "self_gate fusion, graph"),
    ],
)
def test_variant_summary(options, phrase):
    assert phrase in describe_variant(options)


def test_trained_model_gets_a_card(tmp_path_factory):
    run = trained_tiny_model(tmp_path_factory)
    card = (run.output_dir / "README.md").read_text(encoding="utf-8")
    meta = _front_matter(card)
    assert meta["model-index"][0]["results"][0]["metrics"][0]["value"] == run.results["test"]["bleu"]
    # not pushed: a placeholder user that a reader sees at once, and a line saying what to put there
    assert f'from_pretrained("<your-hub-username>/{run.output_dir.name}", trust_remote_code=True)' in card
    assert "replace `<your-hub-username>/" in card
    assert "| steps trained | `4` |" in card and "| epochs trained |" in card
    assert "`None`" not in card and "trained from scratch" in card


def test_human_facing_template_is_the_packaged_one():
    assert (REPO_ROOT / "model_cards" / "template.md").read_bytes() == TEMPLATE_PATH.read_bytes()


def test_template_is_declared_as_package_data():
    """A non-editable install only contains the template if setuptools is told to ship it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert TEMPLATE_PATH.name in pyproject["tool"]["setuptools"]["package-data"]["hf_graphtf"]


def test_hub_corpora_are_named_by_their_hub_id(tmp_path):
    from hf_graphtf.training.records import hub_dataset_id

    assert hub_dataset_id("wmt14-en-de") == "wmt/wmt14"
    assert hub_dataset_id("someone/parallel-data") == "someone/parallel-data"
    assert hub_dataset_id(str(tmp_path)) is None
    results = copy.deepcopy(RESULTS)
    results["data"]["hub_dataset"] = "wmt/wmt14"
    assert _front_matter(render_model_card(results, model_id="m"))["datasets"] == ["wmt/wmt14"]


def test_token_batched_run_shows_its_token_budget_not_a_sentence_batch_size():
    results = copy.deepcopy(RESULTS)
    results["training"].update(per_device_train_batch_size=8, max_tokens_per_batch=1200)
    card = render_model_card(results, model_id="someone/bible-al")
    assert "| `max_tokens_per_batch` | `1200` |" in card and "per_device_train_batch_size" not in card


def test_a_run_resumed_after_its_training_finished_gets_a_card_without_a_training_time():
    """Killed after training finished and before results.json was written, a rerun evaluates from the
    checkpoint, whose state records steps and epochs but no training time: the card leaves that row out
    (it failed to render before)."""
    results = copy.deepcopy(RESULTS)
    results["train"] = {"global_step": 11, "epoch": 0.03, "best_checkpoint": None, "resumed_from_checkpoint": "c"}
    card = render_model_card(results, model_id="someone/x")
    assert "| steps trained | `11` |" in card and "training time (s)" not in card
